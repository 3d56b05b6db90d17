"""Waiting: for a politeness slot (one rule, sync and async) and, idle, for work (NOTIFY, due work, timeout)."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from book_assets.db.connection import Database
from book_assets.queue import NewTask, Task, TaskQueue
from book_assets_tests.queue.helpers import make_queue, url

NOW = 1_000_000.0


def _task(slot_due: float | None) -> Task:
    """A task whose slot comes at ``slot_due`` on the monotonic clock (the wall-clock slot_at is only shown)."""
    return Task(
        id=1,
        task_type="detail",
        payload={"url": url(1)},
        priority=0,
        domain="books.example",
        group=None,
        attempt=1,
        max_attempts=5,
        lease_token=1,
        lease_expires_at=datetime.fromtimestamp(NOW + 60, UTC),
        slot_at=None if slot_due is None else datetime.fromtimestamp(slot_due, UTC),
        slot_due=slot_due,
    )


def test_a_task_without_a_slot_starts_now() -> None:
    assert TaskQueue.slot_wait_s(_task(None), now=NOW) == 0.0


def test_a_slot_ahead_is_waited_for() -> None:
    assert TaskQueue.slot_wait_s(_task(NOW + 0.25), now=NOW) == pytest.approx(0.25)


def test_a_wake_up_within_the_tolerance_starts_now() -> None:
    assert TaskQueue.slot_wait_s(_task(NOW - 0.004), tolerance_s=0.005, now=NOW) == 0.0


def test_a_wake_up_later_than_the_tolerance_needs_a_fresh_slot() -> None:
    assert TaskQueue.slot_wait_s(_task(NOW - 0.006), tolerance_s=0.005, now=NOW) is None


def test_an_async_slot_wait_that_wakes_late_takes_a_fresh_slot_and_starts_on_it(db: Database) -> None:
    queue = make_queue(db, default_interval_s=0.2)
    queue.enqueue("detail", {"url": url(1)})
    (task,) = queue.claim("w", 1).tasks
    assert task.slot_at is not None
    assert task.slot_due is not None
    # as if the worker woke a second late
    late = replace(task, slot_at=task.slot_at - timedelta(seconds=1), slot_due=task.slot_due - 1.0)
    started = asyncio.run(queue.wait_for_slot_async(late))
    assert started.slot_at is not None and started.slot_at > task.slot_at  # the domain's next slot
    assert started.slot_due is not None and time.monotonic() >= started.slot_due  # slept until it
    assert time.time() >= started.slot_at.timestamp()  # one clock here: the database's slot has passed too


def test_idle_wait_is_the_idle_timeout_when_nothing_comes_due(db: Database) -> None:
    queue = make_queue(db, idle_timeout_s=7.0)
    assert queue.idle_wait_s(["detail"]) == 7.0
    assert queue.idle_wait_s(["detail"], retry_in_s=0.3) == 0.3  # the next politeness slot comes first


def test_idle_wait_ends_when_the_next_delayed_task_comes_due(db: Database) -> None:
    queue = make_queue(db, idle_timeout_s=3600.0)
    queue.enqueue("detail", {"url": url(1)}, run_at=30.0)
    queue.enqueue("listing", {"url": url(2)}, run_at=10.0)  # another type: not this worker's work
    assert 25.0 < queue.idle_wait_s(["detail"]) <= 30.0


def test_idle_wait_ends_when_the_next_lease_expires(db: Database) -> None:
    queue = make_queue(db, idle_timeout_s=3600.0, lease_s=20.0)
    queue.enqueue("detail", {"url": url(1)})
    assert queue.claim("other", 1).tasks
    assert 15.0 < queue.idle_wait_s(["detail"]) <= 20.0  # its task is reclaimed then, if nobody renews it


def test_idle_wait_never_drops_below_ten_milliseconds(db: Database) -> None:
    queue = make_queue(db, lease_s=20.0)
    queue.enqueue("detail", {"url": url(1)})
    assert queue.claim("other", 1).tasks
    db.query("UPDATE tasks SET lease_expires_at = now() - interval '1 minute'")  # expired, not yet reclaimed
    assert queue.idle_wait_s(["detail"]) == 0.01


def test_async_work_wait_asks_for_a_claim_right_after_subscribing(db: Database) -> None:
    queue = make_queue(db)
    # Work enqueued before the LISTEN sent no notification this connection can see: claim again first.
    assert asyncio.run(queue.wait_for_work_async(3600.0)) is True
    assert asyncio.run(queue.wait_for_work_async(0.05)) is False  # subscribed: now it waits


def test_async_work_wait_wakes_on_an_enqueue(db: Database, database_url: str) -> None:
    waiter = make_queue(Database(database_url))
    producer = make_queue(db)

    async def wait() -> bool:
        await waiter.wait_for_work_async(0.05)  # subscribes
        timer = threading.Timer(0.2, lambda: producer.enqueue_many([NewTask("detail", {"url": url(1)})]))
        timer.start()
        try:
            return await waiter.wait_for_work_async(30.0)
        finally:
            timer.join()

    try:
        assert asyncio.run(wait()) is True  # a timeout returns False
    finally:
        waiter.db.close()


def test_async_work_wait_ends_on_its_stop_event(db: Database) -> None:
    queue = make_queue(db)

    async def wait() -> bool:
        await queue.wait_for_work_async(0.05)  # subscribes
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(0.1, stop.set)
        return await asyncio.wait_for(queue.wait_for_work_async(3600.0, stop=stop), timeout=30)

    assert asyncio.run(wait()) is False  # stopped, not woken
