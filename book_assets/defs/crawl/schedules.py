"""The daily full refresh, targeting the day's snapshot partition.

A re-crawl enqueues the same URLs again (the queue only deduplicates live tasks, so completed URLs are
welcome back), stores changed books as new versions and rebuilds the snapshot of the day the tick belongs to
(UTC). The cron comes from the ``schedule_cron`` setting (``BOOK_PIPELINE_SCHEDULE_CRON``), read and checked
each time the code location loads: a bad cron fails the load with a message naming the setting.
"""

from datetime import UTC, datetime

import dagster as dg

from book_assets.defs.crawl.jobs import full_refresh_job
from book_assets.settings import ConfigError, load_settings

NAME = "daily_full_refresh"


def tick_day(context: dg.ScheduleEvaluationContext) -> str:
    """The partition key of the tick's day (UTC); today for an evaluation without a scheduled time."""
    when = context.scheduled_execution_time or datetime.now(UTC)
    return when.astimezone(UTC).date().isoformat()


def daily_full_refresh_schedule(cron: str) -> dg.ScheduleDefinition:
    """The schedule of ``full_refresh_job`` at ``cron`` (UTC); a bad cron raises ``ConfigError`` naming the setting."""
    try:

        @dg.schedule(
            name=NAME,
            job=full_refresh_job,
            cron_schedule=cron,
            execution_timezone="UTC",
            # Off until someone turns it on in the UI: opening `make ui` must not start crawling a live site.
            default_status=dg.DefaultScheduleStatus.STOPPED,
            description="Full refresh every day: re-crawl, record changed books, rebuild the day's snapshot.",
        )
        def daily_full_refresh(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
            return dg.RunRequest(partition_key=tick_day(context))

    except dg.DagsterInvalidDefinitionError:
        raise ConfigError(
            f"invalid setting schedule_cron (BOOK_PIPELINE_SCHEDULE_CRON): {cron!r} is not a five-field "
            "cron expression such as '0 3 * * *'"
        ) from None
    return daily_full_refresh


@dg.definitions
def schedules() -> dg.Definitions:
    """The schedules, with the cron of the settings at load time."""
    return dg.Definitions(schedules=[daily_full_refresh_schedule(load_settings().schedule_cron)])
