"""Group scheduling: the round-robin weights of groups and task types, group budgets, and what is left.

The algorithm and its invariants: ``docs/queue.md``, "Fairness"; the claim runs it in SQL.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from typing import Any

from book_assets.db.connection import Cursor
from book_assets.queue.context import QueueContext, check_number, named_queries
from book_assets.queue.models import GroupBudget


class GroupScheduling:
    """The fair-scheduling state of the queue: weights, budgets, their reports, and whether work is left."""

    def __init__(self, ctx: QueueContext) -> None:
        self.ctx = ctx
        self.db = ctx.db

    def set_group_weights(
        self, task_type: str, weights: Mapping[str, float], default_weight: float | None = None
    ) -> None:
        """Replace the round-robin weights of ``task_type``'s groups and restart the round-robin.

        Weights are numbers >= 0 (0: never served). Groups not listed get the default weight: the ``"*"``
        entry of ``weights``, else ``default_weight``, else 1.
        """
        self.ctx.check_type(task_type)
        entries = dict(weights)
        default = entries.pop("*", None)
        if default is None:
            default = 1.0 if default_weight is None else default_weight
        default = check_number("default weight", default)
        for group, weight in entries.items():
            check_number(f"weight of group {group!r}", weight)
        self._set_scope_weights(f"groups:{task_type}", entries, default)

    def _set_scope_weights(self, scope: str, weights: Mapping[str, float], default: float) -> None:
        queries = named_queries()

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
        self.ctx.check_type(task_type)
        for group, budget in budgets.items():
            if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
                raise ValueError(f"budget of group {group!r} must be an integer >= 0, got {budget!r}")
        scope = f"groups:{task_type}"
        queries = named_queries()
        grant = key or str(uuid.uuid4())

        def _set(cur: Cursor) -> None:
            cur.execute(queries["lock_scope"], {"scope": scope})
            cur.execute(
                queries["set_scope_budgets"],
                {"scope": scope, "members": list(budgets), "budgets": list(budgets.values()), "key": grant},
            )

        self.db.run(_set)
        return grant

    def clear_group_budgets(self, task_type: str) -> None:
        """Remove every group budget of ``task_type``."""
        self.ctx.check_type(task_type)
        scope = f"groups:{task_type}"
        queries = named_queries()

        def _clear(cur: Cursor) -> None:
            cur.execute(queries["lock_scope"], {"scope": scope})
            cur.execute(queries["clear_scope_budgets"], {"scope": scope})

        self.db.run(_clear)

    def budget_report(self, task_type: str) -> list[GroupBudget]:
        """Each budgeted group of ``task_type``: its budget and its charged tasks completed, failed, leased."""
        rows = self.db.query(named_queries()["budget_report"], {"scope": f"groups:{self.ctx.check_type(task_type)}"})
        return [
            GroupBudget(r["member"], int(r["budget"]), int(r["completed"]), int(r["failed"]), int(r["in_progress"]))
            for r in rows
        ]

    def group_state(self, task_type: str) -> list[dict[str, Any]]:
        """The round-robin state of ``task_type``'s groups (member, weight, current, budget, idle)."""
        return self.db.query(named_queries()["scope_state"], {"scope": f"groups:{self.ctx.check_type(task_type)}"})

    def type_state(self) -> list[dict[str, Any]]:
        """The round-robin state of the task types of interleaved claims (member, weight, current, budget, idle)."""
        return self.db.query(named_queries()["scope_state"], {"scope": "interleave"})

    def pending_by_group(self, task_type: str) -> dict[str, int]:
        """Pending tasks of ``task_type`` per group ('' for ungrouped)."""
        rows = self.db.query(named_queries()["pending_by_group"], {"task_type": self.ctx.check_type(task_type)})
        return {r["grp"]: int(r["n"]) for r in rows}

    def outstanding(self, task_types: Collection[str]) -> int:
        """Tasks of these types that are leased or that a claim could still hand out.

        Pending tasks of a group weighted 0 or out of budget are not counted: 0 means the types are drained.
        """
        types = [self.ctx.check_type(t) for t in task_types]
        return int(self.db.query(named_queries()["outstanding"], {"types": types})[0]["n"])

    def drained(self, task_types: Collection[str]) -> bool:
        """Whether nothing of these types is leased or can still be handed out (:meth:`outstanding` would be 0;
        this asks only whether there is one task).

        When so, every idle worker is notified: a worker that found nothing to claim while another still held
        the last task sleeps on :data:`~book_assets.queue.waiting.CHANNEL`, and the end of that task enqueues
        nothing to wake it, so without this it would learn of the drain only at its idle timeout or the next
        lease expiry. The last worker to finish always sees 0 (every other completion committed before its
        check), so one of the finishing workers' checks is the one that wakes the sleepers.
        """
        types = [self.ctx.check_type(t) for t in task_types]
        if self.db.query(named_queries()["any_outstanding"], {"types": types})[0]["any"]:
            return False
        self.db.query(named_queries()["wake_idle_workers"])
        return True
