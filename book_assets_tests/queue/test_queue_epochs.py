"""Epochs: inside one, each URL is enqueued once, whatever became of its task; retries and requeues still run."""

from __future__ import annotations

from book_assets.db.connection import Database
from book_assets.queue import FailOutcome, NewTask, TaskQueue
from book_assets_tests.queue.helpers import complete, url


def _seen(db: Database) -> list[tuple[int, str]]:
    return [(r["epoch"], r["url"]) for r in db.query("SELECT epoch, url FROM queue_seen ORDER BY epoch, url")]


def test_in_an_epoch_a_url_whose_task_completed_or_failed_is_not_enqueued_again(queue: TaskQueue) -> None:
    queue.begin_epoch()
    queue.enqueue_many([NewTask("detail", {"url": url(1)}), NewTask("detail", {"url": url(2)})])
    done, doomed = queue.claim("w", 2).tasks
    complete(queue, done)
    assert queue.fail(doomed, "gone", retryable=False, kind="http_404") is FailOutcome.DEAD
    again = queue.enqueue_many([NewTask("detail", {"url": url(i)}) for i in (1, 2, 3)])
    assert [(r.created, r.id is None) for r in again] == [(False, True), (False, True), (True, False)]
    assert queue.stats().total("pending") == 1


def test_a_new_epoch_enqueues_the_url_again(queue: TaskQueue) -> None:
    queue.begin_epoch()
    queue.enqueue("detail", {"url": url(1)})
    complete(queue, queue.claim("w").tasks[0])
    assert not queue.enqueue("detail", {"url": url(1)}).created
    queue.begin_epoch()
    assert queue.enqueue("detail", {"url": url(1)}).created


def test_a_url_whose_live_task_is_older_than_the_epoch_is_enqueued_once_in_it(queue: TaskQueue) -> None:
    queue.enqueue("detail", {"url": url(1)})  # left pending by an earlier crawl
    queue.begin_epoch()
    assert not queue.enqueue("detail", {"url": url(1)}).created
    complete(queue, queue.claim("w").tasks[0])
    assert not queue.enqueue("detail", {"url": url(1)}).created


def test_a_failed_attempt_is_retried_and_a_failed_task_requeued_in_its_epoch(queue: TaskQueue) -> None:
    queue.begin_epoch()
    first = queue.enqueue("detail", {"url": url(1)}, max_attempts=2)
    task = queue.claim("w").tasks[0]
    assert queue.fail(task, "503", retryable=True, kind="http_5xx") is FailOutcome.RETRY
    db = queue.db
    db.query("UPDATE tasks SET run_at = now()")  # the backoff passed
    task = queue.claim("w").tasks[0]
    assert task.id == first.id and task.attempt == 2
    assert queue.fail(task, "503", retryable=True, kind="http_5xx") is FailOutcome.DEAD
    assert queue.requeue() == 1
    assert queue.claim("w").tasks[0].id == first.id


def test_without_an_epoch_only_live_tasks_deduplicate(queue: TaskQueue, db: Database) -> None:
    queue.enqueue("detail", {"url": url(1)})
    complete(queue, queue.claim("w").tasks[0])
    assert queue.enqueue("detail", {"url": url(1)}).created
    assert _seen(db) == []


def test_the_retention_prune_forgets_the_urls_of_epochs_that_ended_before_its_cutoff(
    queue: TaskQueue, db: Database
) -> None:
    old = queue.begin_epoch()
    queue.enqueue("detail", {"url": url(1)})
    current = queue.begin_epoch()
    queue.enqueue("detail", {"url": url(2)})
    queue.prune(3600)
    assert _seen(db) == [(old, url(1)), (current, url(2))]  # the old epoch ended less than an hour ago
    queue.prune(0)
    assert _seen(db) == [(current, url(2))]
    assert [r["id"] for r in db.query("SELECT id FROM queue_epochs")] == [current]
    assert not queue.enqueue("detail", {"url": url(2)}).created


def test_an_epoch_begun_in_another_scope_neither_ends_this_one_nor_is_joined_by_it(db: Database) -> None:
    books, quotes = (TaskQueue(db, task_types=["detail"], epoch_scope=scope) for scope in ("books", "quotes"))
    books.begin_epoch()
    books.enqueue("detail", {"url": url(1)})
    complete(books, books.claim("w").tasks[0])
    quotes.begin_epoch()  # a crawl of another site begins on the same queue
    assert not books.enqueue("detail", {"url": url(1)}).created  # books' epoch goes on
    assert quotes.enqueue("detail", {"url": url(2)}).created
    assert {r["scope"] for r in db.query("SELECT scope FROM queue_epochs")} == {"books", "quotes"}


def test_the_retention_prune_ends_an_epoch_only_by_a_later_one_of_its_scope(db: Database) -> None:
    books, quotes = (TaskQueue(db, task_types=["detail"], epoch_scope=scope) for scope in ("books", "quotes"))
    current = books.begin_epoch()
    books.enqueue("detail", {"url": url(1)})
    quotes.begin_epoch()
    books.prune(0)
    assert [seen for seen in _seen(db) if seen[0] == current] == [(current, url(1))]
    assert not books.enqueue("detail", {"url": url(1)}).created
