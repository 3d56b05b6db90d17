"""Value objects of the task queue: what goes in, what a claim hands out, what stats report."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class FailOutcome(StrEnum):
    """What a recorded failure did to its task."""

    RETRY = "retry"  #: pending again after its back-off
    DEAD = "dead"  #: failed for good, kept for inspection and requeue


@dataclass(frozen=True)
class NewTask:
    """One task to enqueue (see :meth:`TaskQueue.enqueue` for the meaning of each field)."""

    task_type: str
    payload: dict[str, Any]
    priority: int = 0
    group: str | None = None
    run_at: datetime | float | None = None
    max_attempts: int | None = None


@dataclass(frozen=True)
class EnqueueResult:
    """The live task for a URL and whether this call created it (False: deduplicated).

    ``id`` is None when the URL has no live task (it was enqueued in the current epoch and its task ended), or
    in the rare race where the duplicate was committed by another process after this statement's snapshot
    was taken.
    """

    id: int | None
    created: bool


@dataclass(frozen=True)
class Task:
    """A leased task. ``lease_token`` fences the lease: only its holder can complete, fail or extend it."""

    id: int
    task_type: str
    payload: dict[str, Any]
    priority: int
    domain: str
    group: str | None
    attempt: int
    max_attempts: int
    lease_token: int
    lease_expires_at: datetime
    slot_at: datetime | None
    #: When the politeness slot comes on this host's ``time.monotonic()``: ``slot_at`` (a database time) less
    #: the measured offset of the database's clock (:class:`~book_assets.queue.clock.DatabaseClock`). None
    #: without a slot. Waiting on it keeps the spacing however far this host's wall clock is off.
    slot_due: float | None = None

    @property
    def url(self) -> str:
        return str(self.payload["url"])

    def seconds_until_slot(self, now: float | None = None) -> float:
        """How long to sleep before starting the request (0 when there is no politeness slot or it passed).

        ``now`` is a ``time.monotonic()`` reading (default: the current one). Only intervals are compared,
        never this host's wall clock with the database's, so a skewed clock does not move the slot.
        """
        if self.slot_due is None:
            return 0.0
        return max(0.0, self.slot_due - (time.monotonic() if now is None else now))


@dataclass(frozen=True)
class ClaimResult:
    """Tasks handed out, in pick order, and when to ask again for work that waits for a politeness slot.

    ``retry_in_s`` is set when a domain with work is waiting for its next politeness slot: a claim before then
    finds none of that work (the queue names a moment a third into the first such slot's window, so the claim
    then takes every domain whose window opened meanwhile). With no task handed out, sleep that long (or until
    :meth:`~book_assets.queue.waiting.Waiting.wait_for_work_async` wakes up) instead of polling.
    """

    tasks: list[Task]
    next_slot_at: datetime | None = None
    retry_in_s: float | None = None

    def __bool__(self) -> bool:
        return bool(self.tasks)

    def __len__(self) -> int:
        return len(self.tasks)


@dataclass(frozen=True)
class QueueStats:
    """A snapshot of the queue for logs, the CLI and Dagster metadata."""

    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # task_type -> status -> n
    oldest_pending_s: float | None = None
    completed_last_minute: int = 0
    expired_leases: int = 0
    top_failures: list[tuple[str, int]] = field(default_factory=list)
    failed_by_kind: dict[str, dict[str, int]] = field(default_factory=dict)  # task_type -> kind -> n
    #: domain -> kind -> tasks whose last failed attempt was of that kind, retried to success or not
    last_failure_by_domain: dict[str, dict[str, int]] = field(default_factory=dict)

    def total(self, status: str) -> int:
        return sum(by_status.get(status, 0) for by_status in self.counts.values())

    def failed_kinds(self) -> dict[str, int]:
        """Failed tasks of every type, by error kind: the exact dead-letter count per kind."""
        totals: dict[str, int] = {}
        for by_kind in self.failed_by_kind.values():
            for kind, n in by_kind.items():
                totals[kind] = totals.get(kind, 0) + n
        return totals

    @property
    def throughput_per_s(self) -> float:
        """Tasks completed per second over the last minute."""
        return self.completed_last_minute / 60.0


@dataclass(frozen=True)
class TaskGauge:
    """Tasks of one type, status and domain, read for the metrics exporter (:meth:`QueueAdmin.gauges`)."""

    task_type: str
    status: str
    domain: str
    n: int
    #: Pending rows only: seconds since the oldest was created, and since the longest-waiting due one came due.
    oldest_pending_s: float | None = None
    overdue_s: float | None = None
    #: In-progress rows only: leases that ran out (their worker is gone or stalled; the next claim reclaims them).
    expired_leases: int = 0


@dataclass(frozen=True)
class DomainGauge:
    """One domain's politeness now: its interval, its floor, and seconds until its next request slot (0: free)."""

    domain: str
    interval_s: float
    floor_interval_s: float
    next_slot_in_s: float


@dataclass(frozen=True)
class QueueGauges:
    """Everything the metrics exporter reads from the queue in one scrape (one transaction, one clock)."""

    tasks: list[TaskGauge] = field(default_factory=list)
    #: Failed (dead-lettered) tasks: task type -> error kind -> n.
    dead_letters: dict[str, dict[str, int]] = field(default_factory=dict)
    domains: list[DomainGauge] = field(default_factory=list)
    #: Budgeted groups: (task type, group) -> tasks it may still hand out.
    budget_left: dict[tuple[str, str], int] = field(default_factory=dict)


@dataclass(frozen=True)
class GroupBudget:
    """A group's budget and what became of the tasks charged to it (see ``TaskQueue.set_group_budgets``)."""

    group: str
    budget: int
    completed: int
    failed: int
    in_progress: int

    @property
    def met(self) -> bool:
        """Whether the budget was delivered as completed tasks (no unit lost to a dead letter)."""
        return self.completed >= self.budget


@dataclass(frozen=True)
class Activity:
    """What the queue did since a moment (see ``TaskQueue.activity_since``): read from the tasks themselves,
    so it counts every worker's work, on every host, including workers that died before reporting."""

    #: Task type -> group -> tasks completed since then.
    completed: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Task type -> tasks enqueued since then.
    created: dict[str, int] = field(default_factory=dict)
    #: Task type -> tasks claimed since then that are now failed for good.
    failed: dict[str, int] = field(default_factory=dict)
    #: Attempts beyond the first, over the tasks claimed or completed since then.
    retries: int = 0

    def total(self, task_type: str | None = None) -> int:
        """Completed tasks of ``task_type`` (of every type when None)."""
        types = self.completed.values() if task_type is None else [self.completed.get(task_type, {})]
        return sum(sum(groups.values()) for groups in types)
