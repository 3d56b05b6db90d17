"""A commit whose acknowledgement is lost (the connection drops right after the server committed) is retried
by the client: the retry must not apply the work twice. A proxy between the queue and PostgreSQL loses it."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from book_assets.db.connection import Database
from book_assets.queue import NewTask, TaskQueue
from book_assets_tests.pgproxy import PgProxy
from book_assets_tests.reliability.conftest import wait_until

pytestmark = pytest.mark.chaos


def _queue(db: Database, **kwargs: Any) -> TaskQueue:
    return TaskQueue(db, task_types=["detail"], default_interval_s=0, **kwargs)


def test_a_claim_whose_acknowledgement_is_lost_is_replayed_and_leases_nothing_twice(
    db: Database, database_url: str
) -> None:
    tasks = [NewTask("detail", {"url": f"http://books.example/{i}"}, max_attempts=1) for i in range(10)]
    _queue(db).enqueue_many(tasks)
    with PgProxy(database_url, pattern="queue_claim", drops=1) as proxy:
        proxied = Database(proxy.url)
        result = _queue(proxied, max_attempts=1).claim("w1", 4)
        proxied.close()
    assert proxy.dropped == 1
    leased = db.query("SELECT id, lease_token, attempts FROM tasks WHERE status = 'in_progress' ORDER BY id")
    assert sorted((t.id, t.lease_token) for t in result.tasks) == [(r["id"], r["lease_token"]) for r in leased]
    assert len(leased) == 4 and {r["attempts"] for r in leased} == {1}

    # Nothing was orphaned: with max_attempts 1, an orphaned lease would be dead-lettered untried.
    queue = _queue(db, max_attempts=1)
    assert queue.complete_many(result.tasks) == 4
    db.query("UPDATE tasks SET lease_expires_at = now() - interval '1 second' WHERE status = 'in_progress'")
    rest = queue.claim("w2", 10)
    assert len(rest.tasks) == 6
    assert db.query("SELECT count(*) AS n FROM tasks WHERE status = 'failed'")[0]["n"] == 0


def test_a_budget_grant_replayed_after_a_lost_acknowledgement_does_not_grant_spent_budget_again(
    db: Database, database_url: str
) -> None:
    queue = _queue(db)
    queue.enqueue_many([NewTask("detail", {"url": f"http://books.example/{i}"}, group="A") for i in range(10)])
    grant_sql = "INSERT INTO queue_members AS m (scope, member, budget"  # set_scope_budgets, old and new
    with PgProxy(database_url, pattern=grant_sql, drops=1, hold_reconnect=True) as proxy:
        proxied = Database(proxy.url)
        grant = threading.Thread(target=lambda: _queue(proxied).set_group_budgets("detail", {"A": 3}))
        grant.start()
        assert wait_until(lambda: proxy.dropped == 1, 30)
        # The grant committed; its client does not know yet. Meanwhile two tasks are claimed and done.
        spent = queue.claim("w", 2, task_types=["detail"], scheduled=True).tasks
        assert len(spent) == 2 and queue.complete_many(spent) == 2
        proxy.release()
        grant.join(timeout=60)
        proxied.close()
    assert not grant.is_alive()
    more = queue.claim("w", 10, task_types=["detail"], scheduled=True).tasks
    assert len(spent) + len(more) == 3
