"""Exports a spreadsheet can open safely: formula-looking text is neutralised in CSV only (OWASP's CSV
injection advice); JSON Lines and Parquet keep every value exactly as stored.
"""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from book_assets.db.connection import Database
from book_assets.publish.export import export_books, spreadsheet_safe
from book_assets.scraper.fetching import build_result
from book_assets.scraper.parsers import parse_book
from book_assets.store.books import store_book

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real-site"
BOOK = "catalogue/a-light-in-the-attic_1000/index.html"
URL = f"https://books.toscrape.com/{BOOK}"
TITLE = '=HYPERLINK("x")'
HOSTILE = {"description": "+1+cmd|' /C calc'!A0", "product_type": "-2+3", "availability": "@SUM(A1)"}
HIDDEN = {"upc": "\t=1+1", "category": "\r=1+1"}


def _store_hostile_book(db: Database) -> None:
    """The real fixture page with a formula for a title (through the parser), then hostile text fields."""
    html = (REAL / BOOK).read_text(encoding="utf-8").replace("A Light in the Attic", TITLE.replace('"', "&quot;"))
    fetched = build_result(
        url=URL,
        final_url=URL,
        status=200,
        headers={"content-type": "text/html"},
        body=html.encode(),
        fetched_at=datetime.now(UTC),
        elapsed_s=0.01,
    )
    detail = parse_book(fetched.html, URL)
    assert detail.title == TITLE
    store_book(db, detail, fetched)
    fields = {**HOSTILE, **HIDDEN}
    statement = "UPDATE books SET " + ", ".join(f"{k} = %({k})s" for k in fields)
    db.run(lambda cur: cur.execute(statement, fields))


def test_formula_title_exports_neutralised_to_csv(db: Database, tmp_path: Path) -> None:
    _store_hostile_book(db)
    out = tmp_path / "books.csv"
    assert export_books(db, "csv", out) == 1
    row = next(csv.DictReader(out.open(encoding="utf-8", newline="")))
    assert row["title"] == "'" + TITLE
    for key, value in {**HOSTILE, **HIDDEN}.items():
        assert row[key] == "'" + value, key
    assert row["price"] == "51.77"  # numbers are not text cells: untouched
    assert row["url"] == URL


def test_formula_title_exports_exactly_to_jsonl_and_parquet(db: Database, tmp_path: Path) -> None:
    _store_hostile_book(db)
    jsonl, parquet = tmp_path / "books.jsonl", tmp_path / "books.parquet"
    export_books(db, "jsonl", jsonl)
    export_books(db, "parquet", parquet)
    line = json.loads(jsonl.read_text(encoding="utf-8").splitlines()[0])
    frame = pd.read_parquet(parquet).iloc[0]
    for row in (line, frame):
        assert row["title"] == TITLE
        for key, value in {**HOSTILE, **HIDDEN}.items():
            assert row[key] == value, key


@pytest.mark.parametrize(
    ("value", "safe"),
    [
        ("=1+1", "'=1+1"),
        ("+1", "'+1"),
        ("-1", "'-1"),
        ("@A1", "'@A1"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("A Light in the Attic", "A Light in the Attic"),
        ("", ""),
        (None, None),
        (-3, -3),
    ],
)
def test_spreadsheet_safe_prefixes_only_text_starting_with_a_formula_trigger(value: object, safe: object) -> None:
    assert spreadsheet_safe(value) == safe
