"""Nothing waits for ever on a lock: a claimer frozen mid-claim (SIGSTOP) or frozen inside a transaction
delays the other claimers by at most the idle-in-transaction timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from book_assets.db.connection import Database
from book_assets.queue import NewTask, TaskQueue
from book_assets_tests.reliability.conftest import wait_until

pytestmark = pytest.mark.chaos

#: The frozen side's idle-in-transaction timeout, and how long a claim may wait before the test gives up.
IDLE_TIMEOUT_S = 2
GIVE_UP_S = IDLE_TIMEOUT_S + 6

CLAIMER = """
import sys
from book_assets.db.connection import Database
from book_assets.queue import TaskQueue
queue = TaskQueue(Database(sys.argv[1]), task_types=["detail"], default_interval_s=0)
while True:
    queue.complete_many(queue.claim("frozen", 1, task_types=["detail"], scheduled=True).tasks)
"""


def _backlog(db: Database, n: int) -> TaskQueue:
    queue = TaskQueue(db, task_types=["detail"], default_interval_s=0)
    queue.enqueue_many([NewTask("detail", {"url": f"http://books.example/{i}"}, group="AB"[i % 2]) for i in range(n)])
    return queue


def _timed_claim(queue: TaskQueue) -> float:
    """Seconds one scheduled claim took, or infinity if it was still blocked after GIVE_UP_S."""
    took: list[float] = []

    def _claim() -> None:
        started = time.monotonic()
        queue.complete_many(queue.claim("other", 1, task_types=["detail"], scheduled=True).tasks)
        took.append(time.monotonic() - started)

    thread = threading.Thread(target=_claim, daemon=True)
    thread.start()
    thread.join(GIVE_UP_S)
    return took[0] if took else float("inf")


def test_a_claimer_stopped_at_any_moment_never_blocks_the_other_claimers(
    db: Database, database_url: str, tmp_path: Path
) -> None:
    _backlog(db, 20_000)
    env = {**os.environ, "BOOK_PIPELINE_DB_IDLE_IN_TRANSACTION_TIMEOUT_S": str(IDLE_TIMEOUT_S)}
    proc = subprocess.Popen([sys.executable, "-c", CLAIMER, database_url], env=env, cwd=tmp_path)
    other = TaskQueue(Database(database_url), task_types=["detail"], default_interval_s=0)
    waits: list[float] = []
    try:
        assert wait_until(lambda: _completed(db) >= 50, 30)
        for _ in range(30):
            os.kill(proc.pid, signal.SIGSTOP)
            time.sleep(0.02)  # frozen wherever it was: maybe inside a claim, maybe between
            waits.append(_timed_claim(other))
            os.kill(proc.pid, signal.SIGCONT)
            time.sleep(0.03)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait(timeout=30)
        other.db.close()
    assert max(waits) < GIVE_UP_S, sorted(waits)[-5:]


def test_a_client_frozen_inside_a_transaction_loses_its_locks_after_the_idle_timeout(
    db: Database, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = _backlog(db, 100)
    queue.set_group_weights("detail", {"A": 1, "B": 1})
    monkeypatch.setenv("BOOK_PIPELINE_DB_IDLE_IN_TRANSACTION_TIMEOUT_S", str(IDLE_TIMEOUT_S))
    frozen = Database(database_url)
    other = TaskQueue(Database(database_url), task_types=["detail"], default_interval_s=0)
    try:
        with frozen.connection().cursor() as cur:  # a transaction that takes the scope lock, then stalls
            cur.execute("UPDATE queue_scopes SET default_weight = default_weight WHERE scope = 'groups:detail'")
        took = _timed_claim(other)
    finally:
        frozen.close()  # first: a claim still blocked behind it can then finish
    assert wait_until(lambda: _completed(db) == 1, 30)
    other.db.close()
    assert took < GIVE_UP_S


def _completed(db: Database) -> int:
    return int(db.query("SELECT count(*) AS n FROM tasks WHERE status = 'completed'")[0]["n"])
