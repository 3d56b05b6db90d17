"""Export stored books as JSON Lines, CSV or Parquet (structured fields; raw HTML only when asked).

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
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from book_assets.db.connection import Database
from book_assets.sql import load_queries

Format = Literal["jsonl", "csv", "parquet"]
#: First characters that make a spreadsheet treat a cell as a formula (OWASP: = + - @ tab CR).
FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


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
    rows = db.query(load_queries("books")["export_books"], {"with_html": with_html})
    if not with_html:
        for row in rows:
            row.pop("raw_html", None)
    output.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        with output.open("w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps({k: plain(v) for k, v in row.items()}, ensure_ascii=False) + "\n")
    elif fmt == "csv":
        with output.open("w", encoding="utf-8", newline="") as fh:
            if rows:
                writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows({k: plain(spreadsheet_safe(v)) for k, v in row.items()} for row in rows)
    else:
        import pandas as pd

        frame = pd.DataFrame(rows)
        for column in ("price", "price_excl_tax", "price_incl_tax", "tax"):
            if column in frame:
                frame[column] = frame[column].astype("float64")
        frame.to_parquet(output, index=False)
    return len(rows)
