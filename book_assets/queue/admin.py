"""Administration: the queue's figures, the requeue of failed tasks and the retention of finished ones."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any, Final, TypeVar

import psycopg2.errors

from book_assets.db.connection import Cursor
from book_assets.queue.context import QueueContext, check_number, named_queries
from book_assets.queue.models import Activity, DomainGauge, QueueGauges, QueueStats, TaskGauge

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Rows one statement of :meth:`QueueAdmin.prune` deletes at most (per status).
PRUNE_BATCH: Final = 5000


class QueueAdmin:
    """Stats and housekeeping: what the operator and the crawl's report read, and what they clean up."""

    def __init__(self, ctx: QueueContext) -> None:
        self.ctx = ctx
        self.db = ctx.db

    def stats(self, *, top_failures: int = 5) -> QueueStats:
        """Counts by type and status, oldest pending age, throughput over the last minute, failures by kind.

        ``failed_by_kind`` counts every failed task; ``top_failures`` shows the most frequent messages;
        ``last_failure_by_domain`` counts every task by the kind of its last failed attempt, whatever its status.
        """
        queries = named_queries()

        def _collect(cur: Cursor) -> QueueStats:
            cur.execute(queries["stats_counts"])
            counts: dict[str, dict[str, int]] = {}
            for r in cur.fetchall():
                counts.setdefault(r["task_type"], {})[r["status"]] = int(r["n"])
            cur.execute(queries["stats_summary"])
            summary: dict[str, Any] = cur.fetchone() or {}
            cur.execute(queries["stats_failures"], {"limit": top_failures})
            failures = [(r["error"] or "", int(r["n"])) for r in cur.fetchall()]
            cur.execute(queries["stats_failed_by_kind"])
            by_kind: dict[str, dict[str, int]] = {}
            for r in cur.fetchall():
                by_kind.setdefault(r["task_type"], {})[r["kind"]] = int(r["n"])
            cur.execute(queries["stats_last_failure_by_domain"])
            by_domain: dict[str, dict[str, int]] = {}
            for r in cur.fetchall():
                by_domain.setdefault(r["domain"], {})[r["kind"]] = int(r["n"])
            oldest = summary.get("oldest_pending_s")
            return QueueStats(
                counts=counts,
                oldest_pending_s=float(oldest) if oldest is not None else None,
                completed_last_minute=int(summary.get("completed_last_minute") or 0),
                expired_leases=int(summary.get("expired_leases") or 0),
                top_failures=failures,
                failed_by_kind=by_kind,
                last_failure_by_domain=by_domain,
            )

        return self.db.run(_collect)

    def gauges(self) -> QueueGauges:
        """The figures the metrics exporter serves: tasks by type, status and domain (with the oldest pending
        age), dead letters by kind, each domain's politeness and each budgeted group's budget left.

        Read in one transaction, so every figure is of the same moment whichever host's exporter asks.
        """
        queries = named_queries()

        def _optional(value: Any) -> float | None:
            return float(value) if value is not None else None

        def _collect(cur: Cursor) -> QueueGauges:
            cur.execute(queries["metrics_tasks"])
            tasks = [
                TaskGauge(
                    task_type=r["task_type"],
                    status=r["status"],
                    domain=r["domain"],
                    n=int(r["n"]),
                    oldest_pending_s=_optional(r["oldest_pending_s"]),
                    overdue_s=_optional(r["overdue_s"]),
                    expired_leases=int(r["expired_leases"]),
                )
                for r in cur.fetchall()
            ]
            cur.execute(queries["stats_failed_by_kind"])
            dead: dict[str, dict[str, int]] = {}
            for r in cur.fetchall():
                dead.setdefault(r["task_type"], {})[r["kind"]] = int(r["n"])
            cur.execute(queries["metrics_domains"])
            domains = [
                DomainGauge(
                    r["domain"], float(r["interval_s"]), float(r["floor_interval_s"]), float(r["next_slot_in_s"])
                )
                for r in cur.fetchall()
            ]
            cur.execute(queries["metrics_budgets"])
            budgets = {(r["task_type"], r["grp"]): int(r["budget_left"]) for r in cur.fetchall()}
            return QueueGauges(tasks=tasks, dead_letters=dead, domains=domains, budget_left=budgets)

        return self.db.run(_collect)

    def now(self) -> datetime:
        """The database's clock, which stamps every task: a run's start on the clock its figures are read by."""
        now: datetime = self.db.query(named_queries()["database_now"])[0]["now"]
        return now

    def activity_since(self, since: datetime) -> Activity:
        """Tasks of the queue's types completed since ``since`` by type and group, and the retries they took (a
        crawl's queue has its site's types: another site's crawl on the same queue is not counted)."""
        completed: dict[str, dict[str, int]] = {}
        created: Counter[str] = Counter()
        failed: Counter[str] = Counter()
        retries = 0
        params = {"since": since, "types": list(self.ctx.task_types)}
        for r in self.db.query(named_queries()["activity_since"], params):
            if r["completed"]:
                completed.setdefault(r["task_type"], {})[r["grp"]] = int(r["completed"])
            created[r["task_type"]] += int(r["created"])
            failed[r["task_type"]] += int(r["failed"])
            retries += int(r["retries"])
        return Activity(completed=completed, created=dict(created), failed=dict(failed), retries=retries)

    def failures_since(
        self, since: datetime, task_type: str, kinds: Collection[str], *, until: datetime | None = None
    ) -> list[tuple[str, str]]:
        """``(group, error)`` of each task of ``task_type`` claimed since ``since`` (and by ``until``) and now
        failed for good as one of ``kinds``."""
        params = {"since": since, "until": until, "task_type": self.ctx.check_type(task_type), "kinds": sorted(kinds)}
        return [(r["grp"], r["error"]) for r in self.db.query(named_queries()["failures_since"], params)]

    def failed_kinds_since(self, since: datetime) -> dict[str, int]:
        """Tasks of the queue's types claimed since ``since`` and now failed for good, by error kind: the failures
        of a run that started then (:meth:`activity_since` counts the same tasks by type)."""
        params = {"since": since, "types": list(self.ctx.task_types)}
        rows = self.db.query(named_queries()["failed_by_kind_since"], params)
        return {r["kind"]: int(r["n"]) for r in rows}

    def completed_by(self, workers: list[str], since: datetime) -> dict[str, int]:
        """Tasks the workers named ``workers`` completed since ``since``, by type."""
        rows = self.db.query(named_queries()["completed_by_workers"], {"workers": workers, "since": since})
        return {r["task_type"]: int(r["n"]) for r in rows}

    def requeue(self, task_type: str | None = None, domain: str | None = None, error_like: str | None = None) -> int:
        """Move failed tasks back to pending with attempts reset; returns how many moved.

        Filters combine with AND; ``error_like`` is a SQL LIKE pattern. A failed task whose URL has a live
        task again (re-enqueued meanwhile) is skipped, as is every older failed copy of the same URL: the
        partial unique index allows one live task per URL. Skips are logged.
        """
        if task_type is not None:
            self.ctx.check_type(task_type)
        params = {"task_type": task_type, "domain": domain, "error_like": error_like}
        for attempt in range(3):
            try:
                row = self.db.query(named_queries()["requeue"], params)[0]
                break
            except psycopg2.errors.UniqueViolation:
                # A concurrent enqueue made one of the URLs live between our check and our update.
                if attempt == 2:
                    raise
        if row["skipped"]:
            log.info("requeue: %s failed task(s) skipped (their URL has a live task)", row["skipped"])
        return int(row["requeued"])

    def failing_of_kinds(self, kinds: Collection[str], *, after: str = "", limit: int = 500) -> list[str]:
        """URLs failing now (each URL's newest task is failed) as one of ``kinds``, in URL order after ``after``."""
        params = {"kinds": sorted(kinds), "after": after, "limit": limit}
        return [r["url"] for r in self.db.query(named_queries()["failing_of_kinds"], params)]

    def resolve_failed_with(
        self, urls: Collection[str], kinds: Collection[str], work: Callable[[Cursor, frozenset[str]], T]
    ) -> T:
        """Complete the failed tasks of ``urls`` (of one of ``kinds``) whose result the caller rebuilt without a
        fetch, and run ``work(cursor, resolved_urls)`` in the same transaction: the result is written for the
        URLs resolved, or nothing is (a URL requeued meanwhile is left to its new task). ``work`` must be safe
        to run again, as :meth:`TaskQueue.complete_with`'s."""
        params = {"urls": sorted(urls), "kinds": sorted(kinds)}

        def _txn(cur: Cursor) -> T:
            cur.execute(named_queries()["resolve_failed"], params)
            return work(cur, frozenset(r["url"] for r in cur.fetchall()))

        return self.db.run(_txn)

    def prune(self, older_than_s: float, *, batch: int = PRUNE_BATCH) -> int:
        """Delete the finished tasks that ended more than ``older_than_s`` ago, and the URLs seen in the epochs
        that ended then (:meth:`QueueCore.begin_epoch`).

        Completed tasks count from their completion, failed ones from the claim of their last attempt;
        pending and leased tasks are never pruned. One short statement per ``batch`` rows, each skipping
        rows another transaction holds, so a prune of a large table runs beside the workers; returns how
        many tasks went.
        """
        params = {"older_than_s": check_number("older_than_s", older_than_s), "batch": batch}

        def _prune(cur: Cursor) -> int:
            cur.execute(named_queries()["prune_finished"], params)
            return int(cur.rowcount)

        total = 0
        while (pruned := self.db.run(_prune)) > 0:
            total += pruned
        seen = 1
        while seen > 0:  # the last statement, with no URL left to delete, deletes the empty epochs
            seen = int(self.db.query(named_queries()["prune_seen"], params)[0]["n"])
        return total
