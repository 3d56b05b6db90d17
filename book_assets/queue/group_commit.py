"""Group commit for an asyncio worker: completions that arrive while one commits share the next transaction.

A worker with many pages in flight finishes them a few milliseconds apart. Committing each alone costs a
transaction (BEGIN, the completion, COMMIT and its WAL flush) and a hop to the database thread per page. Here
the first completion is sent at once; those that arrive while it runs wait and go together, up to
``max_batch``, in one :meth:`TaskQueue.complete_all_with`. A busy worker batches exactly as much as piled up
meanwhile. A worker whose pages finish tens of milliseconds apart (a crawl bound by politeness) would commit
each alone; its ``linger`` lets the first completion of a group wait a moment for the next ones, when the worker
says a wait costs it latency, not throughput (``Worker._commit_linger_s``). A page lost in a crash while it
waits is fetched again when its lease runs out, like one lost before its commit.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from book_assets.db.connection import Cursor
from book_assets.queue.models import Task
from book_assets.queue.queue import TaskQueue

T = TypeVar("T")

#: Runs a blocking queue call off the event loop (the worker's database thread).
Runner = Callable[..., Awaitable[Any]]


class GroupCommit:
    """``await complete_with(task, work)``: as :meth:`TaskQueue.complete_with`, committed with its neighbours."""

    def __init__(
        self, queue: TaskQueue, run: Runner, *, max_batch: int = 32, linger: Callable[[], float] | None = None
    ) -> None:
        """``linger``: asked as a group's first completion arrives, how many seconds it may wait for others (0:
        none); the wait ends early when ``max_batch`` are pending. None: never wait."""
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self.queue = queue
        self.run = run
        self.max_batch = max_batch
        self.linger = linger
        self._pending: list[tuple[Task, Callable[[Cursor], Any], asyncio.Future[Any]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._full = asyncio.Event()
        self._lingering = False

    @property
    def pending(self) -> int:
        """Completions waiting for their transaction."""
        return len(self._pending)

    @property
    def lingering(self) -> int:
        """Completions waiting for others to share their transaction (``linger``), not for a commit under way."""
        return len(self._pending) if self._lingering else 0

    async def complete_with(self, task: Task, work: Callable[[Cursor], T]) -> T:
        """Complete ``task`` with ``work``'s writes, under its lease; raises what ``work`` or the lease raised."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._pending.append((task, work, future))
        if len(self._pending) >= self.max_batch:
            self._full.set()
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.ensure_future(self._flush())
        return await future

    async def _linger(self) -> None:
        wait_s = self.linger() if self.linger is not None else 0.0
        if wait_s <= 0 or len(self._pending) >= self.max_batch:
            return
        self._full.clear()
        self._lingering = True
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._full.wait(), wait_s)
        finally:
            self._lingering = False

    async def _flush(self) -> None:
        try:
            await self._linger()
        except BaseException:  # cancelled with the loop while it waited: so are the waiters
            for _, _, future in self._pending:
                future.cancel()
            self._pending = []
            raise
        while self._pending:
            batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
            try:
                outcomes = await self.run(self.queue.complete_all_with, [(task, work) for task, work, _ in batch])
            except Exception as exc:  # the database stayed away: every completion of the group failed
                for _, _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            except BaseException:  # cancelled with the loop: the waiters are cancelled with it
                for _, _, future in batch + self._pending:
                    future.cancel()
                self._pending = []
                raise
            for (_, _, future), outcome in zip(batch, outcomes, strict=True):
                if future.done():  # its waiter was cancelled; the completion stands
                    continue
                if isinstance(outcome, Exception):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)
