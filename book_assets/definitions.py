"""The Dagster code location: assembled from the topic modules under ``book_assets/defs``.

Settings read here (the schedule's cron, the sensor's threshold) are validated when the location loads, so a
bad ``BOOK_PIPELINE_SCHEDULE_CRON`` fails the load with a message naming the setting.
"""

from __future__ import annotations

import dagster as dg

from book_assets.defs.crawl.assets import book_details, listing_discovery
from book_assets.defs.crawl.checks import BOOK_CHECKS
from book_assets.defs.crawl.jobs import JOBS
from book_assets.defs.crawl.schedules import daily_full_refresh_schedule
from book_assets.defs.crawl.sensors import build_failed_tasks_sensor, run_failure_summary
from book_assets.defs.resources import default_resources
from book_assets.defs.snapshot.assets import category_balanced_snapshot
from book_assets.defs.snapshot.checks import SNAPSHOT_CHECKS
from book_assets.settings import Settings, load_settings

ASSETS = [listing_discovery, book_details, category_balanced_snapshot]
ASSET_CHECKS = [*BOOK_CHECKS, *SNAPSHOT_CHECKS]


def build_definitions(settings: Settings | None = None) -> dg.Definitions:
    """The definitions for ``settings`` (default: the environment's)."""
    settings = settings or load_settings()
    return dg.Definitions(
        assets=ASSETS,
        asset_checks=ASSET_CHECKS,
        jobs=JOBS,
        schedules=[daily_full_refresh_schedule(settings.schedule_cron)],
        sensors=[build_failed_tasks_sensor(settings.failed_tasks_threshold), run_failure_summary],
        resources=default_resources(),
        # In process: the lineage is a chain and the crawl steps spawn their own worker processes, so a
        # subprocess per step would only add a definitions load (tens of seconds on two cores) per step.
        executor=dg.in_process_executor,
    )


defs = build_definitions()
