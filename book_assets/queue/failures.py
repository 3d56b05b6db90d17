"""Pages failing now, and the requeue of those that can succeed.

A daily crawl enqueues every URL again, so the failed rows of a table that keeps history say little: a page
that failed on Monday and was stored on Tuesday is not failing. What counts is each URL's newest task
(``queue_failing_v1``, documented in ``schema.sql``): a page is *failing now* when that task is failed.

Not every failure is worth another request. A :class:`RequeuePolicy` names the error kinds that can change
(the caller's: the queue knows nothing of why a page failed), caps the requeues of one page and spaces them
out: the n-th requeue of a page waits ``backoff_s * growth ** n`` after its last attempt. A page that answers
404 is never requeued by it, and one whose site stays down is requeued a few times, ever further apart,
then left for an operator, instead of being fetched again every time a sensor looks.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from book_assets.db.connection import Database
from book_assets.sql import load_queries


@dataclass(frozen=True)
class RequeuePolicy:
    """Which failed pages may be requeued, how often, and how long after their last attempt."""

    kinds: frozenset[str]
    max_requeues: int
    backoff_s: float
    growth: float = 4.0

    def __post_init__(self) -> None:
        if self.max_requeues < 0 or self.backoff_s < 0 or self.growth < 1:
            raise ValueError("max_requeues and backoff_s must not be negative, growth must be at least 1")

    @classmethod
    def of(cls, kinds: Collection[str], max_requeues: int, backoff_s: float) -> RequeuePolicy:
        return cls(frozenset(kinds), max_requeues, backoff_s)

    def params(self) -> dict[str, Any]:
        return {
            "kinds": sorted(self.kinds),
            "max_requeues": self.max_requeues,
            "backoff_s": self.backoff_s,
            "growth": self.growth,
        }


@dataclass(frozen=True)
class Failing:
    """Pages failing now (distinct URLs), those a policy may requeue, and those due for it now."""

    failing: int
    requeueable: int
    due: int
    #: The due failures' newest task id and latest claim: they change with every new due failure.
    due_max_id: int | None
    due_last_claimed_at: datetime | None

    @property
    def permanent(self) -> int:
        """Failing pages the policy never requeues (a permanent kind, or their requeues used up)."""
        return self.failing - self.requeueable

    def watermark(self) -> str:
        """A key for the due failures: the same failures always give the same key, a new one a new key."""
        claimed = self.due_last_claimed_at.isoformat() if self.due_last_claimed_at else "never"
        return f"{self.due}-{self.due_max_id or 0}-{claimed}"


def failing_now(db: Database, policy: RequeuePolicy, task_types: Collection[str] | None = None) -> Failing:
    """The pages failing now, of ``task_types`` (every type when None), by what ``policy`` would do with them."""
    row = db.query(load_queries("queue")["failing_now"], {**policy.params(), "types": _types(task_types)})[0]
    return Failing(
        failing=int(row["failing"]),
        requeueable=int(row["requeueable"]),
        due=int(row["due"]),
        due_max_id=row["due_max_id"],
        due_last_claimed_at=row["due_last_claimed_at"],
    )


def requeue_due(db: Database, policy: RequeuePolicy, task_types: Collection[str] | None = None) -> int:
    """Move the failures of ``task_types`` (every type when None) due under ``policy`` back to pending (attempts
    reset, one requeue counted)."""
    params = {**policy.params(), "types": _types(task_types)}
    return int(db.query(load_queries("queue")["requeue_due"], params)[0]["requeued"])


def _types(task_types: Collection[str] | None) -> list[str] | None:
    return sorted(task_types) if task_types is not None else None
