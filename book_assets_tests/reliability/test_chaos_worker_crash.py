"""Workers SIGKILLed mid-crawl: their leases expire and are reclaimed, and the crawl still ends exact."""

from __future__ import annotations

import random
import signal
import socket
import time
from typing import Any

import pytest

from book_assets.crawl.pipeline import prepare, seed
from book_assets.db.connection import Database
from book_assets.sandbox import Faults
from book_assets.store.books import book_counts
from book_assets_tests.crawl.conftest import sandbox_config, stored_vs_truth
from book_assets_tests.reliability.conftest import drained, task_counts, wait_until, worker_env

pytestmark = pytest.mark.chaos

LEASE_S = 3.0


def _held_by(db: Database, worker_id: str) -> int:
    rows = db.query("SELECT count(*) AS n FROM tasks WHERE status = 'in_progress' AND worker_id = %s", (worker_id,))
    return int(rows[0]["n"])


def _connected(db: Database, proc: Any) -> bool:
    """Whether a worker process is up: its connection (named after its worker id) is open on our database."""
    name = f"book-pipeline worker {socket.gethostname()}:{proc.pid}"
    rows = db.query(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s",
        (name,),
    )
    return int(rows[0]["n"]) > 0


def test_three_sigkilled_workers_lose_no_task_and_store_no_book_twice(
    db: Database, database_url: str, sandbox_factory: Any, spawn_worker: Any
) -> None:
    # Pages take ~0.3 s each, so the crawl outlasts three kills even on a fast, idle machine (about 40 s).
    sandbox = sandbox_factory(faults=Faults(latency_s=0.25, jitter_s=0.1))
    config = sandbox_config(sandbox.url, lease_s=LEASE_S)
    prepare(db, config)
    seed(db, config)
    env = worker_env(database_url, sandbox.url, lease_s=LEASE_S, concurrency=4)
    workers = [spawn_worker(env) for _ in range(2)]
    rng = random.Random(8)
    reclaim_s: list[float] = []
    held_at_kill: list[int] = []
    started = time.monotonic()

    for _ in range(3):
        # A random moment, but while there is still work (the first kill waits for the first stored book).
        assert wait_until(lambda: book_counts(db)["total"] > 0, 30)
        # Replacements must be up (a loaded machine takes seconds to import), or nobody is left to reclaim.
        assert wait_until(lambda: all(_connected(db, w) for w in workers), 60), "a worker never connected"
        time.sleep(rng.uniform(0.5, 2.5))
        assert not drained(db), "the crawl finished before all three kills; slow it down"
        victim = workers.pop(rng.randrange(len(workers)))
        victim_id = f"{socket.gethostname()}:{victim.pid}"
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        killed_at = time.monotonic()
        held_at_kill.append(_held_by(db, victim_id))
        # Every lease it held runs out within LEASE_S of now (heartbeats never extend beyond that).
        late = db.query(
            "SELECT count(*) AS n FROM tasks WHERE status = 'in_progress' AND worker_id = %s "
            "AND lease_expires_at > clock_timestamp() + make_interval(secs => %s)",
            (victim_id, LEASE_S),
        )
        assert int(late[0]["n"]) == 0
        workers.append(spawn_worker(env))
        # A live worker's next claim takes the expired tasks over (slack: claim rounds on a loaded machine).

        def reclaimed(worker_id: str = victim_id) -> bool:
            return _held_by(db, worker_id) == 0

        assert wait_until(reclaimed, LEASE_S + 10), (
            victim_id,
            db.query(
                "SELECT id, task_type, attempts, lease_expires_at, clock_timestamp() AS now FROM tasks "
                "WHERE status = 'in_progress' AND worker_id = %s",
                (victim_id,),
            ),
            task_counts(db),
            [w.poll() for w in workers],
        )
        reclaim_s.append(time.monotonic() - killed_at)

    assert wait_until(lambda: drained(db) and book_counts(db)["total"] >= 1000, 120), task_counts(db)
    elapsed = time.monotonic() - started
    for proc in workers:
        proc.terminate()
    for proc in workers:
        assert proc.wait(timeout=20) == 0

    counts = task_counts(db)
    assert counts.get("failed", 0) == 0 and counts.get("pending", 0) == 0 and counts.get("in_progress", 0) == 0
    c = book_counts(db)
    assert (c["total"], c["unique_urls"], c["with_html"], c["versions"]) == (1000, 1000, 1000, 1000)
    rows = db.query("SELECT * FROM books ORDER BY id")
    assert stored_vs_truth(rows, sandbox.catalogue.ground_truth(), sandbox.url) == []
    assert sum(held_at_kill) > 0, "no kill hit a worker holding tasks: the test proved nothing"
    assert max(reclaim_s) <= LEASE_S + 10
    print(f"\nkills held {held_at_kill} tasks; reclaimed after {[round(s, 1) for s in reclaim_s]}s; {elapsed:.1f}s")
