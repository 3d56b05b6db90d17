"""Sensors: requeue dead-lettered tasks when too many pile up, summarize failed runs, and alert on them.

``failed_tasks_sensor`` reads the queue's failed count (``TaskQueue.stats()``) and a watermark of the failed
tasks (count, newest id, latest claim time). At or above the threshold it requests ``recrawl_failed_job``
once per distinct watermark: the cursor holds the last watermark seen, and the run key is derived from it, so
neither a second tick nor a lost cursor can launch the same requeue twice. A requeued task that fails again
has a newer claim time, so a fresh pile of failures fires again.

``run_failure_alert`` posts one message per failed run to the destinations :mod:`book_assets.alerts` reads
from the environment (a webhook, Slack), and does nothing when none is configured.

The threshold is a setting, read (and validated) each time the code location loads.
"""

import json
from typing import Any

import dagster as dg

from book_assets.alerts import AlertDestinations, RunFailureAlert, send_alert
from book_assets.crawl.config import TASK_TYPES
from book_assets.defs.crawl.jobs import recrawl_failed_job
from book_assets.defs.resources import DatabaseResource
from book_assets.queue import TaskQueue
from book_assets.settings import load_settings


def _watermark(database: DatabaseResource) -> tuple[int, dict[str, Any], list[tuple[str, int]]]:
    with database.open(application_name="book-pipeline sensor") as db:
        queue = TaskQueue(db, task_types=TASK_TYPES)
        stats = queue.stats(top_failures=3)
        row = queue.failed_watermark()
    last = row["last_claimed_at"]
    mark = {
        "failed": int(row["failed"]),
        "max_id": int(row["max_id"] or 0),
        "last_claimed_at": last.isoformat() if last is not None else None,
    }
    return stats.total("failed"), mark, stats.top_failures


def run_key_for(mark: dict[str, Any]) -> str:
    """The requeue run's key: the same failures always give the same key."""
    return f"requeue-failed-{mark['failed']}-{mark['max_id']}-{mark['last_claimed_at'] or 'never'}"


def build_failed_tasks_sensor(threshold: int, *, minimum_interval_seconds: int = 60) -> dg.SensorDefinition:
    """``failed_tasks_sensor``: requeue when at least ``threshold`` tasks are failed."""

    @dg.sensor(
        name="failed_tasks_sensor",
        job=recrawl_failed_job,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Requeue failed tasks when {threshold} or more have piled up (once per batch of failures).",
    )
    def failed_tasks_sensor(context: dg.SensorEvaluationContext, database: DatabaseResource) -> dg.SensorResult:
        failed, mark, top = _watermark(database)
        previous = json.loads(context.cursor) if context.cursor else None
        cursor = json.dumps(mark, sort_keys=True)
        if failed < threshold:
            return dg.SensorResult(
                skip_reason=dg.SkipReason(f"{failed} failed task(s), below the threshold of {threshold}"),
                cursor=cursor,
            )
        if previous == mark:
            return dg.SensorResult(
                skip_reason=dg.SkipReason(f"{failed} failed task(s), unchanged since the requeue already requested"),
                cursor=cursor,
            )
        errors = "; ".join(f"{n}x {error[:80]}" for error, n in top)
        context.log.info(
            f"{failed} failed task(s) reached the threshold of {threshold}: requesting recrawl_failed_job "
            f"(top errors: {errors or '-'})"
        )
        return dg.SensorResult(
            run_requests=[
                dg.RunRequest(
                    run_key=run_key_for(mark),
                    tags={"book-pipeline/failed-tasks": str(failed)},
                )
            ],
            cursor=cursor,
        )

    return failed_tasks_sensor


def failure_of(context: dg.RunFailureSensorContext) -> RunFailureAlert:
    """The failed run's job, failed steps, first line of the error and user tags."""
    run = context.dagster_run
    step_failures = context.get_step_failure_events()
    steps = [event.step_key for event in step_failures if event.step_key]
    # The first failed step's own error (Dagster's wrapper's innermost cause) says what happened; the run's
    # message only lists the steps.
    errors = [e.step_failure_data.error for e in step_failures if e.step_failure_data.error is not None]
    error = errors[0] if errors else None
    while error is not None and error.cause is not None:
        error = error.cause
    message = (error.message if error is not None else context.failure_event.message or "").strip().splitlines()
    return RunFailureAlert(
        run_id=run.run_id,
        job_name=run.job_name,
        steps=steps,
        error=message[0] if message else "",
        tags={k: v for k, v in sorted(run.tags.items()) if not k.startswith(".dagster")},
    )


@dg.run_failure_sensor(
    name="run_failure_summary",
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Log a one-paragraph summary of every failed run of this code location.",
)
def run_failure_summary(context: dg.RunFailureSensorContext) -> None:
    failure = failure_of(context)
    context.log.error(f"{failure.text} (tags: {', '.join(f'{k}={v}' for k, v in failure.tags.items())})")


@dg.run_failure_sensor(
    name="run_failure_alert",
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Post every failed run to the alert webhook (BOOK_PIPELINE_ALERT_WEBHOOK_URL) or Slack "
        "(BOOK_PIPELINE_SLACK_TOKEN, BOOK_PIPELINE_SLACK_CHANNEL); silent when neither is set."
    ),
)
def run_failure_alert(context: dg.RunFailureSensorContext) -> None:
    destinations = AlertDestinations.from_environment()
    if not destinations.configured:
        return
    # An undelivered alert raises: the tick fails visibly and the sensor tries the same run again next tick.
    sent = send_alert(failure_of(context), destinations)
    context.log.info(f"alert for run {context.dagster_run.run_id[:8]} sent to {', '.join(sent)}")


@dg.definitions
def sensors() -> dg.Definitions:
    """The sensors, with the threshold of the settings at load time (a bad value fails the load)."""
    threshold = load_settings().failed_tasks_threshold
    return dg.Definitions(sensors=[build_failed_tasks_sensor(threshold), run_failure_summary, run_failure_alert])
