"""Export stored records as JSON Lines, CSV or Parquet (structured fields; raw HTML only when asked), each file
written whole or not at all: the books (:func:`export_books`), and any site's tables (:func:`export_tables`).

Why CSV cells are rewritten: titles and descriptions are written by the site, and a spreadsheet opening the
CSV runs a cell that starts with ``=``, ``+``, ``-`` or ``@`` as a formula (``=HYPERLINK(...)`` leaks data,
DDE formulas run programs), and a leading tab or carriage return hides the same from a quick look. Per
OWASP's "CSV Injection" advice such a text cell gets a leading ``'``, which spreadsheets show as text and do
not evaluate; numbers are left alone (a negative price is not a formula). JSON Lines and Parquet are read
by programs, not spreadsheets, and keep every value exactly as stored.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from book_assets.db.connection import Database
from book_assets.publish.files import atomic_write
from book_assets.publish.publishing import ExportTable
from book_assets.sql import load_queries

Format = Literal["jsonl", "csv", "parquet"]
#: First characters that make a spreadsheet treat a cell as a formula (OWASP: = + - @ tab CR).
FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
#: The books' numeric columns PostgreSQL returns as ``Decimal``: floats in Parquet.
BOOK_FLOAT_COLUMNS = ("price", "price_excl_tax", "price_incl_tax", "tax")


def plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, date):  # a datetime too
        return value.isoformat()
    return value


def spreadsheet_safe(value: Any) -> Any:
    """A text cell a spreadsheet will not evaluate: ``'`` before a leading formula trigger; others as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_TRIGGERS):
        return "'" + value
    return value


def export_books(db: Database, fmt: Format, output: Path, *, with_html: bool = False) -> int:
    """Write every stored book to ``output``; returns the number of rows."""
    return write_table(books_table(db, with_html=with_html), fmt, output)


def books_table(db: Database, *, with_html: bool = False) -> ExportTable:
    """Every stored book as one export table (``raw_html`` only ``with_html``)."""
    rows = db.query(load_queries("books")["export_books"], {"with_html": with_html})
    if not with_html:
        for row in rows:
            row.pop("raw_html", None)
    return ExportTable("books", rows, BOOK_FLOAT_COLUMNS)


def export_tables(tables: Iterable[ExportTable], fmt: Format, folder: Path) -> list[tuple[Path, int]]:
    """Write each table to ``<folder>/<name>.<fmt>``; returns each file with its number of rows."""
    return [(folder / f"{t.name}.{fmt}", write_table(t, fmt, folder / f"{t.name}.{fmt}")) for t in tables]


def write_table(table: ExportTable, fmt: Format, output: Path) -> int:
    """Write ``table`` to ``output`` whole or not at all (a temporary file renamed into place); returns its rows.

    CSV: a header (none when there are no rows) and spreadsheet-safe text cells, lists joined by ``;``; JSON
    Lines and Parquet keep every value as stored (``float_columns`` as floats in Parquet).
    """
    rows = table.rows
    output.parent.mkdir(parents=True, exist_ok=True)

    def _write(path: Path) -> None:
        if fmt == "jsonl":
            with path.open("w", encoding="utf-8") as fh:
                for row in rows:
                    fh.write(json.dumps({k: plain(v) for k, v in row.items()}, ensure_ascii=False) + "\n")
        elif fmt == "csv":
            with path.open("w", encoding="utf-8", newline="") as fh:
                if rows:
                    writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
                    writer.writeheader()
                    writer.writerows({k: csv_cell(v) for k, v in row.items()} for row in rows)
        else:
            import pandas as pd

            frame = pd.DataFrame(rows)
            for column in table.float_columns:
                if column in frame:
                    frame[column] = frame[column].astype("float64")
            frame.to_parquet(path, index=False)

    atomic_write(output, _write)
    return len(rows)


def csv_cell(value: Any) -> Any:
    """A value as a CSV cell: a list joined by ``;``, a text made spreadsheet-safe, dates and decimals as text."""
    if isinstance(value, list):
        value = ";".join(str(v) for v in value)
    return plain(spreadsheet_safe(value))
