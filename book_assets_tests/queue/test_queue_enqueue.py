"""Enqueue: validation, deduplication of live URLs, batches, earliest start, wake-ups."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import psycopg2
import pytest

from book_assets.db.connection import Database
from book_assets.queue import NewTask, TaskQueue, domain_of
from book_assets_tests.queue.helpers import complete, make_queue, url, wait_for_work


def test_enqueueing_a_live_url_twice_creates_one_task(queue: TaskQueue) -> None:
    first = queue.enqueue("detail", {"url": url(1)})
    second = queue.enqueue("detail", {"url": url(1)}, priority=5)
    assert first.created and not second.created
    assert second.id == first.id
    assert queue.stats().total("pending") == 1


def test_a_completed_url_can_be_enqueued_again(queue: TaskQueue) -> None:
    queue.enqueue("detail", {"url": url(1)})
    complete(queue, queue.claim("w").tasks[0])
    again = queue.enqueue("detail", {"url": url(1)})
    assert again.created


def test_batch_reports_which_tasks_are_new_in_input_order(queue: TaskQueue) -> None:
    queue.enqueue("detail", {"url": url(2)})
    results = queue.enqueue_many(
        [NewTask("detail", {"url": url(i)}) for i in (1, 2, 3)] + [NewTask("listing", {"url": url(1)})]
    )
    assert [r.created for r in results] == [True, False, True, False]
    assert results[3].id == results[0].id
    assert len({r.id for r in results}) == 3


def test_batch_of_thousands_is_one_statement_and_fast(queue: TaskQueue) -> None:
    started = time.perf_counter()
    results = queue.enqueue_many(NewTask("detail", {"url": url(i)}) for i in range(5000))
    assert sum(r.created for r in results) == 5000
    assert time.perf_counter() - started < 5


def test_domain_and_group_are_stored_in_their_own_columns(queue: TaskQueue, db: Database) -> None:
    queue.enqueue("detail", {"url": "https://Books.Example:8443/a"}, group="Travel")
    row = db.query("SELECT domain, task_group FROM tasks")[0]
    assert row == {"domain": "books.example:8443", "task_group": "Travel"}
    assert queue.domain_policy("books.example:8443") is not None


@pytest.mark.parametrize("bad", ["", "   ", "not a url", "ftp://x/y", "http:///nohost", None, 42])
def test_empty_or_malformed_url_is_rejected(queue: TaskQueue, bad: object) -> None:
    with pytest.raises(ValueError, match=r"url|URL"):
        queue.enqueue("detail", {"url": bad})


def test_payload_without_url_is_rejected(queue: TaskQueue) -> None:
    with pytest.raises(ValueError, match="url"):
        queue.enqueue("detail", {"page": 1})


def test_unknown_task_type_is_rejected(queue: TaskQueue) -> None:
    with pytest.raises(ValueError, match="unknown task type 'reviews'"):
        queue.enqueue("reviews", {"url": url(1)})


def test_negative_priority_is_rejected(queue: TaskQueue) -> None:
    with pytest.raises(ValueError, match="priority must be an integer >= 0"):
        queue.enqueue("detail", {"url": url(1)}, priority=-1)


def test_bad_max_attempts_is_rejected(queue: TaskQueue) -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        queue.enqueue("detail", {"url": url(1)}, max_attempts=0)


def test_a_bad_item_rejects_the_whole_batch_before_writing(queue: TaskQueue) -> None:
    with pytest.raises(ValueError):
        queue.enqueue_many([NewTask("detail", {"url": url(1)}), NewTask("detail", {"url": ""})])
    assert queue.stats().total("pending") == 0


def test_database_refuses_negative_priority_written_around_the_library(db: Database) -> None:
    with pytest.raises(psycopg2.errors.CheckViolation):
        db.query("INSERT INTO tasks (task_type, payload, priority) VALUES ('detail', '{\"url\": \"u\"}', -1)")


def test_task_is_not_claimed_before_its_run_at(queue: TaskQueue) -> None:
    queue.enqueue("detail", {"url": url(1)}, run_at=datetime.now(UTC) + timedelta(hours=1))
    queue.enqueue("detail", {"url": url(2)}, run_at=60.0)
    assert not queue.claim("w", 5)
    queue.db.query("UPDATE tasks SET run_at = now() WHERE payload->>'url' = %s", (url(2),))  # its time came
    assert [t.url for t in queue.claim("w", 5).tasks] == [url(2)]


def test_naive_run_at_is_rejected(queue: TaskQueue) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        queue.enqueue("detail", {"url": url(1)}, run_at=datetime(2030, 1, 1))


def test_domain_of_keeps_the_port_and_lowercases_the_host() -> None:
    assert domain_of("http://127.0.0.1:8000/catalogue/") == "127.0.0.1:8000"
    assert domain_of("https://BOOKS.toscrape.com/") == "books.toscrape.com"


def test_enqueue_wakes_a_waiting_worker(db: Database, database_url: str) -> None:
    waiter = make_queue(Database(database_url))
    assert not wait_for_work(waiter, 0.05)  # subscribes; nothing queued yet
    producer = make_queue(db)
    timer = threading.Timer(0.2, lambda: producer.enqueue("detail", {"url": url(1)}))
    timer.start()
    try:
        assert wait_for_work(waiter, 30.0)  # True: woken by the NOTIFY (a timeout returns False)
    finally:
        timer.join()
        waiter.db.close()


def test_waiting_without_work_times_out(queue: TaskQueue) -> None:
    started = time.monotonic()
    assert not wait_for_work(queue, 0.2)
    assert time.monotonic() - started >= 0.19  # it did wait (an upper bound would be a timing assert)
