"""Domain policy: politeness slots, in-flight caps, AutoThrottle, Retry-After and robots.txt's Crawl-delay.

How slots are handed out and kept: ``docs/queue.md``, "Politeness slots".
"""

from __future__ import annotations

import asyncio
import functools
import time
from dataclasses import replace
from datetime import datetime
from typing import Any, Final

from book_assets.queue.context import UNSET, QueueContext, Runner, _Unset, check_number, named_queries
from book_assets.queue.core import extend_lease
from book_assets.queue.models import Task
from book_assets.queue.throttle import THROTTLED_MIN_S, AutoThrottle

#: How late after its politeness slot a request may still start (see DomainPolicy.slot_wait_s).
SLOT_TOLERANCE_S: Final = 0.005


class DomainPolicy:
    """Each domain's politeness, held in the database so that it holds across processes and hosts."""

    def __init__(self, ctx: QueueContext) -> None:
        self.ctx = ctx
        self.db = ctx.db

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
            min_interval_s = check_number("min_interval_s", min_interval_s)
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
            "default_interval_s": self.ctx.default_interval_s,
            "max_in_flight": None if isinstance(max_in_flight, _Unset) else max_in_flight,
            "set_max_in_flight": not isinstance(max_in_flight, _Unset),
            "set_throttle": not isinstance(throttle, _Unset),
            "max_interval_s": rule.max_interval_s if rule else None,
            "target_concurrency": rule.target_concurrency if rule else None,
        }
        self.db.query(named_queries()["set_domain_policy"], params)

    def observe(self, domain: str, latency_s: float, *, throttled: bool = False, ok: bool = True) -> float | None:
        """Report one request to ``domain``: how long it took, whether the server throttled it, whether it was ok.

        An autothrottled domain's interval moves by :func:`book_assets.queue.throttle.next_interval` (one
        statement, so observations from every worker on every host add up); returns the new interval, or
        None when the domain is not autothrottled (nothing changes).
        """
        params = {
            "domain": domain.lower(),
            "latency_s": check_number("latency_s", latency_s),
            "throttled": bool(throttled),
            "ok": bool(ok),
            "min_step_s": THROTTLED_MIN_S,
        }
        rows = self.db.query(named_queries()["observe"], params)
        return float(rows[0]["min_interval_s"]) if rows else None

    def back_off(self, domain: str, *, max_interval_s: float) -> float | None:
        """A response from ``domain`` turned the request away though its status said success (a soft block):
        its interval at least doubles for every worker, as after a 429 under AutoThrottle, up to the domain's
        AutoThrottle cap or else ``max_interval_s``. Returns the new interval; None for an unknown domain.

        Whether throttled or not, the domain is backed off: a site that serves challenges to a crawler that
        keeps its pace escalates to blocking it. The next crawl's politeness starts from its interval again.
        """
        params = {
            "domain": domain.lower(),
            "max_interval_s": check_number("max_interval_s", max_interval_s),
            "min_step_s": THROTTLED_MIN_S,
        }
        rows = self.db.query(named_queries()["back_off"], params)
        return float(rows[0]["min_interval_s"]) if rows else None

    def push_domain(self, domain: str, seconds: float) -> datetime:
        """No request to ``domain`` starts before now + ``seconds`` (e.g. a 429's Retry-After).

        Slots already handed out are not revoked; returns the domain's next slot.
        """
        params = {
            "domain": domain.lower(),
            "seconds": check_number("seconds", seconds),
            "default_interval_s": self.ctx.default_interval_s,
        }
        next_slot_at: datetime = self.db.query(named_queries()["push_domain"], params)[0]["next_slot_at"]
        return next_slot_at

    def take_slot(self, domain: str) -> float | None:
        """A politeness slot for a request that is not a task (robots.txt), taken from the domain's slots like
        a claim's: the ``time.monotonic()`` reading at which it may start; None when the domain is unthrottled."""
        rows = self.db.query(named_queries()["take_domain_slot"], {"domain": domain.lower()})
        return self.ctx.clock.due(rows[0]["slot_at"]) if rows else None

    def domain_policy(self, domain: str) -> dict[str, Any] | None:
        """The stored politeness of ``domain``, if known: min_interval_s, max_in_flight, next_slot_at, and its
        AutoThrottle's floor_interval_s, max_interval_s, target_concurrency and last latency_s (NULL: off)."""
        rows = self.db.query(named_queries()["domain_policy"], {"domain": domain.lower()})
        return rows[0] if rows else None

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

    async def wait_for_slot_async(self, task: Task, *, run: Runner | None = None) -> Task:
        """Sleep on the event loop until the task's politeness slot (:meth:`slot_wait_s`); return the task to
        start *now* (with a fresh slot, :meth:`reslot`, if the loop woke too late for its own).

        ``run`` runs :meth:`reslot` on the connection's thread (default :func:`asyncio.to_thread`). Raises
        :class:`LeaseLost` if the lease is gone.
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

        The domain's next slot, or, when the task held the last slot handed out, a moment from now: nothing
        started on the missed slot, so the domain's slots start again from the task's (``reslot`` in
        ``sql/queue.sql``).

        For workers that wait in their own way (an event loop) and then apply :meth:`slot_wait_s`'s rule.
        Raises :class:`LeaseLost` if the lease is gone.
        """
        rows = self.db.query(
            named_queries()["reslot"], {"id": task.id, "token": task.lease_token, "lease_s": self.ctx.lease_s}
        )
        if not rows:
            extend_lease(self.ctx, task, self.ctx.lease_s)  # raises LeaseLost when the lease is gone
            return replace(task, slot_at=None, slot_due=None)  # the domain is no longer throttled
        row = rows[0]
        return replace(
            task,
            slot_at=row["slot_at"],
            slot_due=self.ctx.clock.due(row["slot_at"]),
            lease_expires_at=row["lease_expires_at"],
        )
