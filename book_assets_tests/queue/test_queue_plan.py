"""Query-plan regression: with 100,000 pending tasks the claim reads indexes, never the whole table.

The claim runs inside the plpgsql function ``queue_claim_v3``, whose inner plans EXPLAIN cannot show, so the
test reads PostgreSQL's own counters (pg_stat_user_tables / pg_stat_user_indexes) around real claims:
no sequential scan of ``tasks`` may happen, and the pending-task indexes must be used. The counters sum every
session's scans of the database, so these tests run in a database of their own (``plan_url``), and a count
fails if another session is connected to it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from book_assets.db.connection import Database
from book_assets.queue import NewTask, TaskQueue
from book_assets_tests.conftest import migrated_database, truncate_all
from book_assets_tests.queue.helpers import make_queue, url

PENDING = 100_000


@pytest.fixture(scope="module")
def plan_url() -> Iterator[str]:
    """A migrated database only this module's tests connect to."""
    with migrated_database("_plan") as url:
        yield url


@pytest.fixture
def db(plan_url: str) -> Iterator[Database]:
    """This module's database, every table empty (the suite's ``db``, in the module's own database)."""
    with Database(plan_url, application_name="book-pipeline-tests") as database:
        truncate_all(database)
        yield database


@pytest.fixture
def queue(db: Database) -> TaskQueue:
    return make_queue(db)


def _fill(db: Database, n: int) -> None:
    db.query(
        """INSERT INTO tasks (task_type, payload, domain, task_group, priority)
           SELECT CASE WHEN i %% 10 = 0 THEN 'listing' ELSE 'detail' END,
                  jsonb_build_object('url', 'http://books.example/p/' || i), 'books.example',
                  'g' || (i %% 7), i %% 3
           FROM generate_series(1, %s) AS i""",
        (n,),
    )
    db.query("INSERT INTO domains (domain, min_interval_s) VALUES ('books.example', 0)")
    # politely limited domains without work: the claim asks each whether it has a due task, by index
    db.query(
        "INSERT INTO domains (domain, min_interval_s) SELECT 'idle' || i || '.example', 2 FROM generate_series(1, 50) i"
    )
    db.query(
        "INSERT INTO queue_members (scope, member) SELECT s, 'g' || g"
        " FROM unnest(ARRAY['groups:detail', 'groups:listing']) s, generate_series(0, 6) g"
    )
    db.query("ANALYZE tasks")


def _counters(db: Database, query: str, params: tuple[object, ...] | None = None) -> list[dict[str, Any]]:
    """The server's statistics, as ``query`` reads them: this session's flushed, from a fresh snapshot, with no
    other session connected to the database to add its own."""
    others = db.query(
        "SELECT application_name FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    assert not others, f"another session is connected to the plan tests' database: {others}"
    db.query("SELECT pg_stat_force_next_flush()")
    db.query("SELECT pg_stat_clear_snapshot()")
    return db.query(query, params)


def _scans(db: Database) -> tuple[int, dict[str, int]]:
    table = _counters(db, "SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'tasks'")
    indexes = db.query("SELECT indexrelname, idx_scan FROM pg_stat_user_indexes WHERE relname = 'tasks'")
    return int(table[0]["seq_scan"]), {r["indexrelname"]: int(r["idx_scan"]) for r in indexes}


@pytest.mark.slow
def test_claims_use_the_pending_indexes_with_100000_pending_tasks(queue: TaskQueue, db: Database) -> None:
    _fill(db, PENDING)
    seq_before, idx_before = _scans(db)
    for _ in range(10):  # past plpgsql's five custom plans, into the cached generic plan
        assert len(queue.claim("w", 5)) == 5
        assert len(queue.claim("w", 5, task_types=["detail"])) == 5
        assert len(queue.claim("w", 3, task_types=["detail"], scheduled=True)) == 3
        assert len(queue.claim("w", 4, type_weights={"listing": 1, "detail": 3})) == 4
        assert len(queue.claim("w", 4, type_weights={"listing": 1, "detail": 3}, scheduled=True)) == 4
    seq_after, idx_after = _scans(db)
    assert seq_after == seq_before, "a claim scanned the whole tasks table"
    used = {name for name, n in idx_after.items() if n > idx_before.get(name, 0)}
    pending = {"idx_tasks_pending", "idx_tasks_pending_type", "idx_tasks_pending_group", "idx_tasks_pending_domain"}
    assert pending <= used


def test_candidate_query_plan_is_an_ordered_index_scan(db: Database) -> None:
    _fill(db, 20_000)
    plan = "\n".join(
        r["QUERY PLAN"]
        for r in db.query(
            """EXPLAIN SELECT t.id, t.domain FROM tasks t
               WHERE t.status = 'pending' AND t.task_type = 'detail' AND t.run_at <= now()
                 AND NOT (t.domain = ANY('{}'::text[])) AND NOT (t.id = ANY('{}'::bigint[]))
               ORDER BY t.priority DESC, t.id LIMIT 5 FOR UPDATE SKIP LOCKED"""
        )
    )
    assert "Index Scan using idx_tasks_pending_type" in plan
    assert "Seq Scan" not in plan and "Sort" not in plan


def test_a_claim_wakes_idle_members_by_index_with_10000_pending_tasks(queue: TaskQueue, db: Database) -> None:
    """Every fair claim asks each idle member whether it has due work again; that question reads an index,
    one entry a member, never the pending tasks (at a thousand hosts most members go idle between claims)."""
    _fill(db, 10_000)
    db.query(
        "INSERT INTO queue_members (scope, member) VALUES ('groups:detail', 'no-work'),"
        " ('interleave', 'listing'), ('interleave', 'detail'), ('interleave', 'no-work')"
    )
    scopes = ["interleave", "groups:detail", "groups:listing"]
    for _ in range(10):  # past plpgsql's five custom plans, into the cached generic plan
        db.query("UPDATE queue_members SET idle = true")
        before = _tuples_read(db)
        db.query("SELECT queue_claim_wake_members_v1(%s, now())", (scopes,))
        read = _tuples_read(db) - before
        assert read < 100, f"waking the idle members read {read} rows of tasks"
    db.query("UPDATE queue_members SET idle = true")
    assert len(queue.claim("w", 4, type_weights={"listing": 1, "detail": 3}, scheduled=True)) == 4
    idle = {(r["scope"], r["member"]) for r in db.query("SELECT scope, member FROM queue_members WHERE idle")}
    assert idle == {("groups:detail", "no-work"), ("interleave", "no-work")}


def _tuples_read(db: Database) -> int:
    """Rows of ``tasks`` read so far, by sequential scans and through its indexes."""
    table = _counters(db, "SELECT seq_tup_read FROM pg_stat_user_tables WHERE relname = 'tasks'")
    indexes = db.query("SELECT sum(idx_tup_read) AS n FROM pg_stat_user_indexes WHERE relname = 'tasks'")
    return int(table[0]["seq_tup_read"]) + int(indexes[0]["n"])


@pytest.mark.slow
def test_whether_the_queue_is_drained_reads_a_task_not_every_pending_one(queue: TaskQueue, db: Database) -> None:
    """An idle worker asks whether it may stop each time it has nothing in flight, which a polite crawl of many
    hosts does between most slots: the question is whether any task is left, not how many."""
    _fill(db, PENDING)
    before = _tuples_read(db)
    assert not queue.drained(["listing", "detail"])
    read = _tuples_read(db) - before
    assert read < 100, f"deciding the queue is not drained read {read} rows of tasks"


def _calls(db: Database, function: str) -> int:
    """Calls of a function so far (the session's ``track_functions`` must count it)."""
    rows = _counters(db, "SELECT calls FROM pg_stat_user_functions WHERE funcname = %s", (function,))
    return int(rows[0]["calls"]) if rows else 0


def test_a_claim_asks_a_group_with_no_task_in_an_open_domain_once(queue: TaskQueue, db: Database) -> None:
    """At many politely limited hosts most groups have no task in the few domains a claim may serve. A claim
    fetches its planned groups' tasks once and knows which found all they have: the round-robin passes over
    those with none left without asking again (each question is a query of the group's tasks)."""
    db.query("SET track_functions = 'all'")
    open_domain, closed_domain = "open.example", "closed.example"
    for domain in (open_domain, closed_domain):
        queue.set_domain_policy(domain, min_interval_s=30.0)
    groups = [f"g{i}" for i in range(10)]
    queue.enqueue_many(
        [NewTask("detail", {"url": url(f"{g}-{i}", host=closed_domain)}, group=g) for g in groups for i in range(3)]
        + [NewTask("detail", {"url": url(f"g9-open-{i}", host=open_domain)}, group="g9") for i in range(3)]
    )
    queue.set_group_weights("detail", dict.fromkeys(groups, 1.0))
    db.query("UPDATE domains SET next_slot_at = now() + interval '1 hour' WHERE domain = %s", (closed_domain,))
    before = _calls(db, "queue_claim_group_tasks_v1")
    claimed = queue.claim("w", 10, task_types=["detail"], scheduled=True).tasks
    asked = _calls(db, "queue_claim_group_tasks_v1") - before
    assert [(t.group, t.domain) for t in claimed] == [("g9", open_domain)]
    assert asked <= len(groups) + 1, f"{asked} queries of a group's tasks for {len(groups)} groups"


def test_a_heartbeat_of_a_workers_fifty_tasks_is_one_transaction(queue: TaskQueue, db: Database) -> None:
    """A worker at many politely limited hosts holds many tasks, most waiting for their slots; extending their
    leases costs one statement, not one transaction a task."""
    queue.enqueue_many([NewTask("detail", {"url": url(i)}) for i in range(50)])
    tasks = queue.claim("w", 50).tasks
    assert len(tasks) == 50

    def commits() -> int:
        return int(
            _counters(db, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")[0][
                "xact_commit"
            ]
        )

    idle = commits()
    baseline = commits() - idle  # what reading the counters costs
    assert baseline > 0, "the server's commit counter does not move: this test would see nothing"
    before = commits()
    assert queue.heartbeat_all(tasks) == set()
    assert commits() - before - baseline <= 1


def test_enqueueing_a_link_reads_its_own_url_not_every_live_task(queue: TaskQueue, db: Database) -> None:
    """A listing page of a polite crawl of many hosts enqueues a link or two at a time. Whether each link already
    has a live task is one probe of idx_tasks_payload_url, whatever the number of live tasks: a plan that hashes
    the live tasks reads them all on every page (10,000 at 10,000 pending, at a thousand hosts)."""
    _fill(db, 10_000)
    for i in range(10):  # a link already queued, then a new one, past any plan the first calls made
        before = _tuples_read(db)
        known, new = queue.enqueue_many(
            [NewTask("detail", {"url": f"http://books.example/p/{i + 1}"}), NewTask("detail", {"url": url(f"n{i}")})]
        )
        read = _tuples_read(db) - before
        assert known.id is not None and not known.created and new.created
        assert read < 100, f"enqueueing two links read {read} rows of tasks"


def test_whether_a_group_has_work_is_one_index_probe_wherever_its_tasks_lie(db: Database) -> None:
    """A claim asks whether a round-robin member with no task left to take has any work at all (it leaves the
    rounds idle if not). The group's pending tasks may lie behind every other task of the table (the groups a
    crawl reaches last): a scan that expects to meet one soon reads the table to them, on every question."""
    db.query(
        """INSERT INTO tasks (task_type, payload, domain, task_group)
           SELECT 'detail', jsonb_build_object('url', 'http://books.example/p/' || i), 'books.example',
                  CASE WHEN i > 10000 THEN 'late' ELSE 'early' END
           FROM generate_series(1, 10010) AS i"""
    )
    db.query("ANALYZE tasks")
    for group in (None, "late"):
        for _ in range(10):  # past plpgsql's five custom plans, into the cached generic plan
            before = _tuples_read(db)
            asked = db.query("SELECT queue_claim_has_work_v1('detail', %s, now(), '{}') AS yes", (group,))
            read = _tuples_read(db) - before
            assert asked == [{"yes": True}]
            assert read < 100, f"asking whether {group or 'the type'} has work read {read} rows of tasks"
