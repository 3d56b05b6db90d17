"""What the queue did since a moment, read from the tasks: the figures a run reports."""

from __future__ import annotations

from book_assets.queue import NewTask, TaskQueue
from book_assets_tests.queue.helpers import complete, url


def test_activity_since_counts_only_what_happened_after_the_moment_by_type_and_group(queue: TaskQueue) -> None:
    queue.enqueue("listing", {"url": url("before")})
    complete(queue, queue.claim("w", task_types=["listing"]).tasks[0])
    since = queue.now()
    queue.enqueue_many(
        [
            NewTask("detail", {"url": url("a1")}, group="a"),
            NewTask("detail", {"url": url("a2")}, group="a"),
            NewTask("detail", {"url": url("b1")}, group="b"),
            NewTask("listing", {"url": url("after")}),
        ]
    )
    for task in queue.claim("w", 4).tasks:
        if task.url == url("b1"):
            queue.fail(task, "boom", kind="http_5xx", retryable=True)  # retried once, then completed
        elif task.url != url("a2"):
            complete(queue, task)
        else:
            queue.fail(task, "gone", kind="http_4xx", retryable=False)
    complete(queue, queue.claim("w", task_types=["detail"]).tasks[0])

    activity = queue.activity_since(since)
    assert activity.completed == {"detail": {"a": 1, "b": 1}, "listing": {"": 1}}
    assert activity.total() == 3 and activity.total("detail") == 2
    assert activity.created == {"detail": 3, "listing": 1}
    assert activity.failed == {"detail": 1, "listing": 0}
    assert activity.retries == 1
    assert queue.activity_since(queue.now()).total() == 0
