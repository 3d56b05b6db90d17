"""Choosing the snapshot's records: each category's weighted quota of the records stored at the end of a day.

:func:`build_snapshot` is generic: a :class:`~book_assets.publish.publishing.SnapshotSource` gives the records
per category as of a time (a site's definition gives its own, ``Site.publishing.snapshot``), and the quotas
are :func:`~book_assets.scheduling.quotas.split_budget`'s. The books' source is :class:`BookVersions`.

The books of a day are the latest version of each book recorded before the next midnight (UTC), read from
``book_versions`` through ``snapshot_books_as_of_v1`` (``sql/schema.sql``). Within a category the most recently
recorded versions are taken, then the lowest book id, so the same history always yields the same snapshot.
Counts and rows come from one REPEATABLE READ transaction, so they agree even while a crawl writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import pandas as pd

from book_assets.db.connection import Cursor, Database
from book_assets.publish.publishing import SnapshotRows, SnapshotSource
from book_assets.publish.snapshot.summary import category_summary
from book_assets.scheduling.quotas import split_budget
from book_assets.scheduling.weights import CategoryWeights
from book_assets.sql import load_queries

Q = load_queries("snapshot")

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


@dataclass(frozen=True)
class BookVersions:
    """The books as ``book_versions`` had them at a time (``snapshot_books_as_of_v1``): the books' snapshot
    source, and the one books' definition publishes (:attr:`Publishing.snapshot`)."""

    unit = "books"

    def category_counts(self, cur: Cursor, until: datetime) -> dict[str, int]:
        cur.execute(Q["category_counts"], {"until": until})
        return {r["category"]: int(r["available"]) for r in cur.fetchall()}

    def chosen(self, cur: Cursor, until: datetime, quotas: Mapping[str, int]) -> SnapshotRows:
        params = {"until": until, "categories": list(quotas), "quotas": list(quotas.values())}
        cur.execute(Q["select_books"], params)
        return SnapshotRows([dict(r) for r in cur.fetchall()], FRAME_DTYPES, ("scraped_at",))


#: The books' snapshot source.
BOOK_VERSIONS = BookVersions()


def build_snapshot(
    db: Database, weights: CategoryWeights, budget: int, day: date, source: SnapshotSource = BOOK_VERSIONS
) -> Snapshot:
    """Choose up to ``budget`` records of ``source`` (the books by default) as of the end of ``day``, each category
    getting its weighted quota."""
    until = day_bounds(day)[1]

    def _read(cur: Cursor) -> tuple[dict[str, int], dict[str, int], SnapshotRows]:
        cur.execute(Q["consistent_read"])
        available = source.category_counts(cur, until)
        quotas = split_budget(budget, weights, available)
        return available, quotas, source.chosen(cur, until, {c: q for c, q in quotas.items() if q > 0})

    available, quotas, chosen = db.run(_read)
    frame = records_frame(chosen)
    summary = category_summary(frame, weights, available, quotas)
    return Snapshot(day=day, frame=frame, summary=summary, budget=budget, quotas=quotas, available=available)


def books_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The chosen rows as a typed DataFrame (``FRAME_DTYPES``, then ``scraped_at`` in UTC)."""
    return records_frame(SnapshotRows(rows, FRAME_DTYPES, ("scraped_at",)))


def records_frame(chosen: SnapshotRows) -> pd.DataFrame:
    """The chosen rows as a typed DataFrame: ``chosen.dtypes``, then its time columns in UTC."""
    frame = pd.DataFrame(chosen.rows, columns=[*chosen.dtypes, *chosen.times])
    frame = frame.astype(dict(chosen.dtypes))
    for column in chosen.times:
        frame[column] = pd.to_datetime(frame[column], utc=True)
    return frame
