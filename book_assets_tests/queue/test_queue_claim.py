"""Claim, leases and fencing, retries and the dead letter, requeue, release, stats and pruning."""

from __future__ import annotations

import functools

import pytest

from book_assets.db.connection import Database
from book_assets.queue import Backoff, LeaseLost, NewTask, TaskQueue
from book_assets_tests.queue.helpers import complete, make_queue, url


def test_claim_hands_out_highest_priority_first_then_oldest(queue: TaskQueue) -> None:
    queue.enqueue_many(
        [
            NewTask("detail", {"url": url("old-low")}, priority=0),
            NewTask("detail", {"url": url("high")}, priority=9),
            NewTask("detail", {"url": url("mid-old")}, priority=5),
            NewTask("detail", {"url": url("mid-new")}, priority=5),
            NewTask("detail", {"url": url("new-low")}, priority=0),
        ]
    )
    claimed = [queue.claim("w").tasks[0].url for _ in range(5)]
    assert claimed == [url(u) for u in ("high", "mid-old", "mid-new", "old-low", "new-low")]


def test_claim_takes_a_lease_with_attempt_worker_and_token(queue: TaskQueue, db: Database) -> None:
    queue.enqueue("detail", {"url": url(1)})
    (task,) = queue.claim("worker-7").tasks
    assert task.attempt == 1
    row = db.query("SELECT status, worker_id, lease_token, lease_expires_at > now() AS live FROM tasks")[0]
    assert row == {"status": "in_progress", "worker_id": "worker-7", "lease_token": task.lease_token, "live": True}


def test_claim_is_limited_to_n_and_never_hands_out_a_task_twice(queue: TaskQueue) -> None:
    queue.enqueue_many(NewTask("detail", {"url": url(i)}) for i in range(10))
    first, second, third = queue.claim("a", 4), queue.claim("b", 4), queue.claim("c", 4)
    ids = [t.id for r in (first, second, third) for t in r.tasks]
    assert [len(first), len(second), len(third)] == [4, 4, 2]
    assert len(set(ids)) == 10


def test_claim_filters_by_task_type(queue: TaskQueue) -> None:
    queue.enqueue("detail", {"url": url(1)}, priority=9)
    queue.enqueue("listing", {"url": url(2)})
    assert [t.task_type for t in queue.claim("w", 5, task_types=["listing"]).tasks] == ["listing"]


def test_claim_with_unknown_type_or_bad_n_is_rejected(queue: TaskQueue) -> None:
    with pytest.raises(ValueError, match="unknown task type"):
        queue.claim("w", task_types=["reviews"])
    with pytest.raises(ValueError, match="n must be"):
        queue.claim("w", 0)


def expire_leases(db: Database) -> None:
    """Let every lease run out now (times are set in SQL, never slept for: the suite runs on busy machines)."""
    db.query("UPDATE tasks SET lease_expires_at = now() - interval '1 second' WHERE status = 'in_progress'")


def test_expired_lease_is_reclaimed_by_next_claim(db: Database) -> None:
    queue = make_queue(db, lease_s=30)
    queue.enqueue("detail", {"url": url(1)})
    (lost,) = queue.claim("dead-worker").tasks
    assert not queue.claim("other")
    expire_leases(db)
    (task,) = queue.claim("other").tasks
    assert task.id == lost.id and task.attempt == 2 and task.lease_token != lost.lease_token


def test_late_complete_of_a_reclaimed_task_is_refused(db: Database) -> None:
    queue = make_queue(db, lease_s=30)
    queue.enqueue("detail", {"url": url(1)})
    (stale,) = queue.claim("slow").tasks
    expire_leases(db)
    (fresh,) = queue.claim("fast").tasks
    # One signal for a lost lease, whatever the caller tried; the new holder's task is untouched.
    for late in (functools.partial(complete, queue), queue.heartbeat, lambda t: queue.fail(t, "late", retryable=True)):
        with pytest.raises(LeaseLost):
            late(stale)
    complete(queue, fresh)


def test_heartbeat_keeps_the_lease_alive(db: Database) -> None:
    queue = make_queue(db, lease_s=30)
    queue.enqueue("detail", {"url": url(1)})
    (task,) = queue.claim("w").tasks
    db.query("UPDATE tasks SET lease_expires_at = now() + interval '1 second'")  # about to run out
    queue.heartbeat(task)
    left = db.query("SELECT extract(epoch FROM lease_expires_at - now()) AS s FROM tasks")[0]["s"]
    assert left > 25  # extended to a whole lease again
    assert not queue.claim("thief")
    complete(queue, task)


def test_one_heartbeat_extends_every_lease_still_held_and_names_the_ones_gone(db: Database) -> None:
    queue = make_queue(db, lease_s=30)
    queue.enqueue_many([NewTask("detail", {"url": url(i)}) for i in range(4)])
    tasks = queue.claim("w", 4).tasks
    stolen = tasks[0]
    db.query("UPDATE tasks SET lease_expires_at = now() - interval '1 second' WHERE id = %s", (stolen.id,))
    (thief,) = queue.claim("thief").tasks
    db.query("UPDATE tasks SET lease_expires_at = now() + interval '1 second'")  # every lease about to run out
    assert queue.heartbeat_all(tasks) == {stolen.id}
    left = {
        r["id"]: r["s"] for r in db.query("SELECT id, extract(epoch FROM lease_expires_at - now()) AS s FROM tasks")
    }
    assert all(left[t.id] > 25 for t in tasks[1:]), left  # extended to a whole lease again
    assert left[thief.id] < 2, left  # the thief's lease is its own: the old token extends nothing
    assert queue.heartbeat_all([]) == set()


def test_a_heartbeat_never_shortens_a_lease(db: Database) -> None:
    queue = make_queue(db, lease_s=30)
    queue.enqueue("detail", {"url": url(1)})
    (task,) = queue.claim("w").tasks
    db.query("UPDATE tasks SET lease_expires_at = now() + interval '1 hour'")
    queue.heartbeat(task, extend_s=5)
    left = db.query("SELECT extract(epoch FROM lease_expires_at - now()) AS s FROM tasks")[0]["s"]
    assert left > 3000


def test_completing_twice_under_one_lease_changes_nothing_the_second_time(queue: TaskQueue, db: Database) -> None:
    # A replay after a lost acknowledgement must report the completion, not a lost lease.
    queue.enqueue("detail", {"url": url(1)})
    (task,) = queue.claim("w").tasks
    complete(queue, task)
    first = db.query("SELECT status, completed_at FROM tasks")[0]
    complete(queue, task)
    assert db.query("SELECT status, completed_at FROM tasks")[0] == first


def test_a_completed_task_cannot_be_completed_by_an_older_lease(db: Database) -> None:
    short = make_queue(db, lease_s=0.2)
    short.enqueue("detail", {"url": url(1)})
    (old,) = short.claim("slow").tasks
    db.query("UPDATE tasks SET lease_expires_at = now() - interval '1 second'")
    (new,) = short.claim("fast").tasks
    complete(short, new)
    with pytest.raises(LeaseLost):
        complete(short, old)
    with pytest.raises(LeaseLost):
        short.fail(old, "late", retryable=True)
    assert db.query("SELECT status FROM tasks")[0]["status"] == "completed"


def test_complete_many_counts_only_tasks_still_held(db: Database) -> None:
    queue = make_queue(db, lease_s=30)
    queue.enqueue_many(NewTask("detail", {"url": url(i)}) for i in range(3))
    expiring = queue.claim("a", 2).tasks
    held = queue.claim("b", 1).tasks
    db.query("UPDATE tasks SET lease_expires_at = now() - interval '1 second' WHERE worker_id = 'a'")
    reclaimed = queue.claim("c", 1).tasks  # reclaims both expired leases, takes one
    assert reclaimed[0].id in {t.id for t in expiring}
    assert queue.complete_many([*expiring, *held]) == 1
    assert queue.complete_many(reclaimed) == 1


def test_retryable_failure_backs_off_then_dead_letters_after_max_attempts(db: Database) -> None:
    queue = make_queue(db, backoff=Backoff(base_s=60, max_s=60, jitter="none"))
    queue.enqueue("detail", {"url": url(1)}, max_attempts=3)
    outcomes = []
    for _ in range(3):
        (task,) = queue.claim("w").tasks
        outcomes.append(queue.fail(task, f"HTTP 503 on attempt {task.attempt}", retryable=True))
        assert not queue.claim("w"), "a retry must wait for its backoff"
        wait = db.query("SELECT extract(epoch FROM run_at - now()) AS s FROM tasks WHERE status = 'pending'")
        assert not wait or 55 < wait[0]["s"] <= 60  # the backoff, counted from the failure
        db.query("UPDATE tasks SET run_at = now() WHERE status = 'pending'")  # the backoff has passed
    assert outcomes == ["retry", "retry", "dead"]
    row = db.query("SELECT status, attempts, error FROM tasks")[0]
    assert row == {"status": "failed", "attempts": 3, "error": "HTTP 503 on attempt 3"}
    assert queue.stats().top_failures == [("HTTP 503 on attempt 3", 1)]


def test_permanent_failure_fails_at_once(queue: TaskQueue, db: Database) -> None:
    queue.enqueue("detail", {"url": url(1)})
    (task,) = queue.claim("w").tasks
    assert queue.fail(task, "HTTP 404", retryable=False) == "dead"
    assert db.query("SELECT status, attempts FROM tasks")[0] == {"status": "failed", "attempts": 1}


def test_task_whose_leases_keep_expiring_is_dead_lettered(db: Database) -> None:
    queue = make_queue(db, lease_s=30)
    queue.enqueue("detail", {"url": url(1)}, max_attempts=2)
    for _ in range(2):
        assert queue.claim("crashy")
        expire_leases(db)
    assert not queue.claim("w")
    row = db.query("SELECT status, attempts, error FROM tasks")[0]
    assert (row["status"], row["attempts"]) == ("failed", 2) and "lease expired" in row["error"]


def test_requeue_moves_matching_failed_tasks_back_with_attempts_reset(queue: TaskQueue, db: Database) -> None:
    queue.enqueue_many(NewTask("detail", {"url": url(i)}) for i in range(3))
    queue.enqueue("listing", {"url": url("l")})
    for task in queue.claim("w", 4).tasks:
        queue.fail(task, "HTTP 500" if task.task_type == "detail" else "timeout", retryable=False)
    assert queue.requeue(task_type="detail", error_like="HTTP 5%") == 3
    assert queue.requeue(task_type="detail") == 0
    rows = db.query("SELECT task_type, status, attempts FROM tasks ORDER BY id")
    assert [(r["status"], r["attempts"]) for r in rows if r["task_type"] == "detail"] == [("pending", 0)] * 3
    assert [r["status"] for r in rows if r["task_type"] == "listing"] == ["failed"]


def test_requeue_skips_a_failed_task_whose_url_is_live_again(queue: TaskQueue, db: Database) -> None:
    queue.enqueue("detail", {"url": url(1)})
    queue.fail(queue.claim("w").tasks[0], "boom", retryable=False)
    assert queue.enqueue("detail", {"url": url(1)}).created
    assert queue.requeue() == 0
    assert db.query("SELECT status FROM tasks ORDER BY id") == [{"status": "failed"}, {"status": "pending"}]


def test_release_gives_tasks_back_without_counting_the_attempt(queue: TaskQueue) -> None:
    queue.enqueue("detail", {"url": url(1)})
    (task,) = queue.claim("w").tasks
    assert queue.release([task]) == 1
    (again,) = queue.claim("w").tasks
    assert again.id == task.id and again.attempt == 1
    assert queue.release([task]) == 0  # old lease: fenced


def test_stats_count_by_type_and_status_and_measure_throughput(queue: TaskQueue) -> None:
    queue.enqueue_many(NewTask("detail", {"url": url(i)}) for i in range(4))
    queue.enqueue("listing", {"url": url("l")})
    tasks = queue.claim("w", 3, task_types=["detail"]).tasks
    queue.complete_many(tasks[:2])
    stats = queue.stats()
    assert stats.counts == {"detail": {"completed": 2, "in_progress": 1, "pending": 1}, "listing": {"pending": 1}}
    assert stats.completed_last_minute == 2
    assert stats.oldest_pending_s is not None and stats.oldest_pending_s >= 0


def test_prune_deletes_old_finished_tasks_only(queue: TaskQueue, db: Database) -> None:
    queue.enqueue_many(NewTask("detail", {"url": url(i)}) for i in range(3))
    queue.complete_many(queue.claim("w", 2).tasks)
    db.query("UPDATE tasks SET completed_at = now() - interval '2 hours' WHERE id = 1")
    assert queue.prune(3600) == 1
    assert db.query("SELECT id, status FROM tasks ORDER BY id") == [
        {"id": 2, "status": "completed"},
        {"id": 3, "status": "pending"},
    ]
    assert queue.prune(0) == 1
    assert db.query("SELECT status FROM tasks") == [{"status": "pending"}]


def test_prune_takes_finished_tasks_in_short_batches_and_never_live_ones(queue: TaskQueue, db: Database) -> None:
    queue.enqueue_many(NewTask("detail", {"url": url(i)}) for i in range(14))
    done, dead, leased = queue.claim("w", 7).tasks, queue.claim("w", 4).tasks, queue.claim("w", 2).tasks
    queue.complete_many(done)
    for task in dead:
        queue.fail(task, "http_404: gone", kind="http_404", retryable=False)
    db.query("UPDATE tasks SET completed_at = now() - interval '3 days', started_at = now() - interval '3 days'")
    db.query("UPDATE tasks SET lease_expires_at = now() + interval '1 hour' WHERE status = 'in_progress'")
    assert [t.id for t in leased] and queue.prune(86400, batch=2) == 7 + 4
    left = db.query("SELECT status, count(*) AS n FROM tasks GROUP BY status ORDER BY status")
    assert left == [{"status": "in_progress", "n": 2}, {"status": "pending", "n": 1}]


def test_queue_rejects_bad_construction_arguments(db: Database) -> None:
    with pytest.raises(ValueError, match="task_types"):
        TaskQueue(db, task_types=[])
    with pytest.raises(ValueError, match="lease_s"):
        TaskQueue(db, task_types=["detail"], lease_s=0)
    with pytest.raises(ValueError, match="default_interval_s"):
        TaskQueue(db, task_types=["detail"], default_interval_s=-1)
