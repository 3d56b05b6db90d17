"""A re-extraction follows the crawl's contract: it never writes a held loss over a book's last good value, and
once the parser is fixed it rebuilds a drifted crawl's pages and judges that crawl's fields again from what is
stored, so its drift clears without the network and without anyone accepting a drift that was a parser bug."""

from __future__ import annotations

import re
from typing import Any

import pytest
from click.testing import CliRunner

from book_assets.cli import main
from book_assets.crawl.config import make_queue
from book_assets.crawl.pipeline import crawl, judge_again
from book_assets.db.connection import Database
from book_assets.sandbox.redesign import Change, Redesign
from book_assets.scraper.models import BookDetail
from book_assets.scraper.parsers import parse_book
from book_assets.store.books import reextract
from book_assets.store.drift import unaccepted_drift
from book_assets.store.held import reextract_held
from book_assets_tests.crawl.conftest import sandbox_config, stored_vs_truth

pytestmark = pytest.mark.slow


def _column(db: Database, name: str) -> dict[str, Any]:
    return {r["url"]: r[name] for r in db.query(f"SELECT url, {name} FROM books")}


def _versions(db: Database) -> int:
    return int(db.query("SELECT count(*) AS n FROM book_versions")[0]["n"])


def parse_after_the_redesign(html: str, url: str) -> BookDetail:
    """The parser as fixed for the redesign: it reads the rating's and the description's renamed markup."""
    fixed = html.replace('<p class="rating-stars ', '<p class="star-rating ')
    return parse_book(fixed.replace('id="product-description"', 'id="product_description"'), url)


def test_plain_reextract_after_a_held_description_drift_keeps_the_descriptions(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    site = sandbox_factory(books=60, categories=3)
    config = sandbox_config(site.url)
    assert not crawl(database_url, config).drift
    good = _column(db, "description")
    described = sum(d is not None for d in good.values())
    assert described >= 55
    site.set_redesign(Redesign(day=0, changes=frozenset({Change.DESCRIPTION_ID})))
    assert crawl(database_url, config).drift == ("description",)
    versions = _versions(db)

    # The stored HTML is the redesigned page now: the parser as it is finds no description in it.
    ran = CliRunner().invoke(main, ["reextract"], env={"DATABASE_URL": database_url}, catch_exceptions=False)

    assert ran.exit_code == 0, ran.output
    assert _column(db, "description") == good
    assert _versions(db) == versions
    assert f"held losses kept: {described} description" in ran.output
    assert db.query("SELECT count(*) AS n FROM held_losses")[0]["n"] == described
    assert [d.field for d in unaccepted_drift(db)] == ["description"]


def test_reextract_records_a_version_for_each_value_it_changes(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    site = sandbox_factory(books=30, categories=2)
    crawl(database_url, sandbox_config(site.url))
    versions = _versions(db)
    db.query("UPDATE books SET price_amount = 1.00 WHERE id IN (SELECT id FROM books ORDER BY id LIMIT 3)")

    report = reextract(db)

    history = db.query("SELECT changed FROM book_versions WHERE version = 2")
    assert [r["changed"] for r in history] == [["price_amount"]] * 3
    assert _versions(db) == versions + 3
    assert (report.changed, report.versions) == (3, 3)


def test_a_fixed_parser_rebuilds_the_drifted_crawl_and_its_drift_resolves_without_the_network(
    db: Database, database_url: str, sandbox_factory: Any, books_rows: Any
) -> None:
    site = sandbox_factory(books=60, categories=3)
    config = sandbox_config(site.url)
    assert not crawl(database_url, config).drift
    site.set_redesign(Redesign(day=0, changes=frozenset({Change.RATING_CLASS, Change.DESCRIPTION_ID})))
    site.set_day(1)  # the day's values differ from the first crawl's for some books
    drifted = crawl(database_url, config)
    assert "rating" in drifted.drift and set(drifted.failed_by_reason) == {"missing_field"}
    failed = drifted.failed_by_reason["missing_field"]
    assert failed >= 55
    crawl_id = int(db.query("SELECT max(id) AS id FROM crawls")[0]["id"])
    assert unaccepted_drift(db, crawl_id)
    requests = site.stats().total_requests

    queue = make_queue(db, config)
    held = reextract_held(db, queue, parser=parse_after_the_redesign)
    assert (held.held, held.still_failing) == (failed, 0)
    resolved = judge_again(db, queue, config)

    assert site.stats().total_requests == requests  # nothing was fetched
    assert [(r.crawl_id, r.resolved) for r in resolved] == [(crawl_id, ("rating",))]
    assert unaccepted_drift(db) == []
    truth = site.catalogue.ground_truth()
    served = [row for row in books_rows() if row["url"].removeprefix(site.url) in truth]  # not the removed ones
    assert len(served) == len(truth) and stored_vs_truth(served, truth, site.url) == []  # the day's values
    assert db.query("SELECT count(*) AS n FROM held_losses")[0]["n"] == 0
    rows = db.query("SELECT field, resolved_by FROM drift_resolutions WHERE crawl_id = %s", (crawl_id,))
    assert [(r["field"], r["resolved_by"]) for r in rows] == [("rating", "reextract")]

    status = CliRunner().invoke(main, ["drift", "status"], env={"DATABASE_URL": database_url})
    assert status.exit_code == 0, status.output
    assert "no field drift held" in status.output
    assert f"crawl {crawl_id}: the drift of rating resolved by reextract" in status.output


def test_the_reextract_command_judges_the_drifted_crawl_again(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    site = sandbox_factory(books=40, categories=2)
    config = sandbox_config(site.url)
    crawl(database_url, config)
    site.set_redesign(Redesign(day=0, changes=frozenset({Change.RATING_CLASS})))
    assert "rating" in crawl(database_url, config).drift
    crawl_id = int(db.query("SELECT max(id) AS id FROM crawls")[0]["id"])

    unfixed = CliRunner().invoke(main, ["reextract"], env={"DATABASE_URL": database_url}, catch_exceptions=False)

    assert unfixed.exit_code == 0, unfixed.output
    assert f"fields judged again: crawl {crawl_id} still drifts (rating)" in unfixed.output
    assert [d.field for d in unaccepted_drift(db)] == ["rating"]


def test_two_daily_crawls_drifted_before_the_fix_both_resolve_the_latest_from_its_own_pages(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    """The second drifted crawl re-fetches the held pages (a 304 confirms the kept copy), so the latest crawl
    holds them: it is judged again from them, and the earlier one's drift is resolved with it."""
    site = sandbox_factory(books=40, categories=2)
    config = sandbox_config(site.url)
    crawl(database_url, config)
    site.set_redesign(Redesign(day=0, changes=frozenset({Change.RATING_CLASS})))
    assert "rating" in crawl(database_url, config).drift
    assert "rating" in crawl(database_url, config).drift
    last = int(db.query("SELECT max(id) AS id FROM crawls")[0]["id"])
    assert sorted(d.crawl_id or 0 for d in unaccepted_drift(db)) == [last - 1, last]

    queue = make_queue(db, config)
    assert reextract_held(db, queue, parser=parse_after_the_redesign).still_failing == 0
    judged = judge_again(db, queue, config)

    assert [(r.crawl_id, r.resolved, r.stale) for r in judged] == [
        (last - 1, ("rating",), False),
        (last, ("rating",), False),
    ]
    assert unaccepted_drift(db) == []
    rows = db.query("SELECT crawl_id, judged_crawl_id, pages, filled FROM drift_resolutions ORDER BY crawl_id")
    assert [(r["crawl_id"], r["judged_crawl_id"]) for r in rows] == [(last - 1, last), (last, last)]
    assert rows[1]["pages"] == rows[1]["filled"] == 40


def parse_past_the_teaser(html: str, url: str) -> BookDetail:
    """The parser as fixed for ``description_teaser``: it reads the full text, not the teaser before it."""
    full = re.sub(
        r'<p class="teaser">.*?</p>\s*<div id="full-description" class="collapse">(<p>.*?</p>)</div>',
        r"\1",
        html,
        flags=re.S,
    )
    return parse_book(full, url)


def test_a_fixed_parser_resolves_a_shape_drift_and_the_days_real_changes_are_written_with_it(
    db: Database, database_url: str, sandbox_factory: Any, books_rows: Any
) -> None:
    """The teaser redesign lands on a day that also moves some prices: the prices are written at the crawl's end
    (their field did not drift), the descriptions held; the fixed parser's reextract releases them, the drift
    resolves, and the books equal the day's truth with one version per real change."""
    site = sandbox_factory(books=60, categories=3)
    config = sandbox_config(site.url)
    assert not crawl(database_url, config).drift
    good = _column(db, "description")
    site.set_redesign(Redesign(day=0, changes=frozenset({Change.DESCRIPTION_TEASER})))
    site.set_day(1)
    drifted = crawl(database_url, config)
    assert drifted.drift == ("description",)
    assert drifted.fields is not None and [d.drifted_on for d in drifted.fields.drifts] == ["length"]
    kept = _column(db, "description")
    assert {url: kept[url] for url in good} == good  # the day's new books are stored as their pages show them
    crawl_id = int(db.query("SELECT max(id) AS id FROM crawls")[0]["id"])
    changed = db.query("SELECT count(*) AS n FROM book_versions WHERE 'price_amount' = ANY (changed)")[0]["n"]
    assert changed > 0  # the day's price changes were written: only the drifted field is held

    ran = CliRunner().invoke(main, ["reextract"], env={"DATABASE_URL": database_url}, catch_exceptions=False)
    assert ran.exit_code == 0, ran.output
    assert f"crawl {crawl_id} still drifts (description)" in ran.output  # the parser as it is reads the teaser
    assert _column(db, "description") == kept

    queue = make_queue(db, config)
    reextract(db, parser=parse_past_the_teaser)
    resolved = judge_again(db, queue, config)

    assert [(r.crawl_id, r.resolved) for r in resolved] == [(crawl_id, ("description",))]
    assert unaccepted_drift(db) == [] and db.query("SELECT count(*) AS n FROM held_losses")[0]["n"] == 0
    truth = site.catalogue.ground_truth()
    served = [row for row in books_rows() if row["url"].removeprefix(site.url) in truth]
    assert len(served) == len(truth) and stored_vs_truth(served, truth, site.url) == []
    fixed = db.query("SELECT url FROM book_versions WHERE 'description' = ANY (changed)")
    assert {r["url"] for r in fixed} == set(kept) - set(good)  # only the day's new books, stored with a teaser
    status = CliRunner().invoke(main, ["drift", "status"], env={"DATABASE_URL": database_url})
    line = re.search(
        rf"crawl {crawl_id}: the drift of description resolved by reextract at .*: median length (\d+) -> (\d+) chars "
        r"judged again \(\d+ values\)",
        status.output,
    )
    assert line is not None and int(line[1]) * 4 < int(line[2]), status.output  # the teaser's, then the text's
