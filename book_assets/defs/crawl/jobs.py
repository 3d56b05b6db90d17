"""Jobs: the full refresh of the assets, and op jobs that work the queue directly.

- ``full_refresh_job``: the three assets (discovery, details, snapshot) and their checks; the daily schedule
  runs it.
- ``crawl_queue_job``: ``seed_queue`` then ``drain_queue`` — a crawl without the snapshot, for operators.
- ``drain_queue_job``: ``drain_queue`` alone — finish whatever is pending (after a requeue or an interrupted
  run) without seeding again.
- ``recrawl_failed_job``: the crawl step with ``requeue_failed``: every failed task back to pending, drained,
  ``book_details`` materialized and checked; launched by ``failed_tasks_sensor``.
- ``requeue_failed_tasks``: move dead-lettered tasks back to pending (filters: task type, domain, error), for
  an operator; the requeued tasks are fetched by the next drain.

Every job that drains the queue carries the ``book-pipeline/crawl`` run tag (to find its runs); the steps that
seed or drain the queue are in the ``crawl`` pool, which dagster.yaml gives one slot: one at a time.
"""

from collections.abc import Iterator

import dagster as dg
from pydantic import Field

from book_assets.crawl.config import DETAIL, LISTING, TASK_TYPES
from book_assets.crawl.pipeline import Crawl
from book_assets.defs.catalog import CRAWL_POOL
from book_assets.defs.crawl.assets import BOOK_DETAILS, CRAWL_RUN_TAGS, LISTING_DISCOVERY, materializations
from book_assets.defs.resources import DatabaseResource, FetcherResource, SchedulingResource, SiteResource, crawl_config
from book_assets.defs.retries import TRANSIENT_RETRY, transient_only
from book_assets.queue import TaskQueue

#: The assets of a full refresh, in lineage order.
FULL_REFRESH_ASSETS = ("listing_discovery", "book_details", "category_balanced_snapshot")

full_refresh_job = dg.define_asset_job(
    name="full_refresh_job",
    selection=dg.AssetSelection.assets(*FULL_REFRESH_ASSETS),
    tags=CRAWL_RUN_TAGS,
    description="Re-crawl the site (listing pages, then every book), record changed books, rebuild the snapshot.",
)


recrawl_failed_job = dg.define_asset_job(
    name="recrawl_failed_job",
    selection=dg.AssetSelection.assets("listing_discovery", "book_details"),
    tags=CRAWL_RUN_TAGS,
    config={"ops": {"crawl": {"config": {"requeue_failed": True}}}},
    description="Move the failed tasks back to pending and drain them in the crawl step: book_details is "
    "materialized and its checks evaluated. Launched by failed_tasks_sensor.",
)


class DrainConfig(dg.Config):
    task_types: list[str] = Field(
        default_factory=lambda: list(TASK_TYPES), description="Task types to work on (listing, detail)."
    )
    workers: int | None = Field(default=None, description="Worker processes; unset: the fetcher's workers.")


class RequeueConfig(dg.Config):
    task_type: str | None = Field(default=None, description="Only failed tasks of this type (listing, detail).")
    domain: str | None = Field(default=None, description="Only failed tasks of this domain.")
    error_like: str | None = Field(default=None, description="SQL LIKE pattern on the error, e.g. 'timeout%'.")


@dg.op(
    retry_policy=TRANSIENT_RETRY,
    pool=CRAWL_POOL,
    description="Store the crawl's politeness and weights, enqueue the start page.",
)
def seed_queue(
    context: dg.OpExecutionContext,
    database: DatabaseResource,
    site: SiteResource,
    fetcher: FetcherResource,
    scheduling: SchedulingResource,
) -> dg.Output[bool]:
    with transient_only():
        config = crawl_config(site, fetcher, scheduling)
        created = Crawl(database.resolved_url(), config).start()
    context.log.info(f"seeded {config.base_url}" if created else f"{config.base_url} is already queued")
    return dg.Output(created, metadata={"start_url": config.base_url, "created": created})


@dg.op(
    ins={"after": dg.In(dg.Nothing)},
    retry_policy=TRANSIENT_RETRY,
    pool=CRAWL_POOL,
    description="Run the worker processes until no claimable task of the chosen types is left; records the "
    "materializations of the assets it changed.",
)
def drain_queue(
    context: dg.OpExecutionContext,
    config: DrainConfig,
    database: DatabaseResource,
    site: SiteResource,
    fetcher: FetcherResource,
    scheduling: SchedulingResource,
) -> Iterator[dg.AssetMaterialization | dg.Output[int]]:
    task_types = tuple(config.task_types)
    with transient_only():
        crawl = Crawl(database.resolved_url(), crawl_config(site, fetcher, scheduling))
        context.log.info(f"draining {', '.join(task_types)} tasks")
        report = crawl.report(crawl.work(task_types=task_types, workers=config.workers))
    changed = {LISTING_DISCOVERY} if LISTING in task_types else set()
    changed |= {BOOK_DETAILS} if DETAIL in task_types else set()
    for result in materializations(report):
        if result.asset_key in changed:
            yield dg.AssetMaterialization(asset_key=result.asset_key, metadata=result.metadata)
    yield dg.Output(report.run.pages, metadata={"pages": report.run.pages, "elapsed_s": round(report.elapsed_s, 1)})


@dg.op(description="Move failed (dead-lettered) tasks back to pending; reports how many moved.")
def requeue_failed(context: dg.OpExecutionContext, config: RequeueConfig, database: DatabaseResource) -> dg.Output[int]:
    filters = {"task_type": config.task_type, "domain": config.domain, "error_like": config.error_like}
    with database.open() as db:
        queue = TaskQueue(db, task_types=TASK_TYPES)
        requeued = queue.requeue(**filters)
        still_failed = queue.stats().total("failed")
    shown = ", ".join(f"{k}={v!r}" for k, v in filters.items() if v is not None) or "all failed tasks"
    context.log.info(f"requeued {requeued} failed task(s) ({shown}); {still_failed} still failed")
    return dg.Output(requeued, metadata={"requeued": requeued, "still_failed": still_failed, "filters": shown})


@dg.job(tags=CRAWL_RUN_TAGS, description="Seed the start page and drain the queue (no snapshot).")
def crawl_queue_job() -> None:
    drain_queue(seed_queue())


@dg.job(tags=CRAWL_RUN_TAGS, description="Drain whatever is pending (after a requeue or an interrupted run).")
def drain_queue_job() -> None:
    drain_queue()


@dg.job(description="Move failed tasks back to pending (config: task_type, domain, error_like).")
def requeue_failed_tasks() -> None:
    requeue_failed()


JOBS = [full_refresh_job, recrawl_failed_job, crawl_queue_job, drain_queue_job, requeue_failed_tasks]
