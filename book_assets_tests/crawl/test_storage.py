"""Storing books: versions on change, nothing on no change, re-extraction from stored HTML."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from book_assets.db.connection import Database
from book_assets.scraper.fetching import FetchResult, build_result
from book_assets.scraper.parsers import parse_book
from book_assets.store.books import book_counts, reextract, store_book

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real-site"
BOOK = "catalogue/a-light-in-the-attic_1000/index.html"
URL = f"https://books.toscrape.com/{BOOK}"


def _fetch(body: bytes, url: str = URL) -> FetchResult:
    return build_result(
        url=url,
        final_url=url,
        status=200,
        headers={"content-type": "text/html"},
        body=body,
        fetched_at=datetime.now(UTC),
        elapsed_s=0.01,
    )


def test_first_store_is_version_one_and_unchanged_page_adds_nothing(db: Database) -> None:
    fetched = _fetch((REAL / BOOK).read_bytes())
    detail = parse_book(fetched.html, URL)
    first = store_book(db, detail, fetched)
    assert (first.outcome, first.version) == ("new", 1)
    again = store_book(db, detail, _fetch((REAL / BOOK).read_bytes()))
    assert (again.outcome, again.version) == ("unchanged", 1)
    assert book_counts(db) == {"total": 1, "unique_urls": 1, "with_html": 1, "versions": 1}
    row = db.query("SELECT * FROM books")[0]
    assert row["raw_html"] == fetched.html and "£51.77" in row["raw_html"]
    assert (row["price"], row["price_amount"], row["rating"], row["rating_value"]) == (
        "£51.77",
        Decimal("51.77"),
        "Three",
        3,
    )
    assert (row["stock"], row["upc"], row["category"]) == (22, "a897fe39b1053632", "Poetry")


def test_changed_price_records_a_new_version_with_the_changed_fields(db: Database) -> None:
    body = (REAL / BOOK).read_bytes()
    fetched = _fetch(body)
    detail = parse_book(fetched.html, URL)
    store_book(db, detail, fetched)
    cheaper = replace(detail, price=Decimal("40.00"), price_text="£40.00", stock=21)
    result = store_book(db, cheaper, _fetch(body.replace(b"51.77", b"40.00")))
    assert (result.outcome, result.version) == ("changed", 2)
    assert set(result.changed) == {"price_amount", "stock"}
    history = db.query("SELECT version, fields->>'price_amount' AS price, changed FROM book_versions ORDER BY version")
    assert [(h["version"], h["price"]) for h in history] == [(1, "51.77"), (2, "40.00")]
    assert history[1]["changed"] == ["price_amount", "stock"]


def test_reextract_restores_blanked_fields_without_network(db: Database) -> None:
    for path in sorted(REAL.glob("catalogue/*/index.html")):
        url = f"https://books.toscrape.com/{path.relative_to(REAL).as_posix()}"
        fetched = _fetch(path.read_bytes(), url)
        store_book(db, parse_book(fetched.html, url), fetched)
    before = db.query("SELECT id, title, price_amount, upc, stock, description FROM books ORDER BY id")
    db.query("UPDATE books SET title = NULL, price_amount = NULL, upc = '', stock = NULL")
    report = reextract(db)
    assert (report.scanned, report.changed, report.unparseable) == (8, 8, 0)
    assert db.query("SELECT id, title, price_amount, upc, stock, description FROM books ORDER BY id") == before
    assert reextract(db).changed == 0


def test_reextract_reports_rows_whose_html_no_longer_parses(db: Database) -> None:
    fetched = _fetch((REAL / BOOK).read_bytes())
    store_book(db, parse_book(fetched.html, URL), fetched)
    db.query("UPDATE books SET raw_html = '<html><body>Not Found</body></html>'")
    report = reextract(db)
    assert (report.scanned, report.changed, report.unparseable) == (1, 0, 1)
    assert db.query("SELECT title FROM books")[0]["title"] == "A Light in the Attic"
