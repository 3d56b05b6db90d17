"""A PostgreSQL task queue: leases with fencing, retries with backoff, politeness per domain, fair scheduling.

A library: it imports nothing from scraping, the sandbox or Dagster. Start with :class:`TaskQueue`, which
builds the queue's five parts (core, domain policy, group scheduling, waiting, admin) over one database;
``docs/queue.md`` is the design.
"""

from book_assets.queue.admin import QueueAdmin
from book_assets.queue.context import QueueContext, domain_of
from book_assets.queue.core import LEASE_EXPIRED, QueueCore
from book_assets.queue.domains import DomainPolicy
from book_assets.queue.errors import LeaseLost, QueueError
from book_assets.queue.group_commit import GroupCommit
from book_assets.queue.groups import GroupScheduling
from book_assets.queue.models import (
    Activity,
    ClaimResult,
    DomainGauge,
    EnqueueResult,
    FailOutcome,
    GroupBudget,
    NewTask,
    QueueGauges,
    QueueStats,
    Task,
    TaskGauge,
)
from book_assets.queue.queue import TaskQueue
from book_assets.queue.retry import Backoff
from book_assets.queue.throttle import AutoThrottle, next_interval
from book_assets.queue.waiting import CHANNEL, Waiting

__all__ = [
    "CHANNEL",
    "LEASE_EXPIRED",
    "Activity",
    "AutoThrottle",
    "Backoff",
    "ClaimResult",
    "DomainGauge",
    "DomainPolicy",
    "EnqueueResult",
    "FailOutcome",
    "GroupBudget",
    "GroupCommit",
    "GroupScheduling",
    "LeaseLost",
    "NewTask",
    "QueueAdmin",
    "QueueContext",
    "QueueCore",
    "QueueError",
    "QueueGauges",
    "QueueStats",
    "Task",
    "TaskGauge",
    "TaskQueue",
    "Waiting",
    "domain_of",
    "next_interval",
]
