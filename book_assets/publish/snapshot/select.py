"""Choosing the snapshot's books: each category's weighted quota of the books stored at the end of a day.

The books of a day are the latest version of each book recorded before the next midnight (UTC), read from
``book_versions`` through ``snapshot_books_as_of_v1`` (``sql/schema.sql``). Within a category the most recently
recorded versions are taken, then the lowest book id, so the same history always yields the same snapshot.
Counts and rows come from one REPEATABLE READ transaction, so they agree even while a crawl writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import pandas as pd

from book_assets.db.connection import Cursor, Database
from book_assets.publish.snapshot.summary import category_summary
from book_assets.scheduling.quotas import split_budget
from book_assets.scheduling.weights import CategoryWeights
from book_assets.sql import load_queries

#: Columns of :attr:`Snapshot.frame`, in order, with their dtypes (nullable ints: a book may lack a rating);
#: ``scraped_at`` (UTC) follows them: when the chosen version of the book was recorded.
FRAME_DTYPES: dict[str, str] = {
    "url": "string",
    "title": "string",
    "category": "string",
    "price": "float64",
    "rating": "Int64",
    "stock": "Int64",
}


@dataclass(frozen=True)
class Snapshot:
    """The chosen books (``frame``) and one row per category (``summary``) of one ``day``."""

    day: date
    frame: pd.DataFrame
    summary: pd.DataFrame
    budget: int
    quotas: dict[str, int]
    available: dict[str, int]


def day_bounds(day: date) -> tuple[datetime, datetime]:
    """``[start, end)`` of ``day`` in UTC: the versions recorded before ``end`` make the day's books."""
    start = datetime.combine(day, time.min, tzinfo=UTC)
    return start, start + timedelta(days=1)


def build_snapshot(db: Database, weights: CategoryWeights, budget: int, day: date) -> Snapshot:
    """Choose up to ``budget`` books of the end of ``day``, each category getting its weighted quota."""
    queries = load_queries("snapshot")
    until = day_bounds(day)[1]

    def _read(cur: Cursor) -> tuple[dict[str, int], dict[str, int], list[dict[str, Any]]]:
        cur.execute(queries["consistent_read"])
        cur.execute(queries["category_counts"], {"until": until})
        available = {r["category"]: int(r["available"]) for r in cur.fetchall()}
        quotas = split_budget(budget, weights, available)
        chosen = {c: q for c, q in quotas.items() if q > 0}
        params = {"until": until, "categories": list(chosen), "quotas": list(chosen.values())}
        cur.execute(queries["select_books"], params)
        return available, quotas, [dict(r) for r in cur.fetchall()]

    available, quotas, rows = db.run(_read)
    frame = books_frame(rows)
    summary = category_summary(frame, weights, available, quotas)
    return Snapshot(day=day, frame=frame, summary=summary, budget=budget, quotas=quotas, available=available)


def books_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The chosen rows as a typed DataFrame (``FRAME_DTYPES``, then ``scraped_at`` in UTC)."""
    frame = pd.DataFrame(rows, columns=[*FRAME_DTYPES, "scraped_at"])
    frame = frame.astype(FRAME_DTYPES)
    frame["scraped_at"] = pd.to_datetime(frame["scraped_at"], utc=True)
    return frame
