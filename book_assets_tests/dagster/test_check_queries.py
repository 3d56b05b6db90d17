"""The data-quality queries behind the blocking checks: each clause catches its kind of bad row on its own."""

from __future__ import annotations

import pytest

from book_assets.db.connection import Database
from book_assets.sql import load_queries

Q = load_queries("checks")
GOOD = {
    "url": "http://x.test/a",
    "title": "A Book",
    "category": "Travel",
    "price_amount": 1,
    "upc": "u",
    "raw_html": "<div class='product_main'>A Book</div>",
    "http_status": 200,
}


def _insert(db: Database, **values: object) -> None:
    row = {**GOOD, **values}
    columns = ", ".join(row)
    placeholders = ", ".join(f"%({k})s" for k in row)
    db.query(f"INSERT INTO books ({columns}) VALUES ({placeholders})", row)


def test_a_good_book_page_is_not_an_error_page(db: Database) -> None:
    _insert(db)
    assert db.query(Q["error_pages_stored"])[0]["bad"] == 0


@pytest.mark.parametrize(
    "bad",
    [
        {"raw_html": "<html><h1>Not Found</h1></html>"},
        {"title": "404"},
        {"title": None},
        {"http_status": 500},
        {"http_status": None},
    ],
    ids=["no product block", "404 title", "no title", "status 500", "no status"],
)
def test_each_sign_of_an_error_page_is_caught_on_its_own(db: Database, bad: dict[str, object]) -> None:
    _insert(db, **bad)
    assert db.query(Q["error_pages_stored"])[0]["bad"] == 1


@pytest.mark.parametrize("missing", ["title", "price_amount", "upc", "category"])
def test_each_missing_required_field_is_caught_on_its_own(db: Database, missing: str) -> None:
    _insert(db, **{missing: None})
    assert db.query(Q["missing_required_fields"])[0]["bad"] == 1
