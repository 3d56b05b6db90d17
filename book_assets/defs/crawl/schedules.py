"""The daily full refresh: the crawl, unpartitioned (the day's publishing follows it by automation).

A re-crawl enqueues the same URLs again (the queue only deduplicates live tasks, so completed URLs are
welcome back) and stores changed books as new versions. The cron comes from the ``schedule_cron`` setting
(``BOOK_PIPELINE_SCHEDULE_CRON``), read and checked each time the code location loads: a bad cron fails the
load with a message naming the setting.

One crawl of the catalogue at a time: a tick while a crawl run is queued or running (a full refresh that
outlasts a day, a recrawl of the failures) is skipped with a reason naming that run, rather than starting a
second crawl of the same queue beside it.
"""

import dagster as dg

from book_assets.defs.catalog import invalid_cron
from book_assets.defs.crawl.jobs import full_refresh_job
from book_assets.defs.crawl.observe import crawl_run_in_progress
from book_assets.settings import load_settings

NAME = "daily_full_refresh"


def crawl_unless_one_runs(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
    """A run of the tick, or the skip of it while another crawl run is in progress."""
    running = crawl_run_in_progress(context.instance)
    if running is not None:
        return dg.SkipReason(
            f"crawl run {running.run_id[:8]} ({running.job_name}) is {running.status.value}: one crawl of the "
            "catalogue at a time, this tick is skipped"
        )
    return dg.RunRequest()


def daily_full_refresh_schedule(cron: str) -> dg.ScheduleDefinition:
    """The schedule of ``full_refresh_job`` at ``cron`` (UTC); a bad cron raises ``ConfigError`` naming the setting."""
    try:
        return dg.ScheduleDefinition(
            name=NAME,
            job=full_refresh_job,
            cron_schedule=cron,
            execution_fn=crawl_unless_one_runs,
            execution_timezone="UTC",
            # Off until someone turns it on in the UI: opening `make ui` must not start crawling a live site.
            default_status=dg.DefaultScheduleStatus.STOPPED,
            description="Full refresh every day: re-crawl and record changed books; the day's snapshot, change "
            "feed and archive follow by automation. A tick while a crawl run is in progress is skipped.",
        )
    except dg.DagsterInvalidDefinitionError:
        raise invalid_cron(cron) from None


@dg.definitions
def schedules() -> dg.Definitions:
    """The schedules, with the cron of the settings at load time."""
    return dg.Definitions(schedules=[daily_full_refresh_schedule(load_settings().schedule_cron)])
