"""Each catalogue's daily full refresh: its crawl, unpartitioned (books' day's publishing follows it by
automation).

A re-crawl enqueues the same URLs again (the queue only deduplicates live tasks, so completed URLs are
welcome back) and stores changed records. The cron comes from the ``schedule_cron`` setting
(``BOOK_PIPELINE_SCHEDULE_CRON``), read and checked each time the code location loads, the same for every
catalogue: a bad cron fails the load with a message naming the setting. Books' schedule is
``daily_full_refresh``, every other catalogue's ``<site>_daily_full_refresh``; each is off until someone turns
it on.

One crawl of a catalogue at a time: a tick while a crawl run of the same catalogue is queued or running (a full
refresh that outlasts a day, a recrawl of the failures; its ``book-pipeline/site`` tag) is skipped with a
reason naming that run, rather than starting a second crawl of the same queue beside it. Another catalogue's
crawl does not hold it: their tasks and epochs are their own.
"""

from collections.abc import Callable

import dagster as dg

from book_assets.defs.catalog import crawl_name, invalid_cron
from book_assets.defs.crawl.jobs import crawl_jobs
from book_assets.defs.crawl.observe import crawl_run_in_progress
from book_assets.settings import default
from book_assets.sites.registry import site_named
from book_assets.sites.site import Site

NAME = "daily_full_refresh"


def crawl_unless_one_runs(site: str) -> Callable[[dg.ScheduleEvaluationContext], dg.RunRequest | dg.SkipReason]:
    """A tick of catalogue ``site``'s schedule: a run, or the skip of it while a crawl run of ``site`` is in
    progress."""

    def tick(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        running = crawl_run_in_progress(context.instance, site)
        if running is not None:
            return dg.SkipReason(
                f"crawl run {running.run_id[:8]} ({running.job_name}) is {running.status.value}: one crawl of the "
                "catalogue at a time, this tick is skipped"
            )
        return dg.RunRequest()

    return tick


def full_refresh_schedule(site: Site, cron: str) -> dg.ScheduleDefinition:
    """The schedule of ``site``'s full refresh at ``cron`` (UTC); a bad cron raises ``ConfigError`` naming the
    setting."""
    books = site.name == default("site")
    try:
        return dg.ScheduleDefinition(
            name=crawl_name(site.name, NAME),
            job=crawl_jobs(site).full_refresh,
            cron_schedule=cron,
            execution_fn=crawl_unless_one_runs(site.name),
            execution_timezone="UTC",
            # Off until someone turns it on in the UI: opening `make ui` must not start crawling a live site.
            default_status=dg.DefaultScheduleStatus.STOPPED,
            description=(
                "Full refresh every day: re-crawl and record changed books; the day's snapshot, change feed and "
                "archive follow by automation."
                if books
                else f"Full refresh of {site.name} every day: re-crawl and record its {site.record}s."
            )
            + " A tick while a crawl run of the catalogue is in progress is skipped.",
        )
    except dg.DagsterInvalidDefinitionError:
        raise invalid_cron(cron) from None


def daily_full_refresh_schedule(cron: str) -> dg.ScheduleDefinition:
    """The default site's (books') ``daily_full_refresh`` at ``cron``."""
    return full_refresh_schedule(site_named(default("site")), cron)
