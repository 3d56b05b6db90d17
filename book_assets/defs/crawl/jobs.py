"""Jobs: the full refresh of the crawl, the publishing of days, the retry of the failures, and the requeue
of dead letters.

- ``full_refresh_job``: the crawl (``listing_discovery``, ``book_details``) and its checks, unpartitioned; the
  daily schedule runs it. The day's publishing follows it by declarative automation
  (:data:`book_assets.defs.catalog.PUBLISH_AUTOMATION`).
- ``publish_job``: the daily assets (snapshot, change feed, archive) of one day, rebuilt from what the
  database and the archive hold; the job to backfill, since no crawl is in it (a crawl fetches the site as it
  is now, whatever day a run is for).
- ``recrawl_failed_job``: the crawl asset with ``requeue_failed``: the failed tasks that can succeed back to
  pending, drained, ``book_details`` materialized and checked; launched by ``failed_tasks_sensor``.
- ``requeue_failed_tasks``: move dead-lettered tasks back to pending (filters: task type, domain, error), for
  an operator; the requeued tasks are fetched by the next drain.
- ``recheck_drift_job``: the blocking check ``no_field_drift`` alone, on the latest crawl; launched by
  ``drift_cleared_sensor`` once an operator accepted the drift that failed it (or a reextract resolved it), so
  the day's publishing, which waits for the crawl's blocking checks to pass, follows by itself.

Each of these jobs and the queue jobs (:mod:`book_assets.defs.crawl.fan_out`, one drain step per worker)
materializes the one crawl asset (:mod:`book_assets.defs.crawl.assets`), with its checks.
Every job that drains the queue carries the ``book-pipeline/crawl`` run tag (to find its runs).
"""

import dagster as dg
from pydantic import Field

from book_assets.crawl.config import make_queue
from book_assets.defs.crawl.assets import CRAWL_RUN_TAGS
from book_assets.defs.resources import DatabaseResource

#: The assets of a crawl, in lineage order.
CRAWL_ASSETS = ("listing_discovery", "book_details")
#: The daily assets, each partitioned by day and built from the stored history.
PUBLISH_ASSETS = ("category_balanced_snapshot", "book_changes", "raw_archive")

full_refresh_job = dg.define_asset_job(
    name="full_refresh_job",
    selection=dg.AssetSelection.assets(*CRAWL_ASSETS),
    tags=CRAWL_RUN_TAGS,
    description="Re-crawl the site (listing pages, then every book) and record changed and removed books; the "
    "day's snapshot, change feed and archive follow by automation (publish_job).",
)

publish_job = dg.define_asset_job(
    name="publish_job",
    selection=dg.AssetSelection.assets(*PUBLISH_ASSETS),
    description="Rebuild one day's snapshot, change feed and archive index from the stored history (no crawl): "
    "launch it with the day as partition key, or backfill it over past days.",
)


recrawl_failed_job = dg.define_asset_job(
    name="recrawl_failed_job",
    selection=dg.AssetSelection.assets("listing_discovery", "book_details"),
    tags=CRAWL_RUN_TAGS,
    config={"ops": {"crawl": {"config": {"requeue_failed": True}}}},
    description="Move the failed tasks back to pending and drain them: book_details is "
    "materialized and its checks evaluated. Launched by failed_tasks_sensor.",
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
