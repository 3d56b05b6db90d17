"""A bad day never passes as a good one: a redesign that hides a field is drift, said out loud at the crawl's end
(a non-zero exit, one line per drifted field), and costs nothing good (the books keep their last good values, no
version records the loss, the change feed is silent) until an operator accepts it with one command."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from book_assets.cli import DRIFT_EXIT, main
from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets.publish.changes import changes_of_day
from book_assets.sandbox.redesign import Change, Redesign
from book_assets_tests.conftest import child_env
from book_assets_tests.crawl.conftest import sandbox_config
from book_assets_tests.crawl.test_change_feed import as_yesterday

pytestmark = pytest.mark.slow


def _cli_crawl(database_url: str, base_url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "book_assets.cli", "crawl", "--base-url", f"{base_url}/", "--fetch", "http"]
    return subprocess.run(
        [*command, "--workers", "1", "--concurrency", "8", "--no-progress"],
        env=child_env(DATABASE_URL=database_url),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _descriptions(db: Database) -> dict[str, str | None]:
    return {r["url"]: r["description"] for r in db.query("SELECT url, description FROM books")}


def _versions(db: Database) -> int:
    return int(db.query("SELECT count(*) AS n FROM book_versions")[0]["n"])


def _today() -> Any:
    return datetime.now(UTC).date()


def test_a_renamed_description_is_drift_held_at_the_door_until_accepted(
    db: Database, database_url: str, sandbox_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = sandbox_factory(books=100, categories=4)
    first = _cli_crawl(database_url, site.url, tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    good = _descriptions(db)
    described = sum(d is not None for d in good.values())
    assert len(good) == 100 and described >= 95
    as_yesterday(db)  # the first crawl's versions are yesterday's: today's feed holds only what follows
    versions = _versions(db)

    site.set_redesign(Redesign(day=0, changes=frozenset({Change.DESCRIPTION_ID})))
    second = _cli_crawl(database_url, site.url, tmp_path)
    assert second.returncode == DRIFT_EXIT, second.stderr[-2000:]
    before = f"{described * 100 / len(good):.1f}".removesuffix(".0")
    drift_lines = [line for line in second.stderr.splitlines() if line.startswith("drift: ")]
    assert len(drift_lines) == 1, second.stderr[-2000:]
    assert re.match(rf"drift: description: {re.escape(before)} % -> 0 % of pages \({described} of 100", drift_lines[0])
    assert "FIELD DRIFT" in second.stdout
    # The books keep their last good descriptions; no version records the loss; the feed reports nothing.
    assert _descriptions(db) == good
    assert _versions(db) == versions
    assert changes_of_day(db, _today()) == []
    crawl_id = int(db.query("SELECT max(id) AS id FROM crawls")[0]["id"])
    assert db.query("SELECT count(*) AS n FROM held_losses WHERE crawl_id = %s", (crawl_id,))[0]["n"] == described

    # The next day's crawl, nobody having looked yet, drifts against the same last good crawl.
    third = _cli_crawl(database_url, site.url, tmp_path)
    assert third.returncode == DRIFT_EXIT, third.stderr[-2000:]
    assert _descriptions(db) == good and _versions(db) == versions

    monkeypatch.setenv("DATABASE_URL", database_url)
    status = CliRunner().invoke(main, ["drift", "status"], catch_exceptions=False)
    assert status.exit_code == 0, status.output
    assert f"crawl {crawl_id}: description: {before} % -> 0 % of pages" in status.output
    assert f"crawl {crawl_id + 1}: description: {before} % -> 0 % of pages" in status.output
    assert f"{described} losses held" in status.output

    wrong = CliRunner().invoke(main, ["drift", "accept", "--crawl", str(crawl_id), "--field", "rating"])
    assert wrong.exit_code == 2 and "has no drift of 'rating'" in wrong.output

    accepted = CliRunner().invoke(
        main, ["drift", "accept", "--crawl", str(crawl_id), "--field", "description", "--by", "ops-on-call"]
    )
    assert accepted.exit_code == 0, accepted.output
    assert f"{described} held losses applied" in accepted.output and "by ops-on-call" in accepted.output
    assert f"and in crawl(s) {crawl_id + 1} after it" in accepted.output
    assert set(_descriptions(db).values()) == {None}
    assert _versions(db) == versions + described
    feed = changes_of_day(db, _today())
    assert len(feed) == described and all(row["fields"] == ["description"] for row in feed)
    who = db.query("SELECT crawl_id, accepted_by, applied FROM drift_acceptances ORDER BY crawl_id")
    assert [(r["crawl_id"], r["accepted_by"]) for r in who] == [
        (crawl_id, "ops-on-call"),
        (crawl_id + 1, "ops-on-call"),
    ]
    assert who[0]["applied"] == described
    status = CliRunner().invoke(main, ["drift", "status"], catch_exceptions=False)
    assert "no field drift held" in status.output and "by ops-on-call" in status.output

    # The accepted crawls are the next one's last good crawl: the redesigned site is the site now.
    fourth = _cli_crawl(database_url, site.url, tmp_path)
    assert fourth.returncode == 0, fourth.stderr[-2000:]
    assert f"fields: no drift against crawl {crawl_id + 1}" in fourth.stdout


def test_a_field_dropped_from_one_category_is_drift_of_that_category_only(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    site = sandbox_factory(books=150, categories=5)
    config = sandbox_config(site.url, drift_min_pages=10)
    assert not crawl(database_url, config).drift
    good = _descriptions(db)
    site.set_redesign(Redesign(day=0, changes=frozenset({Change.DESCRIPTION_DROPPED}), drop_share=0.2))
    report = crawl(database_url, config)
    assert report.fields is not None
    drifts = report.fields.drifts
    assert report.drift == ("description",)
    assert [d.category for d in drifts] != [""] and all(d.category for d in drifts), [d.line() for d in drifts]
    assert all(d.filled == 0 for d in drifts)
    assert _descriptions(db) == good


def _ratings(db: Database) -> dict[str, int | None]:
    return {r["url"]: r["rating_value"] for r in db.query("SELECT url, rating_value FROM books")}


def test_the_redesign_of_two_fields_fails_its_pages_and_drifts_both_fields_keeping_every_good_value(
    db: Database, database_url: str, sandbox_factory: Any, tmp_path: Path
) -> None:
    """The bad day as a user's daily run meets it: the same URLs, the rating's class and the description's id
    renamed. The rating is required, so each book page fails ``missing_field`` (kept, not stored); the
    description is optional, so its loss is held; the crawl exits non-zero naming both fields with their
    figures, and no rating or description is lost, versioned or reported changed."""
    site = sandbox_factory(books=60, categories=3)
    first = _cli_crawl(database_url, site.url, tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    ratings, descriptions = _ratings(db), _descriptions(db)
    assert len(ratings) == 60 and None not in ratings.values()
    as_yesterday(db)
    versions = _versions(db)

    site.set_redesign(Redesign(day=0, changes=frozenset({Change.RATING_CLASS, Change.DESCRIPTION_ID})))
    second = _cli_crawl(database_url, site.url, tmp_path)
    assert second.returncode == DRIFT_EXIT, second.stderr[-2000:]
    lines = [line for line in second.stderr.splitlines() if line.startswith("drift: ")]
    assert any(line.startswith("drift: rating: 100 % -> 0 % of pages") for line in lines), lines
    assert not any(line.startswith("drift: description:") for line in lines) or all(
        "-> 0 %" in line for line in lines if line.startswith("drift: description:")
    )
    failed = db.query("SELECT error_kind, count(*) AS n FROM tasks WHERE status = 'failed' GROUP BY error_kind")
    assert {r["error_kind"]: r["n"] for r in failed} == {"missing_field": 60}
    assert _ratings(db) == ratings and _descriptions(db) == descriptions
    assert _versions(db) == versions
    assert changes_of_day(db, _today()) == []
    kept = db.query("SELECT count(*) AS n FROM pages WHERE url LIKE '%%/catalogue/%%' AND body IS NOT NULL")
    assert kept[0]["n"] >= 60  # each failed book page's response is kept for reextract


def test_descriptions_cut_to_a_teaser_are_shape_drift_held_at_the_door_until_accepted(
    db: Database, database_url: str, sandbox_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The redesign that keeps the field filled: the paragraph the parser reads becomes a teaser of a few words.
    Every page still shows a description, so the fill rate holds; the median length falls, which is drift as a
    fall of the fill rate is: exit 3 with the figures, the last good descriptions kept, no version, no feed."""
    site = sandbox_factory(books=100, categories=4)
    first = _cli_crawl(database_url, site.url, tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    good = _descriptions(db)
    described = sum(d is not None for d in good.values())
    as_yesterday(db)
    versions = _versions(db)

    site.set_redesign(Redesign(day=0, changes=frozenset({Change.DESCRIPTION_TEASER})))
    second = _cli_crawl(database_url, site.url, tmp_path)
    assert second.returncode == DRIFT_EXIT, second.stderr[-2000:]
    drift_lines = [line for line in second.stderr.splitlines() if line.startswith("drift: ")]
    assert len(drift_lines) == 1, second.stderr[-2000:]
    shape = re.fullmatch(
        rf"drift: description: median length (\d+) -> (\d+) chars \({described} values in crawl 1 -> {described}\)",
        drift_lines[0],
    )
    assert shape is not None, drift_lines
    before, after = int(shape[1]), int(shape[2])
    assert after * 4 < before and after < 40, drift_lines
    assert _descriptions(db) == good
    assert _versions(db) == versions
    assert changes_of_day(db, _today()) == []
    crawl_id = int(db.query("SELECT max(id) AS id FROM crawls")[0]["id"])

    monkeypatch.setenv("DATABASE_URL", database_url)
    accepted = CliRunner().invoke(main, ["drift", "accept", "--crawl", str(crawl_id), "--field", "description"])
    assert accepted.exit_code == 0, accepted.output
    assert f"{described} held losses applied" in accepted.output
    assert f"crawl {crawl_id} no longer drifts: under Dagster, drift_cleared_sensor runs" in accepted.output
    teasers = _descriptions(db)
    assert all(teasers[url] != good[url] and len(teasers[url] or "") < 40 for url in good if good[url]), teasers
    assert _versions(db) == versions + described
    assert len(changes_of_day(db, _today())) == described


def test_one_rating_on_every_page_is_shape_drift_and_the_ratings_are_kept(
    db: Database, database_url: str, sandbox_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A widget above the rating makes the parser read 1 star on every page: the rating is still filled and of
    its type, and every book would change; the most common value's share jumps, which is drift."""
    site = sandbox_factory(books=100, categories=4)
    first = _cli_crawl(database_url, site.url, tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    ratings = _ratings(db)
    top = max(list(ratings.values()).count(r) for r in set(ratings.values()))
    as_yesterday(db)
    versions = _versions(db)

    site.set_redesign(Redesign(day=0, changes=frozenset({Change.RATING_WIDGET})))
    second = _cli_crawl(database_url, site.url, tmp_path)
    assert second.returncode == DRIFT_EXIT, second.stderr[-2000:]
    drift_lines = [line for line in second.stderr.splitlines() if line.startswith("drift: ")]
    assert drift_lines == [
        f"drift: rating: most common value on {top} % -> 100 % of values ({top} of 100 in crawl 1 -> 100 of 100: '1')"
    ], second.stderr[-2000:]
    assert _ratings(db) == ratings
    assert _versions(db) == versions
    assert changes_of_day(db, _today()) == []
    monkeypatch.setenv("DATABASE_URL", database_url)
    status = CliRunner().invoke(main, ["drift", "status"], catch_exceptions=False)
    other = sum(r != 1 for r in ratings.values())  # the books whose rating the page now shows as 1
    assert f"rating: most common value on {top} % -> 100 % of values" in status.output
    assert f"; {other} losses held" in status.output, status.output
