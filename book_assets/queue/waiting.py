"""Waiting for work: how long an idle worker may sleep, and the sleep itself on LISTEN/NOTIFY.

Enqueue, release, requeue and a drain notify :data:`CHANNEL`; an idle worker sleeps until a notification,
until work becomes claimable without one, or its idle timeout (``docs/queue.md``, "Waiting for work").
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Collection
from typing import Final

from book_assets.db.connection import CONNECTION_ERRORS
from book_assets.queue.context import QueueContext, Runner, check_number, named_queries

#: Channel notified when tasks become claimable (enqueue, release, requeue).
CHANNEL: Final = "book_pipeline_tasks"
#: The shortest idle sleep: an idle loop never spins, whatever the clocks say.
MIN_IDLE_WAIT_S: Final = 0.01
#: The longest idle sleep through a pooler in transaction mode, where LISTEN cannot hold: idle workers poll.
POOLED_POLL_S: Final = 0.5


class Waiting:
    """An idle worker's wait for work, on the process's connection (one subscription per connection)."""

    def __init__(self, ctx: QueueContext) -> None:
        self.ctx = ctx
        self.db = ctx.db
        self._listening_on: object | None = None

    def idle_wait_s(self, task_types: Collection[str], retry_in_s: float | None = None) -> float:
        """How long a worker that found nothing to claim may sleep before it claims again.

        No longer than until work of ``task_types`` becomes claimable without a notification, and never
        longer than ``idle_timeout_s``. When the empty :class:`ClaimResult` waits for a politeness slot,
        that is its ``retry_in_s`` (short; the next claim looks again). Otherwise one query finds the
        ``run_at`` of the next delayed or retried task and the expiry of the next lease (its task is then
        reclaimed): it reads every pending task of the types, so it is not run while work waits for a slot.
        Pass the result to :meth:`wait_for_work_async`.
        """
        types = [self.ctx.check_type(t) for t in task_types]
        if retry_in_s is not None:
            return max(min(retry_in_s, self.ctx.idle_timeout_s), MIN_IDLE_WAIT_S)
        wait = self.ctx.idle_timeout_s
        due_in_s = self.db.query(named_queries()["next_due"], {"types": types})[0]["due_in_s"]
        if due_in_s is not None:
            wait = min(wait, float(due_in_s))
        return max(wait, MIN_IDLE_WAIT_S)

    async def wait_for_work_async(
        self, timeout_s: float, *, run: Runner | None = None, stop: asyncio.Event | None = None
    ) -> bool:
        """Sleep until tasks are enqueued/released/requeued (NOTIFY), ``timeout_s`` passes or ``stop`` is set.

        The event loop watches the connection's socket, so waiting costs no queries. Returns whether a wake-up
        arrived (a stale one may: the next claim will tell); pass :meth:`idle_wait_s` as the timeout. ``run``
        runs the queue's calls on the connection (default :func:`asyncio.to_thread`); its thread is free while
        the loop waits. Returns True at once when this call (re)subscribes: work enqueued before the LISTEN
        sent no notification this connection could see, so the caller claims again.
        """
        timeout = check_number("timeout_s", timeout_s)
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

        def _ready() -> None:
            if not readable.done():
                readable.set_result(None)

        loop.add_reader(fd, _ready)
        stopped = asyncio.ensure_future(stop.wait()) if stop is not None else loop.create_future()
        try:
            await asyncio.wait({readable, stopped}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            loop.remove_reader(fd)
            stopped.cancel()
        if not readable.done():
            return False
        try:
            return await run(self.take_notifications)
        except CONNECTION_ERRORS:
            self._listening_on = None
            return False

    def subscribe(self) -> bool:
        """LISTEN on the process's current connection unless already done; returns whether it was needed."""
        if self._listening_on is self.db.connection():
            return False
        self.db.run(lambda cur: cur.execute(named_queries()["listen"]))
        self._listening_on = self.db.connection()
        return True

    def _socket_to_watch(self) -> int | None:
        """The connection's socket, subscribed; None when the caller should claim at once instead of waiting."""
        if self.subscribe() or self.take_notifications():
            return None
        return int(self.db.connection().fileno())

    def take_notifications(self) -> bool:
        """Whether notifications arrived on the connection since the last call (they are consumed)."""
        conn = self.db.connection()
        conn.poll()
        woke = bool(conn.notifies)
        conn.notifies.clear()
        return woke


async def _sleep_unless(stop: asyncio.Event | None, seconds: float) -> None:
    """Sleep ``seconds``, or less if ``stop`` is set meanwhile."""
    if stop is None:
        await asyncio.sleep(seconds)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
