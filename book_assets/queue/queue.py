"""TaskQueue: a PostgreSQL task queue with leases, fencing, politeness per domain and fair scheduling.

Design (why it looks like this):

* **No broker.** Tasks are rows; a claim is ``SELECT ... FOR UPDATE SKIP LOCKED`` (PostgreSQL manual, "The
  Locking Clause"): concurrent claimers skip each other's rows instead of queueing behind them, so N workers
  never receive the same task and never wait for one another on the hot path.
* **One round trip per claim.** The claim is the plpgsql function ``queue_claim_v3``, composed of small
  functions with one job each (the map: ``docs/queue.md``; each definition, with its design note, in
  ``sql/schema.sql``). It first reclaims expired leases (a dead worker's tasks come back with the next claim:
  no janitor), then hands out request-start *slots* per throttled domain, then leases the chosen rows in one
  ``UPDATE``.
* **Leases with fencing tokens.** Every claim draws a new ``lease_token`` from a sequence; complete, fail,
  heartbeat and release match ``id AND lease_token``. A worker whose lease expired and whose task was
  reclaimed gets :class:`LeaseLost` instead of overwriting the new holder's result (Kleppmann,
  "How to do distributed locking", 2016). A late call whose lease expired but that nobody reclaimed yet is
  still accepted: the work was done and nobody else holds the task.
* **Politeness in the database.** ``domains.next_slot_at`` is the next allowed request start; a claim
  reserves slots ``next, next + interval, ...`` up to ``slot_horizon_s`` ahead and returns each task's
  ``slot_at``: the worker sleeps until then (:meth:`DomainPolicy.wait_for_slot_async`). Because the slot counter is one
  row locked by the claim, the interval holds across processes and hosts. Slots are database times; a worker
  converts them with the measured offset of the database's clock from its own monotonic clock
  (:class:`~book_assets.queue.clock.DatabaseClock`), so a host whose wall clock runs ahead or behind keeps
  the spacing.
  ``max_in_flight`` caps the domain's live leases. A 429's Retry-After pushes the next slot
  (:meth:`DomainPolicy.push_domain`, ``fail(retry_after_s=...)``). When nothing can be handed out the claim
  says when the next slot opens.
  An autothrottled domain's interval follows the latencies workers report (:meth:`DomainPolicy.observe`,
  :mod:`book_assets.queue.throttle`), in the same row, so every worker on every host follows it too.
* **Fair scheduling.** ``scheduled=True`` hands out tasks of one type by smooth weighted round-robin over
  their groups; ``type_weights={type: weight}`` does the same over task types. See :meth:`QueueCore.claim`.
* **Idle workers sleep on NOTIFY.** Enqueue, release, requeue and a drain (:meth:`GroupScheduling.drained`)
  notify :data:`~book_assets.queue.waiting.CHANNEL`; an idle worker waits for that
  (:meth:`Waiting.wait_for_work_async`), for the moment work becomes claimable without a notification
  (:meth:`Waiting.idle_wait_s`: a delayed task or retry, an expiring lease, a politeness slot), or for
  ``idle_timeout_s``, whichever comes first. Through a pooler in transaction mode (``Database.pooled``: each
  transaction may get another server connection, so LISTEN cannot hold) idle workers poll instead, every
  :data:`~book_assets.queue.waiting.POOLED_POLL_S` at most.

One job per part, each over the same :class:`~book_assets.queue.context.QueueContext` (the process's
``Database``, the queue's settings, the named queries of ``sql/queue.sql``):

=========================  ===================================================================================
:class:`QueueCore`         enqueue, claim, leases and completion (``core.py``)
:class:`DomainPolicy`      politeness slots, in-flight caps, AutoThrottle, Retry-After, Crawl-delay (``domains.py``)
:class:`GroupScheduling`   round-robin weights, group budgets, what is left to hand out (``groups.py``)
:class:`Waiting`           an idle worker's wait on LISTEN/NOTIFY (``waiting.py``)
:class:`QueueAdmin`        stats, requeue, retention (``admin.py``)
=========================  ===================================================================================

:class:`TaskQueue` builds the five over one context and answers for each: ``queue.claim(...)``,
``queue.set_group_weights(...)``, ``queue.stats()`` (or ``queue.groups.set_group_weights(...)``). The map of
the claim, the lease protocol and the fairness invariants: ``docs/queue.md``.

The queue is a library: it imports only :mod:`book_assets.db`, :mod:`book_assets.sql`, the standard
library and psycopg2.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from book_assets.db.connection import Database
from book_assets.queue.admin import QueueAdmin
from book_assets.queue.clock import DatabaseClock
from book_assets.queue.context import QueueContext
from book_assets.queue.core import QueueCore
from book_assets.queue.domains import DomainPolicy
from book_assets.queue.groups import GroupScheduling
from book_assets.queue.retry import Backoff
from book_assets.queue.waiting import Waiting

P = ParamSpec("P")
R = TypeVar("R")
Part = TypeVar("Part")


def _by(part: str, method: Callable[Concatenate[Part, P], R]) -> Callable[Concatenate[TaskQueue, P], R]:
    """``method`` of the part named ``part``, as a method of :class:`TaskQueue` (same name, signature, doc)."""

    @functools.wraps(method)
    def call(self: TaskQueue, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return method(getattr(self, part), *args, **kwargs)

    return call


def _by_async(
    part: str, method: Callable[Concatenate[Part, P], Coroutine[Any, Any, R]]
) -> Callable[Concatenate[TaskQueue, P], Coroutine[Any, Any, R]]:
    """:func:`_by` for a coroutine method: the delegate is a coroutine function too."""

    @functools.wraps(method)
    async def call(self: TaskQueue, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await method(getattr(self, part), *args, **kwargs)

    return call


class TaskQueue:
    """The task queue over one :class:`~book_assets.db.connection.Database`: its five parts, built one way.

    ``options`` are :class:`~book_assets.queue.context.QueueContext`'s (lease, attempts, backoff, politeness
    default, slot horizon, idle timeout). Each method below is its part's, unchanged.
    """

    def __init__(self, db: Database, *, task_types: Collection[str], **options: Any) -> None:
        self.ctx = QueueContext(db, task_types=task_types, **options)
        self.core = QueueCore(self.ctx)
        self.domains = DomainPolicy(self.ctx)
        self.groups = GroupScheduling(self.ctx)
        self.waiting = Waiting(self.ctx)
        self.admin = QueueAdmin(self.ctx)

    # --- the settings, shared by every part ---------------------------------------------------------------

    @property
    def db(self) -> Database:
        return self.ctx.db

    @property
    def clock(self) -> DatabaseClock:
        return self.ctx.clock

    @property
    def task_types(self) -> tuple[str, ...]:
        return self.ctx.task_types

    @property
    def lease_s(self) -> float:
        return self.ctx.lease_s

    @property
    def backoff(self) -> Backoff:
        return self.ctx.backoff

    @property
    def default_interval_s(self) -> float:
        return self.ctx.default_interval_s

    @property
    def idle_timeout_s(self) -> float:
        return self.ctx.idle_timeout_s

    @idle_timeout_s.setter
    def idle_timeout_s(self, seconds: float) -> None:
        self.ctx.idle_timeout_s = seconds

    # --- core: enqueue, claim, leases, completion ----------------------------------------------------------

    begin_epoch = _by("core", QueueCore.begin_epoch)
    enqueue = _by("core", QueueCore.enqueue)
    enqueue_many = _by("core", QueueCore.enqueue_many)
    claim = _by("core", QueueCore.claim)
    heartbeat = _by("core", QueueCore.heartbeat)
    heartbeat_all = _by("core", QueueCore.heartbeat_all)
    complete_with = _by("core", QueueCore.complete_with)
    complete_all_with = _by("core", QueueCore.complete_all_with)
    complete_many = _by("core", QueueCore.complete_many)
    fail = _by("core", QueueCore.fail)
    record_failed = _by("core", QueueCore.record_failed)
    release = _by("core", QueueCore.release)

    # --- domain policy: politeness slots, AutoThrottle, Retry-After ----------------------------------------

    set_domain_policy = _by("domains", DomainPolicy.set_domain_policy)
    observe = _by("domains", DomainPolicy.observe)
    back_off = _by("domains", DomainPolicy.back_off)
    push_domain = _by("domains", DomainPolicy.push_domain)
    take_slot = _by("domains", DomainPolicy.take_slot)
    domain_policy = _by("domains", DomainPolicy.domain_policy)
    slot_wait_s = staticmethod(DomainPolicy.slot_wait_s)
    wait_for_slot_async = _by_async("domains", DomainPolicy.wait_for_slot_async)
    reslot = _by("domains", DomainPolicy.reslot)

    # --- group scheduling: weights, budgets, what is left --------------------------------------------------

    set_group_weights = _by("groups", GroupScheduling.set_group_weights)
    set_group_budgets = _by("groups", GroupScheduling.set_group_budgets)
    clear_group_budgets = _by("groups", GroupScheduling.clear_group_budgets)
    budget_report = _by("groups", GroupScheduling.budget_report)
    group_state = _by("groups", GroupScheduling.group_state)
    type_state = _by("groups", GroupScheduling.type_state)
    pending_by_group = _by("groups", GroupScheduling.pending_by_group)
    outstanding = _by("groups", GroupScheduling.outstanding)
    drained = _by("groups", GroupScheduling.drained)

    # --- waiting for work ------------------------------------------------------------------------------------

    idle_wait_s = _by("waiting", Waiting.idle_wait_s)
    wait_for_work_async = _by_async("waiting", Waiting.wait_for_work_async)

    # --- admin: stats, requeue, retention --------------------------------------------------------------------

    stats = _by("admin", QueueAdmin.stats)
    gauges = _by("admin", QueueAdmin.gauges)
    now = _by("admin", QueueAdmin.now)
    activity_since = _by("admin", QueueAdmin.activity_since)
    failures_since = _by("admin", QueueAdmin.failures_since)
    failed_kinds_since = _by("admin", QueueAdmin.failed_kinds_since)
    completed_by = _by("admin", QueueAdmin.completed_by)
    requeue = _by("admin", QueueAdmin.requeue)
    failing_of_kinds = _by("admin", QueueAdmin.failing_of_kinds)
    resolve_failed_with = _by("admin", QueueAdmin.resolve_failed_with)
    prune = _by("admin", QueueAdmin.prune)
