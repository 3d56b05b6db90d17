"""The daily full refresh: the crawl, unpartitioned (the day's publishing follows it by automation).

A re-crawl enqueues the same URLs again (the queue only deduplicates live tasks, so completed URLs are
welcome back) and stores changed books as new versions. The cron comes from the ``schedule_cron`` setting
(``BOOK_PIPELINE_SCHEDULE_CRON``), read and checked each time the code location loads: a bad cron fails the
load with a message naming the setting.
"""

import dagster as dg

from book_assets.defs.catalog import invalid_cron
from book_assets.defs.crawl.jobs import full_refresh_job
from book_assets.settings import load_settings

NAME = "daily_full_refresh"


def daily_full_refresh_schedule(cron: str) -> dg.ScheduleDefinition:
    """The schedule of ``full_refresh_job`` at ``cron`` (UTC); a bad cron raises ``ConfigError`` naming the setting."""
    try:
        return dg.ScheduleDefinition(
            name=NAME,
            job=full_refresh_job,
            cron_schedule=cron,
            execution_timezone="UTC",
            # Off until someone turns it on in the UI: opening `make ui` must not start crawling a live site.
            default_status=dg.DefaultScheduleStatus.STOPPED,
            description="Full refresh every day: re-crawl and record changed books; the day's snapshot, change "
            "feed and archive follow by automation.",
        )
    except dg.DagsterInvalidDefinitionError:
        raise invalid_cron(cron) from None


@dg.definitions
def schedules() -> dg.Definitions:
    """The schedules, with the cron of the settings at load time."""
    return dg.Definitions(schedules=[daily_full_refresh_schedule(load_settings().schedule_cron)])
