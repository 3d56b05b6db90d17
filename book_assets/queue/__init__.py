"""A PostgreSQL task queue: leases with fencing, retries with backoff, politeness per domain, fair scheduling.

A library: it imports nothing from scraping, the sandbox or Dagster. Start with :class:`TaskQueue`.
"""

from book_assets.queue.errors import LeaseLost, QueueError
from book_assets.queue.group_commit import GroupCommit
from book_assets.queue.models import (
    Activity,
    ClaimResult,
    EnqueueResult,
    FailOutcome,
    GroupBudget,
    NewTask,
    QueueStats,
    Task,
)
from book_assets.queue.queue import CHANNEL, LEASE_EXPIRED, TaskQueue, domain_of
from book_assets.queue.retry import Backoff
from book_assets.queue.throttle import AutoThrottle, next_interval

__all__ = [
    "CHANNEL",
    "LEASE_EXPIRED",
    "Activity",
    "AutoThrottle",
    "Backoff",
    "ClaimResult",
    "EnqueueResult",
    "FailOutcome",
    "GroupBudget",
    "GroupCommit",
    "LeaseLost",
    "NewTask",
    "QueueError",
    "QueueStats",
    "Task",
    "TaskQueue",
    "domain_of",
    "next_interval",
]
