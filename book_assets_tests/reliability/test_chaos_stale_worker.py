"""A worker that lost its lease writes nothing: not after a stall past the lease, not after a refused heartbeat."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from typing import Any

import pytest

from book_assets.crawl.config import DETAIL, DETAIL_PRIORITY, make_queue
from book_assets.crawl.pipeline import prepare
from book_assets.crawl.stats import WorkerStats
from book_assets.crawl.worker import Worker
from book_assets.db.connection import Database
from book_assets.sandbox.catalogue import Catalogue
from book_assets.sandbox.faults import Faults
from book_assets_tests.crawl.conftest import sandbox_config
from book_assets_tests.reliability.conftest import wait_until, worker_env

pytestmark = pytest.mark.chaos

DAY0 = Catalogue(seed=0, day=0).ground_truth()
DAY1 = Catalogue(seed=0, day=1).ground_truth()
#: A book whose price or stock changes between day 0 and day 1.
CHANGED = sorted(p for p in DAY0 if p in DAY1 and DAY0[p] != DAY1[p])[0]


def _enqueue_one(db: Database, base_url: str) -> None:
    config = sandbox_config(base_url, mode="http")
    prepare(db, config)
    make_queue(db, config).enqueue(
        DETAIL, {"url": base_url + CHANGED, "category": DAY0[CHANGED].category}, priority=DETAIL_PRIORITY
    )


def test_a_worker_stopped_past_its_lease_stores_nothing_over_the_newer_fetch(
    db: Database, database_url: str, sandbox_factory: Any, spawn_worker: Any
) -> None:
    site = sandbox_factory(faults=Faults(latency_s=1.0))
    _enqueue_one(db, site.url)
    env = worker_env(database_url, site.url, lease_s=2, concurrency=1)

    stale = spawn_worker(env)
    assert wait_until(lambda: site.stats().hits.get(CHANGED, 0) == 1, 30)
    os.kill(stale.pid, signal.SIGSTOP)  # stalled with the day-0 page on its way
    try:
        assert wait_until(lambda: _lease_expired(db), 30)
        site.set_day(1)
        fresh = spawn_worker(env)
        assert wait_until(lambda: _status(db) == "completed", 60)
        fresh.send_signal(signal.SIGTERM)
        assert fresh.wait(timeout=30) == 0
    finally:
        os.kill(stale.pid, signal.SIGCONT)
    stale.send_signal(signal.SIGTERM)
    assert stale.wait(timeout=30) == 0

    book = db.query("SELECT price_amount, stock, version FROM books")
    assert book == [{"price_amount": DAY1[CHANGED].price, "stock": DAY1[CHANGED].stock, "version": 1}]
    assert db.query("SELECT count(*) AS n FROM book_versions")[0]["n"] == 1


def test_a_worker_whose_heartbeat_is_refused_abandons_the_task(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    site = sandbox_factory(faults=Faults(latency_s=4.0))
    _enqueue_one(db, site.url)
    worker = Worker(database_url, sandbox_config(site.url, mode="http", lease_s=3.0), max_tasks=1)
    stats: list[WorkerStats] = []
    thread = threading.Thread(target=lambda: stats.append(asyncio.run(worker.run())))
    thread.start()
    try:
        assert wait_until(lambda: site.stats().hits.get(CHANGED, 0) == 1, 30)
        # Another worker took the task over (its lease has a new token).
        db.query("UPDATE tasks SET lease_token = nextval('tasks_lease_token_seq') WHERE status = 'in_progress'")
    finally:
        thread.join(timeout=60)
    assert not thread.is_alive()
    assert stats[0].lost_leases == 1
    assert db.query("SELECT count(*) AS n FROM books")[0]["n"] == 0
    assert _status(db) == "in_progress"  # untouched: the new holder finishes it


def _lease_expired(db: Database) -> bool:
    return bool(db.query("SELECT lease_expires_at < now() AS expired FROM tasks")[0]["expired"])


def _status(db: Database) -> str:
    return str(db.query("SELECT status FROM tasks")[0]["status"])
