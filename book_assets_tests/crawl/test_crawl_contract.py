"""Crawls of a redesigned site: a product page that breaks the book's field contract fails with its own kind,
naming the field, and never reaches the books it would have overwritten."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from book_assets.archive import archive_files
from book_assets.archive.held import archived_source
from book_assets.archive.reader import ArchiveDamage
from book_assets.cli import main
from book_assets.crawl.config import CrawlConfig, make_queue
from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets.sandbox.redesign import Redesign, parse_changes
from book_assets.scraper.models import BookDetail
from book_assets.scraper.parsers import parse_book
from book_assets.store.books import reextract
from book_assets.store.held import reextract_held
from book_assets_tests.crawl.conftest import sandbox_config, stored_vs_truth

CATEGORIES = ("Travel", "Poetry")  # 30 books


def _failed_details(db: Database) -> dict[str, str]:
    rows = db.query("SELECT payload->>'url' AS url, error FROM tasks WHERE status = 'failed' AND task_type = 'detail'")
    return {r["url"]: r["error"] for r in rows}


@pytest.mark.parametrize(
    ("change", "error", "marker"),
    [
        ("rating_class", "missing_field: missing rating", b'class="rating-stars'),
        ("upc_moved", "missing_field: missing upc", b'class="product-identifiers"'),
    ],
)
def test_redesign_that_hides_a_required_field_fails_every_book_page_and_keeps_the_books(
    db: Database, database_url: str, sandbox_factory: Any, books_rows: Any, change: str, error: str, marker: bytes
) -> None:
    sandbox = sandbox_factory()
    config = sandbox_config(sandbox.url, mode="http", categories=CATEGORIES)
    first = crawl(database_url, config)
    assert first.counts["total"] == 30
    before = {r["url"]: r for r in books_rows()}

    sandbox.set_redesign(Redesign(day=0, changes=parse_changes(change)))
    second = crawl(database_url, config)

    failed = _failed_details(db)
    assert len(failed) == 30 and set(failed) == set(before)
    assert set(failed.values()) == {error}
    assert second.failed_by_reason == {"missing_field": 30}
    # The listings still parse (a card's rating is not the record): every book page was reached.
    assert db.query("SELECT count(*) AS n FROM tasks WHERE task_type = 'listing' AND status = 'failed'")[0]["n"] == 0
    # Nothing of the redesigned pages reached the books: same rows, same versions, no version 2.
    assert {r["url"]: r for r in books_rows()} == before
    assert db.query("SELECT count(*) AS n FROM book_versions WHERE version > 1")[0]["n"] == 0
    # Each failed page's response is kept whole, as served (the redesigned markup), for reextract.
    kept = db.query("SELECT url, body, content_hash FROM pages WHERE url = ANY(%s)", (list(failed),))
    assert len(kept) == 30
    assert all(marker in bytes(r["body"]) for r in kept)
    assert all(hashlib.sha256(bytes(r["body"])).hexdigest() == r["content_hash"] for r in kept)
    truth = {p: b for p, b in sandbox.catalogue.ground_truth().items() if b.category in CATEGORIES}
    assert stored_vs_truth(books_rows(), truth, sandbox.url) == []


def parse_after_the_redesign(html: str, url: str) -> BookDetail:
    """The parser as fixed for the rating_class redesign: it reads the rating from the renamed class too."""
    return parse_book(html.replace('<p class="rating-stars ', '<p class="star-rating '), url)


def _held_day(database_url: str, sandbox_factory: Any, **settings: Any) -> tuple[Any, CrawlConfig]:
    """Crawl day 0, then day 1 redesigned (rating_class): its 30 book pages held as missing_field."""
    server = sandbox_factory(day=0, redesign=Redesign(day=1, changes=parse_changes("rating_class")))
    config = sandbox_config(server.url, mode="http", categories=CATEGORIES, **settings)
    crawl(database_url, config)
    server.set_day(1)  # two Poetry books change that day; every book page is redesigned
    assert crawl(database_url, config).failed_by_reason == {"missing_field": 30}
    return server, config


def test_reextract_with_the_fixed_parser_rebuilds_the_held_day_from_the_kept_pages_without_the_network(
    db: Database, database_url: str, sandbox_factory: Any, books_rows: Any
) -> None:
    server, config = _held_day(database_url, sandbox_factory)
    queue = make_queue(db, config)
    requests = server.stats().total_requests

    # The parser as it is still fails them: nothing is stored, the CLI says so.
    unfixed = CliRunner().invoke(main, ["reextract"], env={"DATABASE_URL": database_url})
    assert unfixed.exit_code == 0, unfixed.output
    assert "held pages 30: 0 stored (none), 30 still failing, 0 with no response to parse" in unfixed.output
    assert "missing_field: missing rating" in unfixed.output
    report = reextract_held(db, queue, parser=parse_after_the_redesign)

    assert (report.held, report.stored, report.still_failing, report.without_body) == (
        30,
        {"changed": 2, "unchanged": 28},
        0,
        0,
    )
    assert server.stats().total_requests == requests  # nothing was fetched
    truth = {p: b for p, b in server.catalogue.ground_truth().items() if b.category in CATEGORIES}
    assert stored_vs_truth(books_rows(), truth, server.url) == []
    assert db.query("SELECT count(*) AS n FROM book_versions WHERE version = 2")[0]["n"] == 2
    assert _failed_details(db) == {}
    kept = db.query("SELECT url FROM pages WHERE body IS NOT NULL")  # listings keep theirs, a book's row its own
    assert [r["url"] for r in kept if "/catalogue/" in r["url"] and "/category/" not in r["url"]] == []
    assert reextract_held(db, queue, parser=parse_after_the_redesign).held == 0
    # The stored books' HTML is the redesigned page's now: the fixed parser reads it as stored.
    assert reextract(db, parser=parse_after_the_redesign).changed == 0


def test_reextract_from_the_warc_rebuilds_the_held_day_when_the_kept_responses_are_gone(
    db: Database, database_url: str, sandbox_factory: Any, books_rows: Any, tmp_path: Path
) -> None:
    server, config = _held_day(database_url, sandbox_factory, warc=True, warc_dir=tmp_path)
    queue = make_queue(db, config)
    requests = server.stats().total_requests
    db.query("UPDATE pages SET body = NULL WHERE url LIKE '%%/catalogue/%%' AND url NOT LIKE '%%/category/%%'")
    gone = reextract_held(db, queue, parser=parse_after_the_redesign)
    assert (gone.held, gone.stored, gone.without_body) == (30, {}, 30)

    damaged: list[ArchiveDamage] = []
    source = archived_source(archive_files(tmp_path), damaged)
    report = reextract_held(db, queue, parser=parse_after_the_redesign, source=source)

    assert (report.held, report.stored, report.still_failing, damaged) == (30, {"changed": 2, "unchanged": 28}, 0, [])
    assert server.stats().total_requests == requests
    truth = {p: b for p, b in server.catalogue.ground_truth().items() if b.category in CATEGORIES}
    assert stored_vs_truth(books_rows(), truth, server.url) == []
    assert _failed_details(db) == {}


def test_a_recrawl_answered_304_parses_the_held_pages_kept_copy_instead_of_downloading_it_again(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    server, config = _held_day(database_url, sandbox_factory)
    server.reset_stats()
    assert crawl(database_url, config).stats.errors == {"missing_field": 30}  # this crawl's failures

    books = {p: r for p, r in server.stats().responses.items() if "/catalogue/" in p and "/category/" not in p}
    assert len(books) == 30 and all(statuses == [304] for statuses in books.values()), books
    assert set(_failed_details(db).values()) == {"missing_field: missing rating"}
    kept = db.query(
        "SELECT count(*) AS n FROM pages WHERE body IS NOT NULL AND url = ANY(%s)", (list(_failed_details(db)),)
    )
    assert kept[0]["n"] == 30
