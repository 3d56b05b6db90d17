"""The daily full refresh.

A re-crawl enqueues the same URLs again (the queue only deduplicates live tasks, so completed URLs are
welcome back), stores changed books as new versions and rebuilds the snapshot. The cron comes from the
``schedule_cron`` setting (``BOOK_PIPELINE_SCHEDULE_CRON``) and is checked when the definitions load.
"""

from __future__ import annotations

import dagster as dg

from book_assets.defs.crawl.jobs import full_refresh_job
from book_assets.settings import ConfigError


def daily_full_refresh_schedule(cron: str) -> dg.ScheduleDefinition:
    """The schedule of ``full_refresh_job`` at ``cron`` (UTC); a bad cron raises ``ConfigError`` naming the setting."""
    try:
        return dg.ScheduleDefinition(
            name="daily_full_refresh",
            job=full_refresh_job,
            cron_schedule=cron,
            execution_timezone="UTC",
            # Off until someone turns it on in the UI: opening `make ui` must not start crawling a live site.
            default_status=dg.DefaultScheduleStatus.STOPPED,
            description="Full refresh every day: re-crawl, record changed books, rebuild the snapshot.",
        )
    except dg.DagsterInvalidDefinitionError:
        raise ConfigError(
            f"invalid setting schedule_cron (BOOK_PIPELINE_SCHEDULE_CRON): {cron!r} is not a five-field "
            "cron expression such as '0 3 * * *'"
        ) from None
