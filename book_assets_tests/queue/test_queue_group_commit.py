"""Group commit: completions that arrive while one commits go together in the next transaction.

Each ``work`` here returns ``txid_current()``, so a test reads which completions shared a transaction; the
first work holds its transaction open until the others have been submitted.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from book_assets.db.connection import Database
from book_assets.queue import GroupCommit, LeaseLost, NewTask, Task, TaskQueue
from book_assets_tests.queue.helpers import url


def _claimed(queue: TaskQueue, n: int) -> list[Task]:
    queue.enqueue_many(NewTask("detail", {"url": url(i)}) for i in range(n))
    tasks = list(queue.claim("w", n).tasks)
    assert len(tasks) == n
    return tasks


def _effects_table(db: Database) -> None:
    db.query("CREATE TABLE IF NOT EXISTS group_commit_effects (task_id BIGINT PRIMARY KEY)")
    db.query("TRUNCATE group_commit_effects")


def _work(task: Task, *, gate: threading.Event | None = None, fail: bool = False) -> Any:
    def work(cur: Any) -> int:
        cur.execute("INSERT INTO group_commit_effects VALUES (%s) ON CONFLICT DO NOTHING", (task.id,))
        if gate is not None:
            assert gate.wait(10), "the other completions were never submitted"
        if fail:
            raise ValueError(f"work of task {task.id} failed")
        cur.execute("SELECT txid_current() AS txid")
        return int(cur.fetchone()["txid"])

    return work


async def _complete_all(queue: TaskQueue, items: list[tuple[Task, Any]], max_batch: int = 32) -> list[Any]:
    """Submit the first item, then (once its transaction runs) the rest; each outcome or its exception."""
    db_thread = ThreadPoolExecutor(max_workers=1)
    loop = asyncio.get_running_loop()

    async def run(fn: Any, *args: Any) -> Any:
        return await loop.run_in_executor(db_thread, lambda: fn(*args))

    commits = GroupCommit(queue, run, max_batch=max_batch)
    try:
        first = asyncio.ensure_future(commits.complete_with(*items[0]))
        await asyncio.sleep(0.2)  # the first transaction is open, waiting on its gate
        rest = [asyncio.ensure_future(commits.complete_with(task, work)) for task, work in items[1:]]
        await asyncio.sleep(0.05)
        return await asyncio.gather(first, *rest, return_exceptions=True)
    finally:
        db_thread.shutdown()


def _status(db: Database) -> dict[int, str]:
    return {r["id"]: r["status"] for r in db.query("SELECT id, status FROM tasks")}


def _effects(db: Database) -> set[int]:
    return {r["task_id"] for r in db.query("SELECT task_id FROM group_commit_effects")}


def _gated(tasks: list[Task], failing: Task | None = None) -> list[tuple[Task, Any]]:
    """Each task with its work; the first holds its transaction open for 0.4 s, ``failing``'s raises."""
    gate = threading.Event()
    threading.Timer(0.4, gate.set).start()
    return [(tasks[0], _work(tasks[0], gate=gate))] + [(t, _work(t, fail=t is failing)) for t in tasks[1:]]


def _outcome_of_one_bad_task(db: Database, tasks: list[Task], outcomes: list[Any], bad: Task, error: type) -> None:
    """``bad`` failed with ``error`` and stays in progress, untouched; every other task completed its work."""
    index = tasks.index(bad)
    assert isinstance(outcomes[index], error), outcomes
    assert all(isinstance(o, int) for i, o in enumerate(outcomes) if i != index), outcomes
    status = _status(db)
    assert status.pop(bad.id) == "in_progress" and set(status.values()) == {"completed"}
    assert _effects(db) == {t.id for t in tasks} - {bad.id}


def test_completions_that_arrive_while_one_commits_share_the_next_transaction(queue: TaskQueue, db: Database) -> None:
    _effects_table(db)
    tasks = _claimed(queue, 10)
    items = _gated(tasks)
    txids = asyncio.run(_complete_all(queue, items))
    assert all(isinstance(t, int) for t in txids), txids
    assert txids[0] not in txids[1:] and len(set(txids[1:])) == 1, txids
    assert set(_status(db).values()) == {"completed"}
    assert _effects(db) == {t.id for t in tasks}


def test_a_task_whose_lease_is_gone_fails_alone_and_its_work_does_not_run(queue: TaskQueue, db: Database) -> None:
    _effects_table(db)
    tasks = _claimed(queue, 4)
    lost = tasks[2]
    db.query("UPDATE tasks SET lease_token = lease_token + 1000 WHERE id = %(id)s", {"id": lost.id})
    items = _gated(tasks)
    outcomes = asyncio.run(_complete_all(queue, items))
    _outcome_of_one_bad_task(db, tasks, outcomes, lost, LeaseLost)


def test_a_work_that_raises_rolls_back_only_its_own_task(queue: TaskQueue, db: Database) -> None:
    _effects_table(db)
    tasks = _claimed(queue, 4)
    bad = tasks[1]
    outcomes = asyncio.run(_complete_all(queue, _gated(tasks, failing=bad)))
    _outcome_of_one_bad_task(db, tasks, outcomes, bad, ValueError)


def test_a_group_is_at_most_max_batch_completions(queue: TaskQueue, db: Database) -> None:
    _effects_table(db)
    tasks = _claimed(queue, 7)
    items = _gated(tasks)
    txids = asyncio.run(_complete_all(queue, items, max_batch=4))
    assert all(isinstance(t, int) for t in txids), txids
    first, second = txids[1:5], txids[5:]
    assert len(set(first)) == 1 and len(set(second)) == 1 and first[0] != second[0], txids


def test_a_lone_completion_commits_at_once(queue: TaskQueue, db: Database) -> None:
    _effects_table(db)
    (task,) = _claimed(queue, 1)

    async def main() -> Any:
        db_thread = ThreadPoolExecutor(max_workers=1)
        loop = asyncio.get_running_loop()

        async def run(fn: Any, *args: Any) -> Any:
            return await loop.run_in_executor(db_thread, lambda: fn(*args))

        try:
            return await asyncio.wait_for(GroupCommit(queue, run).complete_with(task, _work(task)), 10)
        finally:
            db_thread.shutdown()

    assert isinstance(asyncio.run(main()), int)
    assert _status(db) == {task.id: "completed"}


def test_a_lingering_completion_shares_its_transaction_with_those_that_come_meanwhile(
    queue: TaskQueue, db: Database
) -> None:
    """The worker's ``linger`` lets a group's first completion wait for the next ones; a full group ends the wait
    (the linger here, 30 s, is far beyond the test's own timeout)."""
    _effects_table(db)
    tasks = _claimed(queue, 3)

    async def main() -> list[Any]:
        db_thread = ThreadPoolExecutor(max_workers=1)
        loop = asyncio.get_running_loop()

        async def run(fn: Any, *args: Any) -> Any:
            return await loop.run_in_executor(db_thread, lambda: fn(*args))

        commits = GroupCommit(queue, run, max_batch=3, linger=lambda: 30.0)
        try:
            first = asyncio.ensure_future(commits.complete_with(tasks[0], _work(tasks[0])))
            await asyncio.sleep(0.2)  # the first completion waits; nothing is committed yet
            assert _status(db) == {t.id: "in_progress" for t in tasks}
            rest = [asyncio.ensure_future(commits.complete_with(t, _work(t))) for t in tasks[1:]]
            return await asyncio.wait_for(asyncio.gather(first, *rest), 10)
        finally:
            db_thread.shutdown()

    txids = asyncio.run(main())
    assert len(set(txids)) == 1, txids
    assert set(_status(db).values()) == {"completed"}
