"""Sensors: requeue dead-lettered tasks when too many pile up, and summarize failed runs.

``failed_tasks_sensor`` reads the queue's failed count (``TaskQueue.stats()``) and a watermark of the failed
tasks (count, newest id, latest claim time). At or above the threshold it requests ``requeue_failed_tasks``
once per distinct watermark: the cursor holds the last watermark seen, and the run key is derived from it, so
neither a second tick nor a lost cursor can launch the same requeue twice. A requeued task that fails again
has a newer claim time, so a fresh pile of failures fires again.
"""

import json
from typing import Any

import dagster as dg

from book_assets.crawl.config import TASK_TYPES
from book_assets.defs.crawl.jobs import requeue_failed_tasks
from book_assets.defs.resources import DatabaseResource
from book_assets.queue import TaskQueue


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
        job=requeue_failed_tasks,
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
            f"{failed} failed task(s) reached the threshold of {threshold}: requesting requeue_failed_tasks "
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


@dg.run_failure_sensor(
    name="run_failure_summary",
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Log a one-paragraph summary of every failed run of this code location.",
)
def run_failure_summary(context: dg.RunFailureSensorContext) -> None:
    run = context.dagster_run
    steps = [event.step_key for event in context.get_step_failure_events() if event.step_key]
    message = (context.failure_event.message or "").strip().splitlines()
    context.log.error(
        f"run {run.run_id[:8]} of {run.job_name} failed"
        f"{' in ' + ', '.join(steps) if steps else ''}: {message[0] if message else 'no message'}"
        f" (tags: {', '.join(f'{k}={v}' for k, v in sorted(run.tags.items()) if not k.startswith('.dagster'))})"
    )
