"""An idle worker sleeps on the queue's notification: few claims while idle, woken by new or due work, stoppable.

Claims are counted on the worker's real queue (every call still runs against PostgreSQL), so no assertion
depends on how fast this machine is: a worker that polls every half second makes about eight claims in four
idle seconds, one that waits on NOTIFY makes a couple.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from book_assets.crawl.config import DETAIL
from book_assets.crawl.stats import WorkerStats
from book_assets.crawl.worker import Worker
from book_assets.db.connection import Database
from book_assets.sandbox.catalogue import Catalogue
from book_assets.sandbox.faults import Faults
from book_assets.sandbox.server import SandboxServer
from book_assets.sandbox.testing import SandboxFactory
from book_assets_tests.crawl.conftest import sandbox_config
from book_assets_tests.reliability.conftest import wait_until

#: How long the first test leaves the worker idle.
IDLE_S = 4.0
#: An idle timeout no test outlasts: within it, only a notification or due work can wake the worker.
NEVER_S = 3600.0
BOOK = sorted(Catalogue(seed=0, day=0).ground_truth())[0]


@dataclass
class RunningWorker:
    """A worker running on its own event loop in a thread, with its claims counted."""

    worker: Worker
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    claims: int = 0
    stats: list[WorkerStats] = field(default_factory=list)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.worker.stop)

    def wait_until_idle(self) -> None:
        """Until the worker has claimed, found nothing and subscribed (its second empty claim)."""
        assert wait_until(lambda: self.claims >= 2, 30)
        time.sleep(0.3)


def _start(worker: Worker) -> RunningWorker:
    loop = asyncio.new_event_loop()
    running = RunningWorker(worker, loop, threading.Thread(target=lambda: None))
    claim = worker.queue.claim

    def counted(*args: Any, **kwargs: Any) -> Any:
        running.claims += 1
        return claim(*args, **kwargs)

    worker.queue.claim = counted  # type: ignore[method-assign]
    running.thread = threading.Thread(target=lambda: running.stats.append(loop.run_until_complete(worker.run())))
    running.thread.start()
    return running


@pytest.fixture
def start_worker(db: Database, database_url: str, sandbox: SandboxServer) -> Iterator[Any]:
    started: list[RunningWorker] = []

    def start(*, idle_timeout_s: float | None = None, max_tasks: int | None = None) -> RunningWorker:
        worker = Worker(
            database_url, sandbox_config(sandbox.url, concurrency=1), until_drained=False, max_tasks=max_tasks
        )
        if idle_timeout_s is not None:
            worker.queue.idle_timeout_s = idle_timeout_s
        started.append(_start(worker))
        return started[-1]

    yield start
    for running in started:
        running.stop()
        running.thread.join(timeout=30)
        running.loop.close()


def _enqueue_book(db: Database, base_url: str, **kwargs: Any) -> None:
    from book_assets_tests.queue.helpers import make_queue

    make_queue(db).enqueue(DETAIL, {"url": base_url + BOOK}, **kwargs)


def test_an_idle_worker_claims_a_few_times_in_four_seconds_not_twice_a_second(start_worker: Any) -> None:
    running = start_worker()
    time.sleep(IDLE_S)
    running.stop()
    running.thread.join(timeout=30)
    assert not running.thread.is_alive()
    # The first claim, one more right after subscribing (work enqueued in between is not missed), and at
    # most one per idle timeout (5 s) after that; polling every 0.5 s made about 8.
    assert running.claims <= 3, f"{running.claims} claims in {IDLE_S} idle seconds"


def test_an_idle_worker_claims_a_task_enqueued_while_it_waits(
    start_worker: Any, db: Database, sandbox: SandboxServer
) -> None:
    running = start_worker(idle_timeout_s=NEVER_S, max_tasks=1)
    running.wait_until_idle()
    _enqueue_book(db, sandbox.url)
    running.thread.join(timeout=30)  # max_tasks=1: the worker ends once it has done the task
    assert not running.thread.is_alive(), "the enqueue's notification did not wake the idle worker"
    assert db.query("SELECT status FROM tasks") == [{"status": "completed"}]


def test_an_idle_worker_claims_a_delayed_task_when_it_comes_due(
    start_worker: Any, db: Database, sandbox: SandboxServer
) -> None:
    running = start_worker(idle_timeout_s=NEVER_S, max_tasks=1)
    running.wait_until_idle()
    _enqueue_book(db, sandbox.url, run_at=1.0)  # its notification comes a second before it can be claimed
    running.thread.join(timeout=30)
    assert not running.thread.is_alive(), "the idle worker slept past the task's run_at"
    assert db.query("SELECT status FROM tasks") == [{"status": "completed"}]


def test_an_idle_worker_stops_on_its_stop_event_without_waiting_out_its_timeout(start_worker: Any) -> None:
    running = start_worker(idle_timeout_s=NEVER_S)
    running.wait_until_idle()
    running.stop()
    running.thread.join(timeout=30)
    assert not running.thread.is_alive()
    assert running.stats and running.stats[0].pages == 0


def test_a_draining_worker_asleep_while_another_finishes_the_last_task_ends_with_it(
    db: Database, database_url: str, sandbox_factory: SandboxFactory
) -> None:
    """The last task ends on another worker and enqueues nothing: the worker that found nothing to claim
    while it ran must learn the queue is drained then, not at its idle timeout (5 s by default: the tail of
    every crawl, about 8% of a browser crawl of the sandbox)."""
    sandbox = sandbox_factory(faults=Faults(latency_s=2.0))
    # Leases far longer than the test: the sleeper's wait ends at the next lease expiry at the latest.
    config = sandbox_config(sandbox.url, concurrency=1, obey_robots=False, lease_s=600.0)
    _enqueue_book(db, sandbox.url)
    holder = _start(Worker(database_url, config))
    assert wait_until(lambda: db.query("SELECT status FROM tasks") == [{"status": "in_progress"}], 30)
    sleeper = Worker(database_url, config)
    sleeper.queue.idle_timeout_s = NEVER_S
    idle = _start(sleeper)
    assert wait_until(lambda: idle.claims >= 1, 30)
    holder.thread.join(timeout=30)
    assert db.query("SELECT status FROM tasks") == [{"status": "completed"}]
    idle.thread.join(timeout=10)
    alive = idle.thread.is_alive()
    if alive:
        idle.stop()
        idle.thread.join(timeout=30)
    assert not alive, "the idle worker slept on after the queue was drained"
    assert idle.stats and idle.stats[0].pages == 0
