"""Concurrency across real OS processes: no task lost or doubled; a killed worker's tasks come back."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import pytest

from book_assets.db.connection import Database
from book_assets.queue import NewTask, Task, TaskQueue
from book_assets_tests.queue.helpers import claim_and_hang, drain_worker, make_queue, url

SPAWN = multiprocessing.get_context("spawn")


@pytest.mark.slow
def test_eight_processes_complete_ten_thousand_tasks_exactly_once(
    queue: TaskQueue, db: Database, database_url: str
) -> None:
    created = queue.enqueue_many(NewTask("detail", {"url": url(i)}) for i in range(10_000))
    assert all(r.created for r in created)
    with SPAWN.Pool(8) as pool:
        results = pool.starmap(drain_worker, [(database_url, f"w{i}", 25) for i in range(8)])
    claimed = [task_id for ids, _ in results for task_id in ids]
    assert len(claimed) == 10_000, "a task was handed out twice or lost"
    assert set(claimed) == {r.id for r in created}
    assert sum(applied for _, applied in results) == 10_000
    assert sum(1 for ids, _ in results if ids) >= 2, "the work was not shared"
    row = db.query(
        "SELECT count(*) AS n, min(attempts) AS lo, max(attempts) AS hi FROM tasks WHERE status = 'completed'"
    )
    assert row[0] == {"n": 10_000, "lo": 1, "hi": 1}


@pytest.mark.slow
def test_sigkilled_worker_tasks_are_completed_by_others_and_its_late_complete_refused(
    db: Database, database_url: str
) -> None:
    queue = make_queue(db, lease_s=30)
    queue.enqueue_many(NewTask("detail", {"url": url(i)}) for i in range(20))
    parent_end, child_end = SPAWN.Pipe()
    doomed = SPAWN.Process(target=claim_and_hang, args=(database_url, 5, 1.0, child_end))
    doomed.start()
    try:
        assert parent_end.poll(30), "the doomed worker never claimed"
        held = dict(parent_end.recv())
        assert len(held) == 5
    finally:
        os.kill(doomed.pid, signal.SIGKILL)  # type: ignore[arg-type]
        doomed.join(10)
    assert doomed.exitcode == -signal.SIGKILL

    # Others drain the queue; the killed worker's tasks come back once its 1 s leases expire.
    survivors: list[int] = []
    deadline = time.monotonic() + 20
    while len(survivors) < 20 and time.monotonic() < deadline:
        result = queue.claim("survivor", 10)
        if not result.tasks:
            time.sleep(0.1)
            continue
        queue.complete_many(result.tasks)
        survivors.extend(t.id for t in result.tasks)
    assert sorted(survivors) == sorted(r["id"] for r in db.query("SELECT id FROM tasks"))

    attempts = {r["id"]: r["attempts"] for r in db.query("SELECT id, attempts FROM tasks WHERE status = 'completed'")}
    assert len(attempts) == 20
    assert {attempts[i] for i in held} == {2}, "the killed attempt counts"
    assert {a for i, a in attempts.items() if i not in held} == {1}

    # The dead worker's lease tokens are fenced: its late completes are refused.
    refused = db.query(
        "SELECT count(*) AS n FROM tasks WHERE id = ANY(%s) AND lease_token = ANY(%s)",
        (list(held), list(held.values())),
    )
    assert refused == [{"n": 0}]
    stale = [
        Task(i, "detail", {"url": "u"}, 0, "books.example", None, 1, 5, token, None, None)  # type: ignore[arg-type]
        for i, token in held.items()
    ]
    assert queue.complete_many(stale) == 0
