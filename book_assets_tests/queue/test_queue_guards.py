"""Every finishing call is fenced twice: by the lease token and by the task's status. A call made under a
lease that already ended — completed, failed or released — changes nothing (these are the status guards a
replayed or buggy call would get past if either fence were missing)."""

from __future__ import annotations

from typing import Any

import pytest

from book_assets.db.connection import Database
from book_assets.queue import LeaseLost, Task, TaskQueue
from book_assets_tests.queue.helpers import complete, make_queue, url


def _one(queue: TaskQueue) -> Task:
    queue.enqueue("detail", {"url": url(1)})
    (task,) = queue.claim("w").tasks
    return task


def _row(db: Database) -> dict[str, object]:
    return db.query("SELECT status, attempts, error, run_at, completed_at FROM tasks")[0]


def test_a_fail_after_the_same_lease_completed_the_task_changes_nothing(db: Database) -> None:
    queue = make_queue(db)
    task = _one(queue)
    complete(queue, task)
    before = _row(db)
    with pytest.raises(LeaseLost):
        queue.fail(task, "late", kind="timeout", retryable=True)
    assert _row(db) == before and before["status"] == "completed"


def test_a_lease_that_failed_cannot_complete_the_task_it_gave_back(db: Database) -> None:
    queue = make_queue(db)
    task = _one(queue)
    assert queue.fail(task, "503", kind="http_5xx", retryable=True) == "retry"
    before = _row(db)
    with pytest.raises(LeaseLost):
        complete(queue, task)
    assert _row(db) == before and before["status"] == "pending"


def test_a_replayed_fail_reports_the_recorded_outcome_and_changes_nothing(db: Database) -> None:
    queue = make_queue(db)
    task = _one(queue)
    assert queue.fail(task, "gone", kind="http_404", retryable=False) == "dead"
    before = _row(db)
    assert queue.fail(task, "gone", kind="http_404", retryable=False) == "dead"
    assert _row(db) == before


def test_a_heartbeat_after_the_lease_ended_is_refused(db: Database) -> None:
    queue = make_queue(db)
    task = _one(queue)
    assert queue.fail(task, "503", kind="http_5xx", retryable=True) == "retry"
    with pytest.raises(LeaseLost):
        queue.heartbeat(task)
    assert db.query("SELECT lease_expires_at FROM tasks")[0]["lease_expires_at"] is None


def test_a_release_after_the_lease_completed_the_task_changes_nothing(db: Database) -> None:
    queue = make_queue(db)
    task = _one(queue)
    complete(queue, task)
    before = _row(db)
    assert queue.release([task]) == 0
    assert _row(db) == before


def test_store_and_complete_under_a_lease_that_ended_writes_nothing(db: Database) -> None:
    queue = make_queue(db)
    task = _one(queue)
    assert queue.fail(task, "503", kind="http_5xx", retryable=True) == "retry"
    wrote: list[bool] = []

    def work(cur: object) -> None:
        wrote.append(True)

    with pytest.raises(LeaseLost):
        queue.complete_with(task, work)
    assert wrote == [] and _row(db)["status"] == "pending"


def test_a_store_that_raises_leaves_the_task_uncompleted_under_its_lease(db: Database) -> None:
    queue = make_queue(db)
    task = _one(queue)

    def work(cur: Any) -> None:
        cur.execute("SELECT 1")
        raise ValueError("the page did not store")

    with pytest.raises(ValueError):
        queue.complete_with(task, work)
    row = db.query("SELECT status, lease_token, completed_at FROM tasks")[0]
    assert row == {"status": "in_progress", "lease_token": task.lease_token, "completed_at": None}
    assert queue.complete_with(task, lambda cur: "stored") == "stored"
    assert _row(db)["status"] == "completed"


def test_a_fail_from_an_older_lease_leaves_the_new_holders_task_alone(db: Database) -> None:
    queue = make_queue(db)
    old = _one(queue)
    db.query("UPDATE tasks SET lease_expires_at = now() - interval '1 second'")
    (new,) = queue.claim("w2").tasks
    with pytest.raises(LeaseLost):
        queue.fail(old, "late", kind="timeout", retryable=True)
    row = db.query("SELECT status, lease_token, error FROM tasks")[0]
    assert row == {"status": "in_progress", "lease_token": new.lease_token, "error": None}


def test_a_fail_runs_its_work_in_its_transaction_and_a_lost_lease_runs_none(db: Database) -> None:
    db.query("CREATE TABLE kept (task_id bigint)")
    queue = make_queue(db)
    task = _one(queue)

    def keep(cur: Any) -> None:
        cur.execute("INSERT INTO kept VALUES (%s)", (task.id,))

    assert queue.fail(task, "missing rating", kind="missing_field", retryable=False, work=keep) == "dead"
    complete_task = _one(queue)
    complete(queue, complete_task)
    with pytest.raises(LeaseLost):
        queue.fail(complete_task, "late", kind="missing_field", retryable=False, work=keep)
    assert db.query("SELECT task_id FROM kept") == [{"task_id": task.id}]

    def broken(cur: Any) -> None:
        raise RuntimeError("the work failed")

    third = _one(queue)
    with pytest.raises(RuntimeError):
        queue.fail(third, "x", kind="missing_field", retryable=False, work=broken)
    assert db.query("SELECT status FROM tasks WHERE id = %s", (third.id,)) == [{"status": "in_progress"}]
