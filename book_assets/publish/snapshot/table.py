"""The snapshot's PostgreSQL table: one day's rows replaced in one transaction.

``category_balanced_snapshot`` keeps one set of rows per ``snapshot_day``. Writing a day deletes and inserts
that day's rows in one transaction (DELETE, not TRUNCATE), so readers see the day's old snapshot or its new
one, never a mix or nothing, and the other days stay as they are.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from typing import Any

import pandas as pd
import psycopg2.extras

from book_assets.db.connection import Cursor, Database
from book_assets.sql import load_queries

TABLE = "category_balanced_snapshot"


def replace_day(db: Database, day: date, frame: pd.DataFrame) -> int:
    """Make ``frame`` the table's rows for ``day``; returns the number of rows written."""
    queries = load_queries("snapshot")
    # Each row's fields are the frame's columns (SNAPSHOT_COLUMNS), which pandas types only as "any scalar".
    rows: Iterable[Any] = frame.itertuples(index=False)
    values = [
        (
            day,
            r.url,
            r.title,
            r.category,
            None if pd.isna(r.price) else float(r.price),
            None if pd.isna(r.rating) else int(r.rating),
            None if pd.isna(r.stock) else int(r.stock),
            r.scraped_at.to_pydatetime(),
        )
        for r in rows
    ]

    def _replace(cur: Cursor) -> None:
        cur.execute(queries["clear_day"], {"day": day})
        if values:
            psycopg2.extras.execute_values(cur, queries["insert_rows"], values, page_size=500)

    db.run(_replace)
    return len(values)
