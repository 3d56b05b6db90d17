"""TaskQueue: a PostgreSQL task queue with leases, fencing, politeness per domain and fair scheduling.

Design (why it looks like this):

* **No broker.** Tasks are rows; a claim is ``SELECT ... FOR UPDATE SKIP LOCKED`` (PostgreSQL manual, "The
  Locking Clause"): concurrent claimers skip each other's rows instead of queueing behind them, so N workers
  never receive the same task and never wait for one another on the hot path.
* **One round trip per claim.** The claim is the plpgsql function ``queue_claim_v1``, composed of small
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
  ``slot_at``: the worker sleeps until then (:meth:`TaskQueue.wait_for_slot`). Because the slot counter is one
  row locked by the claim, the interval holds across processes and hosts. Slots are database times; a worker
  converts them with the measured offset of the database's clock from its own monotonic clock
  (:class:`~book_assets.queue.clock.DatabaseClock`), so a host whose wall clock runs ahead or behind keeps
  the spacing.
  ``max_in_flight`` caps the domain's live leases. A 429's Retry-After pushes the next slot (:meth:`push_domain`,
  ``fail(retry_after_s=...)``). When nothing can be handed out the claim says when the next slot opens.
  An autothrottled domain's interval follows the latencies workers report (:meth:`observe`,
  :mod:`book_assets.queue.throttle`), in the same row, so every worker on every host follows it too.
* **Fair scheduling.** ``scheduled=True`` hands out tasks of one type by smooth weighted round-robin over
  their groups; ``type_weights={type: weight}`` does the same over task types. See :meth:`TaskQueue.claim`.
* **Idle workers sleep on NOTIFY.** Enqueue, release, requeue and a drain (:meth:`TaskQueue.drained`) notify
  :data:`CHANNEL`; an idle worker waits for that (:meth:`TaskQueue.wait_for_work`), for the moment work
  becomes claimable without a notification (:meth:`TaskQueue.idle_wait_s`: a delayed task or retry, an
  expiring lease, a politeness slot), or for ``idle_timeout_s``, whichever comes first. Through a pooler in
  transaction mode (``Database.pooled``: each transaction may get another server connection, so LISTEN
  cannot hold) idle workers poll instead, every :data:`POOLED_POLL_S` at most.

The queue is a library: it imports only :mod:`book_assets.db`, :mod:`book_assets.sql`, the standard
library and psycopg2.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import math
import re
import select
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Final, Protocol, TypeVar
from urllib.parse import urlsplit

import psycopg2
import psycopg2.errors

from book_assets.db.connection import CONNECTION_ERRORS, Cursor, Database, DatabaseUnavailable
from book_assets.queue.clock import DatabaseClock
from book_assets.queue.errors import LeaseLost
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
from book_assets.queue.retry import Backoff
from book_assets.queue.throttle import THROTTLED_MIN_S, AutoThrottle
from book_assets.sql import load_queries
from book_assets.urls import canonical_url

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Errors that mean the database stayed away (after ``Database``'s reconnect retries), not that a task failed.
_OUTAGES: Final = (*CONNECTION_ERRORS, DatabaseUnavailable)
#: The error kind of a task whose last lease expired with no attempts left (its worker died or stalled).
LEASE_EXPIRED: Final = "lease_expired"

#: Channel notified when tasks become claimable (enqueue, release, requeue).
CHANNEL: Final = "book_pipeline_tasks"
#: Rows per enqueue statement: one round trip per chunk, bounded statement size.
ENQUEUE_CHUNK: Final = 10_000
#: How late after its politeness slot a request may still start (see TaskQueue.slot_wait_s).
SLOT_TOLERANCE_S: Final = 0.005
#: Rows one statement of :meth:`TaskQueue.prune` deletes at most (per status).
PRUNE_BATCH: Final = 5000
#: The shortest idle sleep: an idle loop never spins, whatever the clocks say.
MIN_IDLE_WAIT_S: Final = 0.01
#: The longest idle sleep through a pooler in transaction mode, where LISTEN cannot hold: idle workers poll.
POOLED_POLL_S: Final = 0.5


class Runner(Protocol):
    """How async code runs one of the queue's blocking calls (e.g. on the thread that owns the connection)."""

    def __call__(self, fn: Callable[[], T], /) -> Awaitable[T]: ...


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset()


def _q() -> dict[str, str]:
    return load_queries("queue")


_ORIGIN = re.compile(r"\s*([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)")


def domain_of(url: object) -> str:
    """The politeness domain of a task URL: its host (and port, when one is given), lower-cased.

    Raises:
        ValueError: the URL is missing, empty, not http(s) or has no host.
    """
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"task payload needs a non-empty 'url' string, got {url!r}")
    match = _ORIGIN.match(url)
    try:
        # Everything that can be wrong with a host lives in the scheme and netloc, which a crawl repeats for
        # thousands of URLs: parse each distinct origin once.
        return _domain_of_origin(match.group(1).lower(), match.group(2)) if match else _domain_of_origin("", "")
    except ValueError as exc:
        raise ValueError(f"malformed task URL {url!r}: {exc}") from None


@functools.lru_cache(maxsize=4096)
def _domain_of_origin(scheme: str, netloc: str) -> str:
    parts = urlsplit(f"{scheme}://{netloc}/")
    port = parts.port
    if scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("expected http(s)://host/...")
    return parts.hostname.lower() + (f":{port}" if port is not None else "")


def _check_number(name: str, value: float, *, allow_zero: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return float(value)


class TaskQueue:
    """The task queue over one :class:`~book_assets.db.connection.Database` (one connection per process).

    Args:
        db: the process's database.
        task_types: the task types this queue accepts; anything else is rejected with ``ValueError``.
        lease_s: how long a claim holds a task without a heartbeat.
        max_attempts: default attempts before a task is dead-lettered (per task: ``enqueue(max_attempts=)``).
        backoff: retry delays of retryable failures.
        default_interval_s: politeness interval given to a domain the first time a task names it.
        slot_horizon_s: how far ahead one claim reserves politeness slots (capped at half the lease, so a
            task's lease never runs out while its worker waits for the slot).
        idle_timeout_s: the longest an idle worker sleeps without a notification (:meth:`idle_wait_s`).
    """

    def __init__(
        self,
        db: Database,
        *,
        task_types: Collection[str],
        lease_s: float = 60.0,
        max_attempts: int = 5,
        backoff: Backoff | None = None,
        default_interval_s: float = 1.0,
        slot_horizon_s: float = 2.0,
        idle_timeout_s: float = 5.0,
    ) -> None:
        if not task_types or any(not isinstance(t, str) or not t for t in task_types):
            raise ValueError(f"task_types must be non-empty strings, got {task_types!r}")
        self.db = db
        self.task_types: tuple[str, ...] = tuple(sorted(set(task_types)))
        self.lease_s = _check_number("lease_s", lease_s, allow_zero=False)
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ValueError(f"max_attempts must be an integer >= 1, got {max_attempts!r}")
        self.max_attempts = max_attempts
        self.backoff = backoff or Backoff()
        self.default_interval_s = _check_number("default_interval_s", default_interval_s)
        self.slot_horizon_s = min(_check_number("slot_horizon_s", slot_horizon_s), self.lease_s / 2)
        self.idle_timeout_s = _check_number("idle_timeout_s", idle_timeout_s, allow_zero=False)
        self._listening_on: object | None = None
        #: The database's clock as seen from this host: what politeness slots are timed by.
        self.clock = DatabaseClock(db)

    # --- validation --------------------------------------------------------------------------------------

    def _check_type(self, task_type: str) -> str:
        if task_type not in self.task_types:
            raise ValueError(f"unknown task type {task_type!r}; this queue accepts {list(self.task_types)}")
        return task_type

    def _row(self, ord_: int, item: NewTask) -> dict[str, Any]:
        self._check_type(item.task_type)
        if not isinstance(item.payload, Mapping):
            raise ValueError(f"payload must be a dict with a 'url', got {type(item.payload).__name__}")
        domain_of(item.payload.get("url"))  # validates the URL, with a message naming it
        payload = {**item.payload, "url": canonical_url(str(item.payload["url"]))}
        domain = domain_of(payload["url"])
        if isinstance(item.priority, bool) or not isinstance(item.priority, int) or item.priority < 0:
            raise ValueError(f"priority must be an integer >= 0, got {item.priority!r}")
        max_attempts = self.max_attempts if item.max_attempts is None else item.max_attempts
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ValueError(f"max_attempts must be an integer >= 1, got {max_attempts!r}")
        if item.group is not None and not isinstance(item.group, str):
            raise ValueError(f"group must be a string or None, got {item.group!r}")
        run_at: str | None = None
        delay_s: float | None = None
        if isinstance(item.run_at, datetime):
            if item.run_at.tzinfo is None:
                raise ValueError("run_at must be timezone-aware (e.g. datetime.now(timezone.utc))")
            run_at = item.run_at.isoformat()
        elif item.run_at is not None:
            delay_s = _check_number("run_at (seconds from now)", item.run_at)
        return {
            "ord": ord_,
            "task_type": item.task_type,
            "payload": payload,
            "priority": item.priority,
            "domain": domain,
            "task_group": item.group or "",
            "delay_s": delay_s,
            "run_at": run_at,
            "max_attempts": max_attempts,
        }

    # --- enqueue -----------------------------------------------------------------------------------------

    def enqueue(
        self,
        task_type: str,
        payload: Mapping[str, Any],
        *,
        priority: int = 0,
        group: str | None = None,
        run_at: datetime | float | None = None,
        max_attempts: int | None = None,
    ) -> EnqueueResult:
        """Add one task unless its URL already has a live (pending or in-progress) task.

        Args:
            task_type: one of the queue's task types.
            payload: JSON-able dict with a non-empty http(s) ``url``; its host is the politeness domain. The
                URL is stored in its canonical form (:func:`book_assets.urls.canonical_url`), so spellings
                of one URL (fragment, host case, default port) make one task.
                Keep it small: page bodies belong in storage, never in the tasks table.
            priority: >= 0; higher is claimed first.
            group: fairness group (e.g. a book category) for scheduled claims.
            run_at: earliest start, as an aware datetime or seconds from now.
            max_attempts: overrides the queue's default for this task.
        """
        return self.enqueue_many([NewTask(task_type, dict(payload), priority, group, run_at, max_attempts)])[0]

    def enqueue_many(self, items: Iterable[NewTask]) -> list[EnqueueResult]:
        """Enqueue a batch in one statement per :data:`ENQUEUE_CHUNK` rows; results in input order.

        Everything is validated before anything is written. A URL repeated inside the batch is created
        once; its later copies report ``created=False`` with the first copy's id.
        """
        rows: list[dict[str, Any]] = []
        first_of: dict[str, int] = {}
        duplicate_of: dict[int, int] = {}
        for index, item in enumerate(items):
            row = self._row(index, item)
            url = str(row["payload"]["url"])
            if url in first_of:
                duplicate_of[index] = first_of[url]
            else:
                first_of[url] = index
                rows.append(row)
        results: dict[int, EnqueueResult] = {}
        for start in range(0, len(rows), ENQUEUE_CHUNK):
            chunk = rows[start : start + ENQUEUE_CHUNK]
            params = {"rows": json.dumps(chunk), "interval_s": self.default_interval_s}
            for r in self.db.query(_q()["enqueue_many"], params):
                results[int(r["ord"])] = EnqueueResult(r["id"], bool(r["created"]))
        for index, first in duplicate_of.items():
            results[index] = EnqueueResult(results[first].id, False)
        return [results[i] for i in sorted(results)]

    # --- claim -------------------------------------------------------------------------------------------

    def claim(
        self,
        worker_id: str,
        n: int = 1,
        *,
        task_types: Collection[str] | None = None,
        scheduled: bool = False,
        type_weights: Mapping[str, float] | None = None,
    ) -> ClaimResult:
        """Lease up to ``n`` claimable tasks, atomically, in one round trip.

        Claimable: pending with ``run_at`` passed, or in progress with an expired lease (reclaimed here:
        the expired attempt counts; a task out of attempts is dead-lettered instead). Each task gets
        ``attempt`` + 1, a new ``lease_token`` and a lease of ``lease_s`` counted from its politeness slot.

        Plain claims take tasks by ``priority DESC, id`` (oldest first). ``scheduled=True`` (one task type,
        or with ``type_weights``) takes them by **smooth weighted round-robin** over the type's groups,
        nginx's algorithm: each eligible group (weight > 0, budget left, claimable work) adds its weight to
        its ``current``; the largest ``current`` wins (ties: smallest name) and loses the total weight of
        the eligible groups. Inside the winning group, priority then age decide. The state lives in
        ``queue_members`` and claimers lock the scope row, so all workers share one sequence. A scheduled
        claim of many tasks plans its picks in memory and fetches each group's share in one statement, falling
        back to one query per pick only where a group runs short (with ``type_weights``, two levels of rounds,
        types then groups); the order is the same. The claim's map, the lease protocol and the fairness
        invariants: ``docs/queue.md``.

        Guarantee (all groups backlogged, weights fixed): after any prefix of m picks, group i has been
        picked ``c_i`` times with ``m·w_i/W - (k-1) < c_i < m·w_i/W + 1`` (W: total weight, k: number of
        groups) — never a whole pick ahead of its share, and behind it by less than k−1 ≤ one cycle of W
        picks (``current_i = m·w_i − c_i·W`` stays in ``(−W, (k−1)·W)`` because the currents sum to 0);
        every cycle of W picks serves each group exactly ``w_i`` times (integer weights), so a weight-1
        group among weight-100 ones is served once per cycle. A group without claimable work is skipped
        without losing its place (its ``current`` is left as is); one that comes back after having been
        idle restarts at ``current = 0``: it neither bursts with credit nor pays old debt.

        ``type_weights={"listing": 1, "detail": K}`` applies the same algorithm to task types: with both
        backlogged each listing task is followed by exactly K detail tasks; a type without work is skipped,
        so neither starves. Scheduling budgets (:meth:`set_group_budgets`) stop a group at 0.

        Returns:
            The tasks in pick order; when none can be handed out because every domain with work waits for
            its next politeness slot, ``retry_in_s`` says how long to sleep.
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be an integer >= 1, got {n!r}")
        if not worker_id:
            raise ValueError("worker_id must be a non-empty string")
        types, weights_json = self._claim_types(task_types, scheduled, type_weights)
        params = {
            # Names this call: a retry after a lost acknowledgement replays it instead of leasing again.
            "request": str(uuid.uuid4()),
            "worker": worker_id,
            "n": n,
            "types": types,
            "lease_s": self.lease_s,
            "horizon_s": self.slot_horizon_s,
            "scheduled": scheduled,
            "interleave": weights_json,
        }
        return _claim_result(self.db.statement(_q()["claim"], params), self.clock)

    def _claim_types(
        self, task_types: Collection[str] | None, scheduled: bool, type_weights: Mapping[str, float] | None
    ) -> tuple[list[str], str | None]:
        """The task types a claim covers, and its type weights as JSON (None: no weighting between types)."""
        if type_weights is None:
            types = sorted({self._check_type(t) for t in task_types}) if task_types else list(self.task_types)
            if scheduled and len(types) != 1:
                raise ValueError("a scheduled claim needs exactly one task type (or type_weights=...)")
            return types, None
        if not type_weights:
            raise ValueError("type_weights needs at least one task type")
        for name, weight in type_weights.items():
            self._check_type(name)
            _check_number(f"type weight of {name!r}", weight)
        types = sorted(type_weights)
        if task_types is not None and set(task_types) != set(types):
            raise ValueError("with type_weights, the task types are its keys")
        return types, json.dumps({k: float(v) for k, v in type_weights.items()})

    # --- leases ------------------------------------------------------------------------------------------

    def heartbeat(self, task: Task, extend_s: float | None = None) -> None:
        """Extend the lease to now + ``extend_s`` (default: the lease length); :class:`LeaseLost` if it is gone."""
        extend = self.lease_s if extend_s is None else _check_number("extend_s", extend_s, allow_zero=False)
        if not self.db.query(_q()["heartbeat"], {"id": task.id, "token": task.lease_token, "extend_s": extend}):
            raise _lost(task)

    def complete(self, task: Task) -> None:
        """Mark the task done; :class:`LeaseLost` if the caller no longer holds its lease (nothing changes)."""
        if self.complete_many([task]) != 1:
            raise _lost(task)

    def complete_with(self, task: Task, work: Callable[[Cursor], T]) -> T:
        """Run ``work(cursor)`` and complete the task in one transaction, only under the caller's lease.

        The completion comes first: it locks the task row and only matches while the row still carries the
        caller's lease token, so a worker that lost its lease (stalled past it while another worker took the
        task over) writes nothing, and a lease cannot be taken over while ``work`` runs. ``work``'s writes and
        the completion commit together or not at all (an exception in ``work`` rolls the completion back).
        Raises :class:`LeaseLost` when the lease is gone. ``work`` must be safe to run again (a replay after a
        lost acknowledgement runs it again).
        """
        params = {"ids": [task.id], "tokens": [task.lease_token]}

        def _txn(cur: Cursor) -> T:
            cur.execute(_q()["complete_many"], params)
            if cur.fetchone() is None:
                raise _lost(task)
            return work(cur)

        return self.db.run(_txn)

    def complete_all_with(self, items: Sequence[tuple[Task, Callable[[Cursor], T]]]) -> list[T | Exception]:
        """Several tasks' :meth:`complete_with` in one transaction: each outcome, or the exception it raised.

        One completion statement fences them all; then each held task's ``work`` runs, in order, and a task
        whose lease is gone gets :class:`LeaseLost` and its ``work`` does not run. When a ``work`` raises
        (or the transaction fails, a deadlock say), everything rolls back and each task runs alone through
        :meth:`complete_with`, so only the one that raised fails. A database that stays away raises for all.
        """
        if len(items) > 1:
            params = {"ids": [t.id for t, _ in items], "tokens": [t.lease_token for t, _ in items]}

            def _txn(cur: Cursor) -> list[T | Exception]:
                cur.execute(_q()["complete_many"], params)
                held = {row["id"] for row in cur.fetchall()}
                return [work(cur) if task.id in held else _lost(task) for task, work in items]

            try:
                return self.db.run(_txn)
            except _OUTAGES:
                raise
            except Exception:  # a work raised: everything rolled back, and each task runs alone below
                pass
        return [self._complete_alone(task, work) for task, work in items]

    def _complete_alone(self, task: Task, work: Callable[[Cursor], T]) -> T | Exception:
        """:meth:`complete_with`, its failure returned rather than raised (an outage still raises)."""
        try:
            return self.complete_with(task, work)
        except _OUTAGES:
            raise
        except Exception as exc:
            return exc

    def complete_many(self, tasks: Sequence[Task]) -> int:
        """Complete several tasks in one statement; returns how many were still held (the rest are lost)."""
        if not tasks:
            return 0
        params = {"ids": [t.id for t in tasks], "tokens": [t.lease_token for t in tasks]}
        return len(self.db.query(_q()["complete_many"], params))

    def fail(
        self,
        task: Task,
        error: str,
        *,
        retryable: bool,
        kind: str | None = None,
        retry_after_s: float | None = None,
    ) -> FailOutcome:
        """Record a failed attempt: ``kind`` names why (counted by :meth:`stats`), ``error`` says it for humans.

        Returns:
            ``RETRY``: pending again after the backoff (and after ``retry_after_s``, which also pushes the
            domain's next slot); ``DEAD``: failed for good (permanent error or out of attempts), with
            ``error`` kept for inspection and :meth:`requeue`.

        Raises:
            LeaseLost: the caller no longer holds the lease; nothing was changed.
        """
        if retry_after_s is not None:
            retry_after_s = _check_number("retry_after_s", retry_after_s)
        params = {
            "id": task.id,
            "token": task.lease_token,
            "retryable": bool(retryable),
            "delay_s": self.backoff.delay(max(task.attempt, 1)),
            "retry_after_s": retry_after_s,
            "error": str(error)[:10_000],
            "kind": None if kind is None else str(kind),
        }
        rows = self.db.query(_q()["fail"], params)
        if not rows:
            raise _lost(task)
        return FailOutcome.RETRY if rows[0]["status"] == "pending" else FailOutcome.DEAD

    def release(self, tasks: Sequence[Task]) -> int:
        """Give held tasks back without counting the attempt (graceful shutdown); returns how many."""
        if not tasks:
            return 0
        params = {"ids": [t.id for t in tasks], "tokens": [t.lease_token for t in tasks]}
        return int(self.db.query(_q()["release"], params)[0]["released"])

    def requeue(self, task_type: str | None = None, domain: str | None = None, error_like: str | None = None) -> int:
        """Move failed tasks back to pending with attempts reset; returns how many moved.

        Filters combine with AND; ``error_like`` is a SQL LIKE pattern. A failed task whose URL has a live
        task again (re-enqueued meanwhile) is skipped, as is every older failed copy of the same URL: the
        partial unique index allows one live task per URL. Skips are logged.
        """
        if task_type is not None:
            self._check_type(task_type)
        params = {"task_type": task_type, "domain": domain, "error_like": error_like}
        for attempt in range(3):
            try:
                row = self.db.query(_q()["requeue"], params)[0]
                break
            except psycopg2.errors.UniqueViolation:
                # A concurrent enqueue made one of the URLs live between our check and our update.
                if attempt == 2:
                    raise
        if row["skipped"]:
            log.info("requeue: %s failed task(s) skipped (their URL has a live task)", row["skipped"])
        return int(row["requeued"])

    @staticmethod
    def slot_wait_s(task: Task, *, tolerance_s: float = SLOT_TOLERANCE_S, now: float | None = None) -> float | None:
        """How long to sleep before starting ``task``'s request: 0 to start now, None to take a fresh slot.

        A slot only spaces request starts if the request starts on it. A worker that wakes more than
        ``tolerance_s`` after its slot (a loaded host, a GC pause) would start close to the next slot's
        holder, so it takes a fresh slot instead (:meth:`reslot`) and sleeps again: starts stay at least
        ``interval - tolerance_s`` apart, whatever the scheduling delays. ``now`` is a ``time.monotonic()``
        reading: the slot is ``task.slot_due``, the database's ``slot_at`` on this host's monotonic clock, so
        a host whose wall clock is off still starts on it.
        """
        if task.slot_due is None:
            return 0.0
        late = (time.monotonic() if now is None else now) - task.slot_due
        if late < 0:
            return -late
        return 0.0 if late <= tolerance_s else None

    def wait_for_slot(self, task: Task, *, tolerance_s: float = SLOT_TOLERANCE_S) -> Task:
        """Sleep until the task's politeness slot (:meth:`slot_wait_s`); return the task to start *now*.

        Raises :class:`LeaseLost` if the lease is gone meanwhile.
        """
        tolerance = _check_number("tolerance_s", tolerance_s)
        while (wait := self.slot_wait_s(task, tolerance_s=tolerance)) != 0:
            if wait is None:
                task = self.reslot(task)
            else:
                time.sleep(wait)
        return task

    async def wait_for_slot_async(self, task: Task, *, run: Runner | None = None) -> Task:
        """:meth:`wait_for_slot` for an event loop: it sleeps on the loop; ``run`` runs :meth:`reslot`.

        ``run`` defaults to :func:`asyncio.to_thread`. Raises :class:`LeaseLost` if the lease is gone.
        """
        run = run or asyncio.to_thread
        while (wait := self.slot_wait_s(task)) != 0:
            if wait is None:
                task = await run(functools.partial(self.reslot, task))
            else:
                await asyncio.sleep(wait)
        return task

    def reslot(self, task: Task) -> Task:
        """Give a task whose worker woke too late for its slot a fresh slot (``slot_at`` None: start now).

        For workers that wait in their own way (an event loop) and then apply :meth:`wait_for_slot`'s rule.
        Raises :class:`LeaseLost` if the lease is gone.
        """
        rows = self.db.query(_q()["reslot"], {"id": task.id, "token": task.lease_token, "lease_s": self.lease_s})
        if not rows:
            self.heartbeat(task, extend_s=self.lease_s)  # raises LeaseLost when the lease is gone
            return replace(task, slot_at=None, slot_due=None)  # the domain is no longer throttled
        row = rows[0]
        return replace(
            task,
            slot_at=row["slot_at"],
            slot_due=self.clock.due(row["slot_at"]),
            lease_expires_at=row["lease_expires_at"],
        )

    # --- politeness --------------------------------------------------------------------------------------

    def set_domain_policy(
        self,
        domain: str,
        *,
        min_interval_s: float | None = None,
        max_in_flight: int | _Unset | None = UNSET,
        throttle: AutoThrottle | _Unset | None = UNSET,
    ) -> None:
        """Set a domain's minimum interval between request starts (0 disables) and/or in-flight cap.

        ``None`` interval keeps the current one; ``max_in_flight=None`` removes the cap, leaving it out
        keeps it. ``throttle`` (:mod:`book_assets.queue.throttle`) makes the interval follow the latency
        that :meth:`observe` reports, never below ``min_interval_s`` (the floor); given (or ``None``, which
        switches it off) the interval starts again from the floor. Left out, an autothrottled domain takes
        ``min_interval_s`` as its new floor and its current interval is raised to it, never lowered.
        """
        if not domain:
            raise ValueError("domain must be a non-empty string")
        if min_interval_s is not None:
            min_interval_s = _check_number("min_interval_s", min_interval_s)
        if (
            not isinstance(max_in_flight, _Unset)
            and max_in_flight is not None
            and (isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int) or max_in_flight < 1)
        ):
            raise ValueError(f"max_in_flight must be an integer >= 1 or None, got {max_in_flight!r}")
        if not isinstance(throttle, _Unset | AutoThrottle | None):
            raise ValueError(f"throttle must be an AutoThrottle or None, got {throttle!r}")
        rule = throttle if isinstance(throttle, AutoThrottle) else None
        params = {
            "domain": domain.lower(),
            "interval_s": min_interval_s,
            "default_interval_s": self.default_interval_s,
            "max_in_flight": None if isinstance(max_in_flight, _Unset) else max_in_flight,
            "set_max_in_flight": not isinstance(max_in_flight, _Unset),
            "set_throttle": not isinstance(throttle, _Unset),
            "max_interval_s": rule.max_interval_s if rule else None,
            "target_concurrency": rule.target_concurrency if rule else None,
        }
        self.db.query(_q()["set_domain_policy"], params)

    def observe(self, domain: str, latency_s: float, *, throttled: bool = False, ok: bool = True) -> float | None:
        """Report one request to ``domain``: how long it took, whether the server throttled it, whether it was ok.

        An autothrottled domain's interval moves by :func:`book_assets.queue.throttle.next_interval` (one
        statement, so observations from every worker on every host add up); returns the new interval, or
        None when the domain is not autothrottled (nothing changes).
        """
        params = {
            "domain": domain.lower(),
            "latency_s": _check_number("latency_s", latency_s),
            "throttled": bool(throttled),
            "ok": bool(ok),
            "min_step_s": THROTTLED_MIN_S,
        }
        rows = self.db.query(_q()["observe"], params)
        return float(rows[0]["min_interval_s"]) if rows else None

    def push_domain(self, domain: str, seconds: float) -> datetime:
        """No request to ``domain`` starts before now + ``seconds`` (e.g. a 429's Retry-After).

        Slots already handed out are not revoked; returns the domain's next slot.
        """
        params = {
            "domain": domain.lower(),
            "seconds": _check_number("seconds", seconds),
            "default_interval_s": self.default_interval_s,
        }
        return self.db.query(_q()["push_domain"], params)[0]["next_slot_at"]

    def take_slot(self, domain: str) -> float | None:
        """A politeness slot for a request that is not a task (robots.txt), taken from the domain's slots like
        a claim's: the ``time.monotonic()`` reading at which it may start; None when the domain is unthrottled."""
        rows = self.db.query(_q()["take_domain_slot"], {"domain": domain.lower()})
        return self.clock.due(rows[0]["slot_at"]) if rows else None

    def domain_policy(self, domain: str) -> dict[str, Any] | None:
        """The stored politeness of ``domain``, if known: min_interval_s, max_in_flight, next_slot_at, and its
        AutoThrottle's floor_interval_s, max_interval_s, target_concurrency and last latency_s (NULL: off)."""
        rows = self.db.query(_q()["domain_policy"], {"domain": domain.lower()})
        return rows[0] if rows else None

    # --- fair scheduling ---------------------------------------------------------------------------------

    def set_group_weights(
        self, task_type: str, weights: Mapping[str, float], default_weight: float | None = None
    ) -> None:
        """Replace the round-robin weights of ``task_type``'s groups and restart the round-robin.

        Weights are numbers >= 0 (0: never served). Groups not listed get the default weight: the ``"*"``
        entry of ``weights``, else ``default_weight``, else 1.
        """
        self._check_type(task_type)
        entries = dict(weights)
        default = entries.pop("*", None)
        if default is None:
            default = 1.0 if default_weight is None else default_weight
        default = _check_number("default weight", default)
        for group, weight in entries.items():
            _check_number(f"weight of group {group!r}", weight)
        self._set_scope_weights(f"groups:{task_type}", entries, default)

    def _set_scope_weights(self, scope: str, weights: Mapping[str, float], default: float) -> None:
        queries = _q()

        def _set(cur: Cursor) -> None:
            cur.execute(queries["lock_scope"], {"scope": scope})
            cur.execute(
                queries["set_scope_weights"],
                {
                    "scope": scope,
                    "default_weight": default,
                    "members": list(weights),
                    "weights": [float(w) for w in weights.values()],
                },
            )

        self.db.run(_set)

    def set_group_budgets(self, task_type: str, budgets: Mapping[str, int], *, key: str | None = None) -> str:
        """Let at most ``n`` tasks of each listed group of ``task_type`` end (scheduled claims).

        A unit of budget is spent by a task that ends — completed, or failed for good — and held while a
        task is leased; a retry, an expired lease or a release gives it back, so a budget of N delivers N
        ended tasks whenever N exist. ``key`` names this grant (default: a new one per call): granting the
        same key twice is a no-op, so a statement replayed after a lost acknowledgement cannot re-grant
        budget that was spent in between. Returns the key.
        """
        self._check_type(task_type)
        for group, budget in budgets.items():
            if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
                raise ValueError(f"budget of group {group!r} must be an integer >= 0, got {budget!r}")
        scope = f"groups:{task_type}"
        queries = _q()
        grant = key or str(uuid.uuid4())

        def _set(cur: Cursor) -> None:
            cur.execute(queries["lock_scope"], {"scope": scope})
            cur.execute(
                queries["set_scope_budgets"],
                {"scope": scope, "members": list(budgets), "budgets": list(budgets.values()), "key": grant},
            )

        self.db.run(_set)
        return grant

    def budget_report(self, task_type: str) -> list[GroupBudget]:
        """Each budgeted group of ``task_type``: its budget and its charged tasks completed, failed, leased."""
        rows = self.db.query(_q()["budget_report"], {"scope": f"groups:{self._check_type(task_type)}"})
        return [
            GroupBudget(r["member"], int(r["budget"]), int(r["completed"]), int(r["failed"]), int(r["in_progress"]))
            for r in rows
        ]

    def pending_by_group(self, task_type: str) -> dict[str, int]:
        """Pending tasks of ``task_type`` per group ('' for ungrouped)."""
        rows = self.db.query(_q()["pending_by_group"], {"task_type": self._check_type(task_type)})
        return {r["grp"]: int(r["n"]) for r in rows}

    def outstanding(self, task_types: Collection[str]) -> int:
        """Tasks of these types that are leased or that a claim could still hand out.

        Pending tasks of a group weighted 0 or out of budget are not counted: 0 means the types are drained.
        """
        types = [self._check_type(t) for t in task_types]
        return int(self.db.query(_q()["outstanding"], {"types": types})[0]["n"])

    def drained(self, task_types: Collection[str]) -> bool:
        """Whether nothing of these types is leased or can still be handed out (:meth:`outstanding` is 0).

        When so, every idle worker is notified: a worker that found nothing to claim while another still held
        the last task sleeps on :data:`CHANNEL`, and the end of that task enqueues nothing to wake it, so
        without this it would learn of the drain only at its idle timeout or the next lease expiry. The last
        worker to finish always sees 0 (every other completion committed before its check), so one of the
        finishing workers' checks is the one that wakes the sleepers.
        """
        if self.outstanding(task_types):
            return False
        self.db.query(_q()["wake_idle_workers"])
        return True

    def scaler_query(self, task_type: str) -> str:
        """The statement an autoscaler polls for ``task_type``'s work left (pending or in progress), as a
        text with the task type bound: KEDA's PostgreSQL scaler runs a query without parameters."""
        query, params = _q()["pending_tasks_for_scaler"], {"task_type": self._check_type(task_type)}
        return self.db.run(lambda cur: cur.mogrify(query, params).decode())

    def clear_group_budgets(self, task_type: str) -> None:
        """Remove every group budget of ``task_type``."""
        self._check_type(task_type)
        scope = f"groups:{task_type}"
        queries = _q()

        def _clear(cur: Cursor) -> None:
            cur.execute(queries["lock_scope"], {"scope": scope})
            cur.execute(queries["clear_scope_budgets"], {"scope": scope})

        self.db.run(_clear)

    def group_state(self, task_type: str) -> list[dict[str, Any]]:
        """The round-robin state of ``task_type``'s groups (member, weight, current, budget, idle)."""
        return self.db.query(_q()["scope_state"], {"scope": f"groups:{self._check_type(task_type)}"})

    def type_state(self) -> list[dict[str, Any]]:
        """The round-robin state of the task types of interleaved claims (member, weight, current, budget, idle)."""
        return self.db.query(_q()["scope_state"], {"scope": "interleave"})

    # --- waiting -----------------------------------------------------------------------------------------

    def idle_wait_s(self, task_types: Collection[str], retry_in_s: float | None = None) -> float:
        """How long a worker that found nothing to claim may sleep before it claims again.

        No longer than until work of ``task_types`` becomes claimable without a notification, and never
        longer than ``idle_timeout_s``. When the empty :class:`ClaimResult` waits for a politeness slot,
        that is its ``retry_in_s`` (short; the next claim looks again). Otherwise one query finds the
        ``run_at`` of the next delayed or retried task and the expiry of the next lease (its task is then
        reclaimed): it reads every pending task of the types, so it is not run while work waits for a slot.
        Pass the result to :meth:`wait_for_work` or :meth:`wait_for_work_async`.
        """
        types = [self._check_type(t) for t in task_types]
        if retry_in_s is not None:
            return max(min(retry_in_s, self.idle_timeout_s), MIN_IDLE_WAIT_S)
        wait = self.idle_timeout_s
        due_in_s = self.db.query(_q()["next_due"], {"types": types})[0]["due_in_s"]
        if due_in_s is not None:
            wait = min(wait, float(due_in_s))
        return max(wait, MIN_IDLE_WAIT_S)

    def wait_for_work(self, timeout_s: float) -> bool:
        """Sleep until tasks are enqueued/released/requeued (NOTIFY) or ``timeout_s`` passes.

        Uses ``select()`` on the process's connection, so waiting costs no queries. Returns whether a
        wake-up arrived (a stale one may: the next claim will tell). Pass :meth:`idle_wait_s` as the timeout.
        """
        timeout = _check_number("timeout_s", timeout_s)
        if self.db.pooled:
            time.sleep(min(timeout, POOLED_POLL_S))
            return False
        try:
            self._subscribe()
            if self._take_notifications():
                return True
            readable, _, _ = select.select([self.db.connection()], [], [], timeout)
            return bool(readable) and self._take_notifications()
        except CONNECTION_ERRORS:
            self._listening_on = None
            return False

    async def wait_for_work_async(
        self, timeout_s: float, *, run: Runner | None = None, stop: asyncio.Event | None = None
    ) -> bool:
        """:meth:`wait_for_work` for an event loop, which watches the connection's socket; ``stop`` ends it.

        ``run`` runs the queue's calls on the connection (default :func:`asyncio.to_thread`); its thread is
        free while the loop waits. Returns True at once when this call (re)subscribes: work enqueued
        before the LISTEN sent no notification this connection could see, so the caller claims again.
        """
        timeout = _check_number("timeout_s", timeout_s)
        if self.db.pooled:
            await _sleep_unless(stop, min(timeout, POOLED_POLL_S))
            return False
        run = run or asyncio.to_thread
        try:
            fd = await run(self._socket_to_watch)
        except CONNECTION_ERRORS:
            self._listening_on = None
            return False
        if fd is None:
            return True
        loop = asyncio.get_running_loop()
        readable: asyncio.Future[None] = loop.create_future()
        loop.add_reader(fd, lambda: readable.done() or readable.set_result(None))
        stopped = asyncio.ensure_future(stop.wait()) if stop is not None else loop.create_future()
        try:
            await asyncio.wait({readable, stopped}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            loop.remove_reader(fd)
            stopped.cancel()
        if not readable.done():
            return False
        try:
            return await run(self._take_notifications)
        except CONNECTION_ERRORS:
            self._listening_on = None
            return False

    def _subscribe(self) -> bool:
        """LISTEN on the process's current connection unless already done; returns whether it was needed."""
        if self._listening_on is self.db.connection():
            return False
        self.db.run(lambda cur: cur.execute(_q()["listen"]))
        self._listening_on = self.db.connection()
        return True

    def _socket_to_watch(self) -> int | None:
        """The connection's socket, subscribed; None when the caller should claim at once instead of waiting."""
        if self._subscribe() or self._take_notifications():
            return None
        return int(self.db.connection().fileno())

    def _take_notifications(self) -> bool:
        """Whether notifications arrived on the connection since the last call (they are consumed)."""
        conn = self.db.connection()
        conn.poll()
        woke = bool(conn.notifies)
        conn.notifies.clear()
        return woke

    # --- stats and housekeeping --------------------------------------------------------------------------

    def stats(self, *, top_failures: int = 5) -> QueueStats:
        """Counts by type and status, oldest pending age, throughput over the last minute, failures by kind.

        ``failed_by_kind`` counts every failed task; ``top_failures`` shows the most frequent messages.
        """
        queries = _q()

        def _collect(cur: Cursor) -> QueueStats:
            cur.execute(queries["stats_counts"])
            counts: dict[str, dict[str, int]] = {}
            for r in cur.fetchall():
                counts.setdefault(r["task_type"], {})[r["status"]] = int(r["n"])
            cur.execute(queries["stats_summary"])
            summary = cur.fetchone() or {}
            cur.execute(queries["stats_failures"], {"limit": top_failures})
            failures = [(r["error"] or "", int(r["n"])) for r in cur.fetchall()]
            cur.execute(queries["stats_failed_by_kind"])
            by_kind: dict[str, dict[str, int]] = {}
            for r in cur.fetchall():
                by_kind.setdefault(r["task_type"], {})[r["kind"]] = int(r["n"])
            oldest = summary.get("oldest_pending_s")
            return QueueStats(
                counts=counts,
                oldest_pending_s=float(oldest) if oldest is not None else None,
                completed_last_minute=int(summary.get("completed_last_minute") or 0),
                expired_leases=int(summary.get("expired_leases") or 0),
                top_failures=failures,
                failed_by_kind=by_kind,
            )

        return self.db.run(_collect)

    def now(self) -> datetime:
        """The database's clock, which stamps every task: a run's start on the clock its figures are read by."""
        return self.db.query(_q()["database_now"])[0]["now"]

    def activity_since(self, since: datetime) -> Activity:
        """Tasks completed since ``since`` by type and group, and the retries they took."""
        completed: dict[str, dict[str, int]] = {}
        created: Counter[str] = Counter()
        failed: Counter[str] = Counter()
        retries = 0
        for r in self.db.query(_q()["activity_since"], {"since": since}):
            if r["completed"]:
                completed.setdefault(r["task_type"], {})[r["grp"]] = int(r["completed"])
            created[r["task_type"]] += int(r["created"])
            failed[r["task_type"]] += int(r["failed"])
            retries += int(r["retries"])
        return Activity(completed=completed, created=dict(created), failed=dict(failed), retries=retries)

    def prune(self, older_than_s: float, *, archive: bool = False, batch: int = PRUNE_BATCH) -> int:
        """Delete (or move to ``tasks_archive``) finished tasks that ended more than ``older_than_s`` ago.

        Completed tasks count from their completion, failed ones from the claim of their last attempt;
        pending and leased tasks are never pruned. One short statement per ``batch`` rows, each skipping
        rows another transaction holds, so a prune of a large table runs beside the workers; returns how
        many went.
        """
        params = {"older_than_s": _check_number("older_than_s", older_than_s), "batch": batch}
        name = "prune_archive" if archive else "prune_finished"

        def _prune(cur: Cursor) -> int:
            cur.execute(_q()[name], params)
            return int(cur.rowcount)

        total = 0
        while (pruned := self.db.run(_prune)) > 0:
            total += pruned
        return total


async def _sleep_unless(stop: asyncio.Event | None, seconds: float) -> None:
    """Sleep ``seconds``, or less if ``stop`` is set meanwhile."""
    if stop is None:
        await asyncio.sleep(seconds)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)


def _lost(task: Task) -> LeaseLost:
    return LeaseLost(f"task {task.id}: lease {task.lease_token} is no longer held")


def _claim_result(rows: list[dict[str, Any]], clock: DatabaseClock) -> ClaimResult:
    """The leased tasks; none leased, the row saying when the next politeness slot opens.

    Slots are times on the database's clock: ``clock`` turns them into this host's monotonic readings, never
    comparing them with this host's wall clock.
    """
    tasks = [_task(r, clock) for r in rows if r["id"] is not None]
    if tasks:
        return ClaimResult(tasks)
    next_at = rows[0]["next_at"] if rows else None
    retry_in = None if next_at is None else max(0.0, clock.seconds_until(next_at))
    return ClaimResult([], next_slot_at=next_at, retry_in_s=retry_in)


def _task(row: Mapping[str, Any], clock: DatabaseClock) -> Task:
    return Task(
        id=int(row["id"]),
        task_type=row["task_type"],
        payload=row["payload"],
        priority=int(row["priority"]),
        domain=row["domain"],
        group=row["task_group"] or None,
        attempt=int(row["attempts"]),
        max_attempts=int(row["max_attempts"]),
        lease_token=int(row["lease_token"]),
        lease_expires_at=row["lease_expires_at"],
        slot_at=row["slot_at"],
        slot_due=None if row["slot_at"] is None else clock.due(row["slot_at"]),
    )
