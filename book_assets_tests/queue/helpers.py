"""Helpers shared by the queue tests and their worker processes (importable under 'spawn')."""

from __future__ import annotations

import select
import time

from book_assets.db.connection import Database
from book_assets.queue import Backoff, LeaseLost, Task, TaskQueue
from book_assets.queue.context import check_number
from book_assets.queue.domains import SLOT_TOLERANCE_S

TYPES = ("detail", "listing")


def make_queue(db: Database, **kwargs: object) -> TaskQueue:
    """A queue without politeness (interval 0) and with immediate, deterministic retries."""
    options: dict[str, object] = {
        "task_types": TYPES,
        "lease_s": 30.0,
        "backoff": Backoff(base_s=0.0, max_s=0.0, jitter="none"),
        "default_interval_s": 0.0,
    }
    options.update(kwargs)
    return TaskQueue(db, **options)  # type: ignore[arg-type]


def complete(queue: TaskQueue, task: Task) -> None:
    """Complete one task; :class:`LeaseLost` if the caller no longer holds its lease (nothing changes)."""
    if queue.complete_many([task]) != 1:
        raise LeaseLost(f"task {task.id}: lease {task.lease_token} is no longer held")


def wait_for_slot(queue: TaskQueue, task: Task, *, tolerance_s: float = SLOT_TOLERANCE_S) -> Task:
    """Sleep until the task's politeness slot (``slot_wait_s``); return the task to start *now*.

    The blocking twin of ``wait_for_slot_async``, for tests that drive a queue without an event loop.
    """
    tolerance = check_number("tolerance_s", tolerance_s)
    while (wait := queue.slot_wait_s(task, tolerance_s=tolerance)) != 0:
        if wait is None:
            task = queue.reslot(task)
        else:
            time.sleep(wait)
    return task


def wait_for_work(queue: TaskQueue, timeout_s: float) -> bool:
    """Sleep until tasks are enqueued/released/requeued (NOTIFY) or ``timeout_s`` passes; whether woken.

    The blocking twin of ``wait_for_work_async``: ``select()`` on the process's connection.
    """
    waiting = queue.waiting
    waiting.subscribe()
    if waiting.take_notifications():
        return True
    readable, _, _ = select.select([queue.db.connection()], [], [], check_number("timeout_s", timeout_s))
    return bool(readable) and waiting.take_notifications()


def url(i: int | str, host: str = "books.example") -> str:
    return f"http://{host}/page/{i}"


def swrr(weights: dict[str, float], picks: int) -> list[str]:
    """Reference smooth weighted round-robin (nginx), all members always backlogged."""
    current = dict.fromkeys(weights, 0.0)
    total = sum(weights.values())
    out = []
    for _ in range(picks):
        for name, weight in weights.items():
            current[name] += weight
        best = min(current, key=lambda name: (-current[name], name))
        current[best] -= total
        out.append(best)
    return out


# --- worker processes (top-level so that 'spawn' can import them) ---------------------------------------------


def drain_worker(database_url: str, worker_id: str, batch: int) -> tuple[list[int], int]:
    """Claim and complete until the queue is empty; returns the ids claimed and how many completes applied."""
    db = Database(database_url, application_name=f"queue-test-{worker_id}")
    queue = make_queue(db)
    claimed: list[int] = []
    applied = 0
    try:
        while True:
            tasks = queue.claim(worker_id, batch).tasks
            if not tasks:
                return claimed, applied
            claimed.extend(t.id for t in tasks)
            applied += queue.complete_many(tasks)
    finally:
        db.close()


def claim_and_hang(database_url: str, n: int, lease_s: float, conn: object) -> None:
    """Claim n tasks, report (id, token) pairs through the pipe, then hang until killed."""
    import time

    db = Database(database_url, application_name="queue-test-doomed")
    queue = make_queue(db, lease_s=lease_s)
    tasks = queue.claim("doomed", n).tasks
    conn.send([(t.id, t.lease_token) for t in tasks])  # type: ignore[attr-defined]
    while True:
        time.sleep(60)


def polite_worker(database_url: str, worker_id: str, run_s: float, barrier: object, results: object) -> None:
    """Claim one task at a time, sleep until its slot, record (slot, request start), complete; for run_s.

    The slot is ``slot_at`` in epoch seconds of the database's clock (None: started unthrottled), the start
    ``time.time()`` once :func:`wait_for_slot` let the request go. All workers pass the barrier
    first, so they run over the same window (process start-up is slow).
    """
    db = Database(database_url, application_name=f"queue-test-{worker_id}")
    queue = make_queue(db, default_interval_s=0.2)
    db.connection()
    starts: list[tuple[float | None, float]] = []
    barrier.wait(60)  # type: ignore[attr-defined]
    deadline = time.time() + run_s
    try:
        while time.time() < deadline:
            result = queue.claim(worker_id, 1)
            if not result.tasks:
                wait_for_work(queue, min(result.retry_in_s or 0.05, max(0.0, deadline - time.time())))
                continue
            task = wait_for_slot(queue, result.tasks[0])
            starts.append((None if task.slot_at is None else task.slot_at.timestamp(), time.time()))
            complete(queue, task)
    finally:
        db.close()
        results.put(starts)  # type: ignore[attr-defined]
