"""The queue's core: enqueue, claim, leases and completion.

Every call on a held task matches its ``id`` and ``lease_token`` (fencing): the protocol is in
``docs/queue.md``, "Leases and fencing".
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final, TypeVar

from book_assets.db.connection import CONNECTION_ERRORS, Cursor, DatabaseUnavailable
from book_assets.queue.clock import DatabaseClock
from book_assets.queue.context import QueueContext, check_number, domain_of, named_queries
from book_assets.queue.errors import LeaseLost
from book_assets.queue.models import ClaimResult, EnqueueResult, FailOutcome, NewTask, Task
from book_assets.urls import canonical_url

T = TypeVar("T")

#: Errors that mean the database stayed away (after ``Database``'s reconnect retries), not that a task failed.
_OUTAGES: Final = (*CONNECTION_ERRORS, DatabaseUnavailable)
#: The error kind of a task whose last lease expired with no attempts left (its worker died or stalled).
LEASE_EXPIRED: Final = "lease_expired"
#: Rows per enqueue statement: one round trip per chunk, bounded statement size.
ENQUEUE_CHUNK: Final = 10_000


class QueueCore:
    """Enqueue tasks, claim them under leases, and end each lease: complete, fail, heartbeat or release."""

    def __init__(self, ctx: QueueContext) -> None:
        self.ctx = ctx
        self.db = ctx.db

    def _row(self, ord_: int, item: NewTask) -> dict[str, Any]:
        self.ctx.check_type(item.task_type)
        if not isinstance(item.payload, Mapping):
            raise ValueError(f"payload must be a dict with a 'url', got {type(item.payload).__name__}")
        domain_of(item.payload.get("url"))  # validates the URL, with a message naming it
        payload = {**item.payload, "url": canonical_url(str(item.payload["url"]))}
        domain = domain_of(payload["url"])
        if isinstance(item.priority, bool) or not isinstance(item.priority, int) or item.priority < 0:
            raise ValueError(f"priority must be an integer >= 0, got {item.priority!r}")
        max_attempts = self.ctx.max_attempts if item.max_attempts is None else item.max_attempts
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
            delay_s = check_number("run_at (seconds from now)", item.run_at)
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

    def begin_epoch(self) -> int:
        """Start an epoch of the queue's scope (a crawl's, say): until the scope's next one starts, each URL is
        enqueued once by the queues of that scope, whatever became of its first task; returns its id. An epoch
        of another scope (a crawl of another site on the same queue) neither ends this one nor is joined by it.

        Live-task deduplication alone lets a URL whose task ended be enqueued again: a listing that links back
        to a page already fetched, or repeats books already fetched, would fetch them again, and a chain of such
        pages need never end. A task's retries and requeues are the same row, so they still happen.
        """
        return int(self.db.query(named_queries()["begin_epoch"], {"scope": self.ctx.epoch_scope})[0]["id"])

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
        """Add one task unless its URL already has a live (pending or in-progress) task, or was enqueued in
        the current epoch (:meth:`begin_epoch`).

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
            params = {
                "rows": json.dumps(chunk),
                "interval_s": self.ctx.default_interval_s,
                "scope": self.ctx.epoch_scope,
            }
            for r in self.db.query(named_queries()["enqueue_many"], params):
                results[int(r["ord"])] = EnqueueResult(r["id"], bool(r["created"]))
        for index, first in duplicate_of.items():
            results[index] = EnqueueResult(results[first].id, False)
        return [results[i] for i in sorted(results)]

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
        so neither starves. Scheduling budgets (:meth:`GroupScheduling.set_group_budgets`) stop a group at 0.

        Returns:
            The tasks in pick order; while a domain with work waits for its next politeness slot,
            ``retry_in_s`` says when a claim may find that work (with no task handed out: how long to sleep).
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
            "lease_s": self.ctx.lease_s,
            "horizon_s": self.ctx.slot_horizon_s,
            "scheduled": scheduled,
            "interleave": weights_json,
        }
        return _claim_result(self.db.statement(named_queries()["claim"], params), self.ctx.clock)

    def _claim_types(
        self, task_types: Collection[str] | None, scheduled: bool, type_weights: Mapping[str, float] | None
    ) -> tuple[list[str], str | None]:
        """The task types a claim covers, and its type weights as JSON (None: no weighting between types)."""
        if type_weights is None:
            types = sorted({self.ctx.check_type(t) for t in task_types}) if task_types else list(self.ctx.task_types)
            if scheduled and len(types) != 1:
                raise ValueError("a scheduled claim needs exactly one task type (or type_weights=...)")
            return types, None
        if not type_weights:
            raise ValueError("type_weights needs at least one task type")
        for name, weight in type_weights.items():
            self.ctx.check_type(name)
            check_number(f"type weight of {name!r}", weight)
        types = sorted(type_weights)
        if task_types is not None and set(task_types) != set(types):
            raise ValueError("with type_weights, the task types are its keys")
        return types, json.dumps({k: float(v) for k, v in type_weights.items()})

    def heartbeat(self, task: Task, extend_s: float | None = None) -> None:
        """Extend the lease to now + ``extend_s`` (default: the lease length); :class:`LeaseLost` if it is gone."""
        extend_lease(self.ctx, task, self.ctx.lease_s if extend_s is None else extend_s)

    def heartbeat_all(self, tasks: Sequence[Task], extend_s: float | None = None) -> set[int]:
        """:meth:`heartbeat` of every one of ``tasks`` in one statement; the ids of those whose lease is gone."""
        return extend_leases(self.ctx, tasks, self.ctx.lease_s if extend_s is None else extend_s)

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
            cur.execute(named_queries()["complete_many"], params)
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
                cur.execute(named_queries()["complete_many"], params)
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
        return len(self.db.query(named_queries()["complete_many"], params))

    def fail(
        self,
        task: Task,
        error: str,
        *,
        retryable: bool,
        kind: str | None = None,
        retry_after_s: float | None = None,
        work: Callable[[Cursor], object] | None = None,
    ) -> FailOutcome:
        """Record a failed attempt: ``kind`` names why (:meth:`QueueAdmin.stats` counts it), ``error`` says it.

        ``work(cursor)`` runs in the failure's transaction, under the same lease (what the caller keeps of
        the failed attempt, e.g. the response that failed): it commits with the failure or not at all, and
        must be safe to run again, as :meth:`complete_with`'s.

        Returns:
            ``RETRY``: pending again after the backoff (and after ``retry_after_s``, which also pushes the
            domain's next slot); ``DEAD``: failed for good (permanent error or out of attempts), with
            ``error`` kept for inspection and :meth:`QueueAdmin.requeue`.

        Raises:
            LeaseLost: the caller no longer holds the lease; nothing was changed.
        """
        if retry_after_s is not None:
            retry_after_s = check_number("retry_after_s", retry_after_s)
        params = {
            "id": task.id,
            "token": task.lease_token,
            "retryable": bool(retryable),
            "delay_s": self.ctx.backoff.delay(max(task.attempt, 1)),
            "retry_after_s": retry_after_s,
            "error": str(error)[:10_000],
            "kind": None if kind is None else str(kind),
        }

        def _txn(cur: Cursor) -> str:
            cur.execute(named_queries()["fail"], params)
            row = cur.fetchone()
            if row is None:
                raise _lost(task)
            if work is not None:
                work(cur)
            return str(row["status"])

        return FailOutcome.RETRY if self.db.run(_txn) == "pending" else FailOutcome.DEAD

    def record_failed(self, items: Sequence[tuple[NewTask, str]], *, kind: str) -> int:
        """Record tasks that failed before they could be claimed, each ``(task, error)``, as failed for good with
        ``kind``: what the caller refused to enqueue (a link too long to store) is counted with the failures
        instead of vanishing. Each payload carries ``refused_by`` (the id of the task that found it), which
        makes a replay harmless. Returns how many were recorded."""
        rows = [
            {**self._row(i, task), "error": str(error)[:10_000], "kind": str(kind)}
            for i, (task, error) in enumerate(items)
        ]
        if not rows:
            return 0
        params = {"rows": json.dumps(rows), "interval_s": self.ctx.default_interval_s}
        return len(self.db.query(named_queries()["record_failed"], params))

    def release(self, tasks: Sequence[Task]) -> int:
        """Give held tasks back without counting the attempt (graceful shutdown); returns how many."""
        if not tasks:
            return 0
        params = {"ids": [t.id for t in tasks], "tokens": [t.lease_token for t in tasks]}
        return int(self.db.query(named_queries()["release"], params)[0]["released"])


def extend_lease(ctx: QueueContext, task: Task, extend_s: float) -> None:
    """Extend ``task``'s lease to now + ``extend_s`` (never shortened); :class:`LeaseLost` if it is gone."""
    if extend_leases(ctx, [task], extend_s):
        raise _lost(task)


def extend_leases(ctx: QueueContext, tasks: Sequence[Task], extend_s: float) -> set[int]:
    """Extend each of ``tasks``' leases to now + ``extend_s`` (never shortened), in one statement; the ids of
    the tasks whose lease is gone."""
    extend_s = check_number("extend_s", extend_s, allow_zero=False)
    if not tasks:
        return set()
    params = {"ids": [t.id for t in tasks], "tokens": [t.lease_token for t in tasks], "extend_s": extend_s}
    kept = {int(row["id"]) for row in ctx.db.query(named_queries()["heartbeat_many"], params)}
    return {t.id for t in tasks} - kept


def _lost(task: Task) -> LeaseLost:
    return LeaseLost(f"task {task.id}: lease {task.lease_token} is no longer held")


def _claim_result(rows: list[dict[str, Any]], clock: DatabaseClock) -> ClaimResult:
    """The leased tasks, and when a domain with work that waits for its politeness slot is worth claiming again
    (every row carries it; none leased, one row says only that).

    Slots are times on the database's clock: ``clock`` turns them into this host's monotonic readings, never
    comparing them with this host's wall clock.
    """
    tasks = [_task(r, clock) for r in rows if r["id"] is not None]
    next_at = rows[0]["next_at"] if rows else None
    retry_in = None if next_at is None else max(0.0, clock.seconds_until(next_at))
    return ClaimResult(tasks, next_slot_at=next_at, retry_in_s=retry_in)


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
