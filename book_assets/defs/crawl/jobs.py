"""Jobs: the full refresh of each catalogue's crawl, the publishing of days, the retry of the failures, and the
requeue of dead letters.

- ``full_refresh_job``: the crawl (``listing_discovery``, ``book_details``) and its checks, unpartitioned; the
  daily schedule runs it. The day's publishing follows it by declarative automation
  (:data:`book_assets.defs.catalog.PUBLISH_AUTOMATION`). Every other catalogue has its own
  (``quotes_full_refresh_job``: ``quotes/listing_discovery``, ``quotes/details``), run by its own schedule.
- ``publish_job``: the daily assets (snapshot, change feed, archive) of one day, rebuilt from what the
  database and the archive hold; the job to backfill, since no crawl is in it (a crawl fetches the site as it
  is now, whatever day a run is for).
- ``recrawl_failed_job``: the crawl asset with ``requeue_failed``: the failed tasks that can succeed back to
  pending, drained, ``book_details`` materialized and checked; launched by ``failed_tasks_sensor``. Every other
  catalogue has its own (``quotes_recrawl_failed_job``), launched by its own sensor
  (``quotes_failed_tasks_sensor``): the requeue moves back the failures of the catalogue's own task types only.
- ``requeue_failed_tasks``: move dead-lettered tasks back to pending (filters: task type, domain, error), for
  an operator; the requeued tasks are fetched by the next drain.
- ``recheck_drift_job``: the blocking check ``no_field_drift`` alone, on the latest crawl; launched by
  ``drift_cleared_sensor`` once an operator accepted the drift that failed it (or a reextract resolved it), so
  the day's publishing, which waits for the crawl's blocking checks to pass, follows by itself.

:func:`crawl_jobs` builds a catalogue's two crawl jobs from its site definition. Each of these jobs and the
queue jobs (:mod:`book_assets.defs.crawl.fan_out`, one drain step per worker)
materializes the one crawl asset (:mod:`book_assets.defs.crawl.assets`), with its checks.
Every job that drains the queue carries the ``book-pipeline/crawl`` run tag (to find its runs) and the
``book-pipeline/site`` tag naming its catalogue.
"""

from dataclasses import dataclass

import dagster as dg
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition
from pydantic import Field

from book_assets.crawl.config import make_queue
from book_assets.defs.catalog import crawl_keys, crawl_name, once_per_site
from book_assets.defs.crawl.assets import crawl_run_tags
from book_assets.defs.resources import DatabaseResource
from book_assets.defs.snapshot.catalogues import SITE_SNAPSHOTS, snapshot_key
from book_assets.settings import default
from book_assets.sites.registry import site_named
from book_assets.sites.site import Site

#: The assets of the default site's crawl, in lineage order.
CRAWL_ASSETS = ("listing_discovery", "book_details")
#: The daily assets, each partitioned by day and built from the stored history.
PUBLISH_ASSETS = ("category_balanced_snapshot", "book_changes", "raw_archive")


@dataclass(frozen=True)
class CrawlJobs:
    """A catalogue's crawl jobs: the full refresh (its schedule's) and the retry of the failures."""

    full_refresh: UnresolvedAssetJobDefinition
    recrawl_failed: UnresolvedAssetJobDefinition


@once_per_site
def crawl_jobs(site: Site) -> CrawlJobs:
    """``site``'s full refresh and retry of the failures (one pair of objects per site), each the crawl
    asset of the catalogue and its checks."""
    keys = crawl_keys(site.name)
    selection = dg.AssetSelection.assets(keys.listing_discovery, keys.details)
    tags = crawl_run_tags(site.name)
    details = keys.details.to_user_string()
    published = next((s.job.name for s in SITE_SNAPSHOTS if s.asset.key == snapshot_key(site.name)), None)
    full_refresh = dg.define_asset_job(
        name=crawl_name(site.name, "full_refresh_job"),
        selection=selection,
        tags=tags,
        description=f"Re-crawl {site.name} (listing pages, then every {site.record}) and record what changed"
        + (
            " and removed books; the day's snapshot, change feed and archive follow by automation (publish_job)."
            if site.name == default("site")
            else "; its checks follow"
            + (f", and the day's snapshot by automation ({published})." if published else ".")
        ),
    )
    recrawl_failed = dg.define_asset_job(
        name=crawl_name(site.name, "recrawl_failed_job"),
        selection=selection,
        tags=tags,
        config={"ops": {crawl_name(site.name, "crawl"): {"config": {"requeue_failed": True}}}},
        description=f"Move the failed tasks back to pending and drain them: {details} is materialized and its "
        f"checks evaluated. Launched by {crawl_name(site.name, 'failed_tasks_sensor')}.",
    )
    return CrawlJobs(full_refresh, recrawl_failed)


_BOOKS = crawl_jobs(site_named(default("site")))
full_refresh_job = _BOOKS.full_refresh
recrawl_failed_job = _BOOKS.recrawl_failed

publish_job = dg.define_asset_job(
    name="publish_job",
    selection=dg.AssetSelection.assets(*PUBLISH_ASSETS),
    description="Rebuild one day's snapshot, change feed and archive index from the stored history (no crawl): "
    "launch it with the day as partition key, or backfill it over past days.",
)


#: The check that holds a drifted day (:mod:`book_assets.defs.crawl.checks`).
NO_FIELD_DRIFT = dg.AssetCheckKey(dg.AssetKey("book_details"), "no_field_drift")

recheck_drift_job = dg.define_asset_job(
    name="recheck_drift_job",
    selection=dg.AssetSelection.checks(NO_FIELD_DRIFT),
    description="Run the check no_field_drift again on the latest crawl (no crawl, no fetch). Launched by "
    "drift_cleared_sensor once the drift that failed it is accepted or resolved; when it passes, the day's "
    "publishing follows by automation.",
)


class RequeueConfig(dg.Config):
    task_type: str | None = Field(default=None, description="Only failed tasks of this type (listing, detail).")
    domain: str | None = Field(default=None, description="Only failed tasks of this domain.")
    error_like: str | None = Field(default=None, description="SQL LIKE pattern on the error, e.g. 'timeout%'.")


@dg.op(description="Move failed (dead-lettered) tasks back to pending; reports how many moved.")
def requeue_failed(context: dg.OpExecutionContext, config: RequeueConfig, database: DatabaseResource) -> dg.Output[int]:
    filters = {"task_type": config.task_type, "domain": config.domain, "error_like": config.error_like}
    with database.open() as db:
        queue = make_queue(db)
        requeued = queue.requeue(**filters)
        still_failed = queue.stats().total("failed")
    shown = ", ".join(f"{k}={v!r}" for k, v in filters.items() if v is not None) or "all failed tasks"
    context.log.info(f"requeued {requeued} failed task(s) ({shown}); {still_failed} still failed")
    return dg.Output(requeued, metadata={"requeued": requeued, "still_failed": still_failed, "filters": shown})


@dg.job(description="Move failed tasks back to pending (config: task_type, domain, error_like).")
def requeue_failed_tasks() -> None:
    requeue_failed()
