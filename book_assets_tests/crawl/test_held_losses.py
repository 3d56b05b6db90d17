"""A page that no longer shows an optional field never clears it silently: the loss is held while the crawl runs,
and applied (with a version and a line in the change feed) once the crawl's end finds no drift of the field."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from book_assets.db.connection import Database
from book_assets.publish.changes import changes_of_day
from book_assets.scraper.fetching import FetchResult, build_result
from book_assets.scraper.parsers import parse_book
from book_assets.store.books import store_book
from book_assets.store.drift import judge
from book_assets.store.lifecycle import open_crawl
from book_assets_tests.crawl.test_drift_unit import LIMITS

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real-site"
BOOK = "catalogue/a-light-in-the-attic_1000/index.html"
URL = f"https://books.toscrape.com/{BOOK}"


def _fetch(body: bytes) -> FetchResult:
    return build_result(
        url=URL,
        final_url=URL,
        status=200,
        headers={"content-type": "text/html"},
        body=body,
        fetched_at=datetime.now(UTC),
        elapsed_s=0.01,
    )


def _stored_with_description(db: Database) -> tuple[FetchResult, str]:
    fetched = _fetch((REAL / BOOK).read_bytes())
    detail = parse_book(fetched.html, URL)
    assert detail.description
    store_book(db, detail, fetched)
    return fetched, detail.description


def _page_without_description(fetched: FetchResult) -> tuple[FetchResult, object]:
    page = _fetch(fetched.body + b"<!-- served again -->")
    return page, replace(parse_book(page.html, URL), description=None, stock=None)


def test_a_lost_description_is_held_during_a_crawl_with_no_version(db: Database) -> None:
    fetched, description = _stored_with_description(db)
    open_crawl(db)
    page, lost = _page_without_description(fetched)
    stored = store_book(db, lost, page)  # type: ignore[arg-type]
    assert stored.outcome == "unchanged"
    row = db.query("SELECT description, stock, version FROM books")[0]
    assert (row["description"], row["stock"], row["version"]) == (description, 22, 1)
    assert db.query("SELECT count(*) AS n FROM book_versions")[0]["n"] == 1
    held = db.query("SELECT field FROM held_losses ORDER BY field")
    assert [r["field"] for r in held] == ["description", "stock"]


def test_a_loss_outside_a_crawl_is_written_as_before(db: Database) -> None:
    fetched, _ = _stored_with_description(db)
    page, lost = _page_without_description(fetched)
    stored = store_book(db, lost, page)  # type: ignore[arg-type]
    assert stored.outcome == "changed" and set(stored.changed) == {"description", "stock"}
    assert db.query("SELECT description FROM books")[0]["description"] is None


def test_a_page_showing_the_field_again_voids_its_held_loss(db: Database) -> None:
    fetched, description = _stored_with_description(db)
    open_crawl(db)
    page, lost = _page_without_description(fetched)
    store_book(db, lost, page)  # type: ignore[arg-type]
    store_book(db, parse_book(fetched.html, URL), fetched)
    assert db.query("SELECT count(*) AS n FROM held_losses")[0]["n"] == 0
    assert db.query("SELECT description FROM books")[0]["description"] == description


def test_a_genuine_loss_without_drift_is_applied_at_the_judgement_with_a_version_in_the_feed(db: Database) -> None:
    fetched, _ = _stored_with_description(db)
    crawl = open_crawl(db)
    page, lost = _page_without_description(fetched)
    store_book(db, lost, page)  # type: ignore[arg-type]
    judgement = judge(db, crawl.id, crawl.started_at, [], limits=LIMITS)
    assert judgement.drifts == () and judgement.applied == {"description": 1, "stock": 1}
    row = db.query("SELECT description, stock, version FROM books")[0]
    assert (row["description"], row["stock"], row["version"]) == (None, None, 2)
    versions = db.query("SELECT version, changed, fields->>'description' AS d FROM book_versions ORDER BY version")
    assert [(v["version"], sorted(v["changed"]), v["d"]) for v in versions][1:] == [(2, ["description", "stock"], None)]
    feed = changes_of_day(db, datetime.now(UTC).date())
    assert [(c["change"], sorted(c["fields"])) for c in feed] == [("new", ["description", "stock"])]
    assert db.query("SELECT count(*) AS n FROM held_losses")[0]["n"] == 0


def test_pages_failed_on_a_required_field_make_its_drift_line(db: Database) -> None:
    """Pages that fail the contract (``missing_field``, Part A's door of one page) count against the fields their
    error names: a crawl whose every page lacked the rating drifts from the last good crawl's 100 %."""
    first = open_crawl(db)
    fetched = _fetch((REAL / BOOK).read_bytes())
    store_book(db, parse_book(fetched.html, URL), fetched)
    good = [("Poetry", "missing_field: missing stock (http://x.test/rating_1/index.html)")] * 24
    assert judge(db, first.id, first.started_at, good, limits=LIMITS).drifts == ()
    second = open_crawl(db)
    failed = [("Poetry", "missing_field: missing rating (http://x.test/a_1/index.html)")] * 25
    judgement = judge(db, second.id, second.started_at, failed, limits=LIMITS)
    assert [d.line() for d in judgement.drifts] == ["rating: 100 % -> 0 % of pages (25 of 25 in crawl 1 -> 0 of 25)"]
    assert judgement.drifted_fields == ("rating",)
