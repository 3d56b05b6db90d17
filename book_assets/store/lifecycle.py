"""A crawl's lifecycle in the ``crawls`` table: opened when it starts, found again by id, closed when it
reports (:func:`book_assets.store.removals.settle` closes it with what it decided).

Listing pages processed since a crawl's ``started_at`` are its own; opening a crawl abandons the earlier
ones that never reported, whose removals then stay undecided.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from book_assets.db.connection import Cursor, Database
from book_assets.settings import default
from book_assets.sql import load_queries

Q = load_queries("changes")


@dataclass(frozen=True)
class OpenCrawl:
    """A crawl whose removals are yet to be decided: listing pages processed since ``started_at`` are its own."""

    id: int
    started_at: datetime


def open_crawl(db: Database, site: str | None = None) -> OpenCrawl:
    """Begin a crawl of ``site`` (None: the default site): earlier crawls of that site that never reported are
    abandoned, their removals undecided; another site's open crawl goes on."""
    params = {"site": site or default("site")}

    def _open(cur: Cursor) -> OpenCrawl:
        cur.execute(Q["abandon_open_crawls"], params)
        cur.execute(Q["insert_crawl"], params)
        row = cur.fetchone()
        assert row is not None  # INSERT ... RETURNING returns the new row
        return OpenCrawl(row["id"], row["started_at"])

    return db.run(_open)


def close_undecided(db: Database, crawl: OpenCrawl, note: str) -> str:
    """Close ``crawl`` with its removals undecided for ``note`` (a site that keeps none), touching no record;
    a crawl already closed or abandoned stays as it ended. Returns why it is undecided."""

    def _close(cur: Cursor) -> str:
        cur.execute(Q["lock_crawl"], {"id": crawl.id})
        row = cur.fetchone()
        if row is not None and row["outcome"] is not None:
            return str(row["note"] or row["outcome"])
        params = {"complete": None, "incomplete": None, "removed": None, "returned": None}
        cur.execute(Q["close_crawl"], {**params, "id": crawl.id, "outcome": "undecided", "note": note})
        return note

    return db.run(_close)


def find_crawl(db: Database, crawl_id: int) -> OpenCrawl | None:
    """The crawl ``crawl_id`` (open or not: settling a closed one reports what it decided); None if unknown."""
    rows = db.query(Q["crawl_by_id"], {"id": crawl_id})
    return OpenCrawl(rows[0]["id"], rows[0]["started_at"]) if rows else None


@dataclass(frozen=True)
class FinishedCrawl:
    """A crawl of the ledger that has finished: how it ended and the removals it decided."""

    id: int
    started_at: datetime
    finished_at: datetime
    outcome: str
    removed: int | None
    returned: int | None


def finished_since(db: Database, since: datetime, site: str) -> list[FinishedCrawl]:
    """The crawls of ``site`` that finished after ``since`` (on the database's clock), oldest first."""
    return [FinishedCrawl(**row) for row in db.query(Q["crawls_finished_since"], {"since": since, "site": site})]


def running_crawl(db: Database) -> OpenCrawl | None:
    """The crawl opened and not yet reported (the latest, should two be open); None between crawls."""
    rows = db.query(Q["running_crawl"])
    return OpenCrawl(rows[0]["id"], rows[0]["started_at"]) if rows else None


def last_successful_crawl(db: Database) -> datetime | None:
    """When the latest crawl that decided its removals ended; None when none has (the dead-man alert's signal,
    served by the queue exporter so that it holds with the Dagster daemon dead)."""
    finished: datetime | None = db.query(Q["last_successful_crawl"])[0]["finished_at"]
    return finished
