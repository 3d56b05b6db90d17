"""failed_tasks_sensor: fires at the threshold, not below, once per batch of failures; the requeue job works."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from book_assets.crawl.config import DETAIL, LISTING, TASK_TYPES
from book_assets.db.connection import Database
from book_assets.defs.crawl.jobs import requeue_failed_tasks
from book_assets.defs.crawl.sensors import build_failed_tasks_sensor, run_failure_summary
from book_assets.defs.resources import DatabaseResource
from book_assets.queue import TaskQueue

THRESHOLD = 3


def fail_tasks(
    db: Database, n: int, *, task_type: str = DETAIL, error: str = "http_404: not found", start: int = 0
) -> None:
    """Enqueue ``n`` tasks and dead-letter them through the queue's own API."""
    queue = TaskQueue(db, task_types=TASK_TYPES, default_interval_s=0)
    for i in range(start, start + n):
        queue.enqueue(task_type, {"url": f"http://sandbox.test/catalogue/book_{i}/index.html"})
    claimed = queue.claim("test-worker", n, task_types=[task_type])
    assert len(claimed) == n
    for task in claimed.tasks:
        assert queue.fail(task, error, retryable=False) == "dead"


def failed_count(db: Database) -> int:
    return TaskQueue(db, task_types=TASK_TYPES).stats().total("failed")


@pytest.fixture
def instance() -> dg.DagsterInstance:
    with dg.instance_for_test() as inst:
        yield inst


def evaluate(database_url: str, instance: dg.DagsterInstance, cursor: str | None) -> dg.SensorResult:
    sensor = build_failed_tasks_sensor(THRESHOLD)
    context = dg.build_sensor_context(
        cursor=cursor, instance=instance, resources={"database": DatabaseResource(url=database_url)}
    )
    result = sensor(context)
    assert isinstance(result, dg.SensorResult)
    return result


def test_below_threshold_skips_with_the_reason(db: Database, database_url: str, instance: dg.DagsterInstance) -> None:
    fail_tasks(db, THRESHOLD - 1)
    result = evaluate(database_url, instance, None)
    assert not result.run_requests
    assert result.skip_reason is not None and "below the threshold" in result.skip_reason.skip_message


def test_at_threshold_requests_a_requeue_run_once(
    db: Database, database_url: str, instance: dg.DagsterInstance
) -> None:
    fail_tasks(db, THRESHOLD)
    first = evaluate(database_url, instance, None)
    assert first.run_requests and len(first.run_requests) == 1
    run_key = first.run_requests[0].run_key
    assert run_key and json.loads(first.cursor)["failed"] == THRESHOLD

    again = evaluate(database_url, instance, first.cursor)
    assert not again.run_requests, "the same failures must not fire twice"
    assert "unchanged" in again.skip_reason.skip_message

    # A lost cursor still yields the same run key, so Dagster deduplicates the run.
    assert evaluate(database_url, instance, None).run_requests[0].run_key == run_key


def test_more_failures_fire_again_with_a_new_run_key(
    db: Database, database_url: str, instance: dg.DagsterInstance
) -> None:
    fail_tasks(db, THRESHOLD)
    first = evaluate(database_url, instance, None)
    fail_tasks(db, 1, start=100)
    second = evaluate(database_url, instance, first.cursor)
    assert second.run_requests and second.run_requests[0].run_key != first.run_requests[0].run_key


def test_requeued_tasks_failing_again_fire_again(db: Database, database_url: str, instance: dg.DagsterInstance) -> None:
    fail_tasks(db, THRESHOLD)
    first = evaluate(database_url, instance, None)
    TaskQueue(db, task_types=TASK_TYPES).requeue()
    # The same tasks (same ids) are claimed and fail again before the sensor's next tick.
    queue = TaskQueue(db, task_types=TASK_TYPES, default_interval_s=0)
    for task in queue.claim("test-worker", THRESHOLD, task_types=[DETAIL]).tasks:
        queue.fail(task, "http_404: not found", retryable=False)
    second = evaluate(database_url, instance, first.cursor)
    assert second.run_requests and second.run_requests[0].run_key != first.run_requests[0].run_key


def test_requeue_job_moves_failed_tasks_back_to_pending(db: Database, database_url: str) -> None:
    fail_tasks(db, 2, task_type=DETAIL, error="timeout: page took too long")
    fail_tasks(db, 1, task_type=LISTING, error="http_404: gone", start=50)
    result = requeue_failed_tasks.execute_in_process(
        run_config={"ops": {"requeue_failed": {"config": {"error_like": "timeout%"}}}},
        resources={"database": DatabaseResource(url=database_url)},
    )
    assert result.success
    assert result.output_for_node("requeue_failed") == 2
    assert failed_count(db) == 1

    everything = requeue_failed_tasks.execute_in_process(resources={"database": DatabaseResource(url=database_url)})
    assert everything.output_for_node("requeue_failed") == 1
    assert failed_count(db) == 0


def test_sensor_run_request_launches_a_requeue_that_clears_the_failures(
    db: Database, database_url: str, instance: dg.DagsterInstance
) -> None:
    fail_tasks(db, THRESHOLD + 1)
    request = evaluate(database_url, instance, None).run_requests[0]
    result = requeue_failed_tasks.execute_in_process(
        run_config=request.run_config,
        tags=request.tags,
        instance=instance,
        resources={"database": DatabaseResource(url=database_url)},
    )
    assert result.success and result.output_for_node("requeue_failed") == THRESHOLD + 1
    assert failed_count(db) == 0
    assert evaluate(database_url, instance, None).run_requests == []


def test_run_failure_summary_logs_the_job_step_and_error(
    instance: dg.DagsterInstance, capfd: pytest.CaptureFixture[str]
) -> None:
    @dg.op
    def fetch_everything() -> None:
        raise RuntimeError("database went away")

    @dg.job(tags={"book-pipeline/crawl": "true"})
    def doomed_job() -> None:
        fetch_everything()

    result = doomed_job.execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    context = dg.build_run_status_sensor_context(
        sensor_name="run_failure_summary",
        dagster_instance=instance,
        dagster_run=result.dagster_run,
        dagster_event=result.get_run_failure_event(),
    ).for_run_failure()
    capfd.readouterr()
    run_failure_summary(context)
    summary = capfd.readouterr().err  # the sensor's logger is Dagster's, which writes to stderr
    assert "doomed_job failed in fetch_everything" in summary
    assert "book-pipeline/crawl=true" in summary
