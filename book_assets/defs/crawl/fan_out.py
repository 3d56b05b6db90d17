"""The queue jobs: the crawl's work fanned out into Dagster steps, one per worker, placed by the executor.

- ``crawl_queue_job``: ``seed_queue`` → ``share_work`` → ``drain_queue`` × W → ``report_crawl`` → ``check_crawl``:
  a crawl without the snapshot, for operators and for deployments that scale out through Dagster.
- ``drain_queue_job``: the same without the seed: finish whatever is pending (after a requeue or an
  interrupted run).

A crawl is settled (closed, its removals decided) only by the run that opened it: ``seed_queue`` hands the
crawl it opened down to ``report_crawl``. ``drain_queue_job`` opened none, so its report settles none (the
crawl's own run may still be at work on another host) unless its ``report_crawl`` config names one
(``settle_crawl``: the id of a crawl whose run was interrupted before it reported).

``share_work`` fans out one ``drain_queue`` step per worker (W: the fetcher's ``workers``); each step runs one
worker in its own process until the queue has nothing left it may claim, and ``report_crawl`` collects their
stats and records the materializations of ``listing_discovery`` and ``book_details`` with the metadata the
crawl step records (:func:`~book_assets.defs.crawl.assets.materializations`); ``check_crawl`` then evaluates
the checks of the assets the run materialized, the same functions the asset jobs' check steps run, recorded
as check evaluations: a failed blocking check fails the run, and the publishing assets' automation waits for
the checks as it does after the asset jobs. Where the steps run is the
executor's business, chosen by the ``step_executor`` setting when the code location loads
(``BOOK_PIPELINE_STEP_EXECUTOR``): ``multiprocess`` (the default: a process per step on this host),
``in_process`` (one after the other: the first step drains the queue), ``k8s`` (``k8s_job_executor``, a
Kubernetes Job per step) or ``docker`` (``docker_executor``, a container per step). The executor's own
config (image, namespace, network, ``max_concurrent``) is the run config's ``execution.config``, as Dagster
documents for each. Steps hand their stats to ``report_crawl`` through the IO manager, so steps in other
pods or containers need storage they share (docs/deploy.md).

The crawl step of the asset jobs (:mod:`book_assets.defs.crawl.assets`) keeps its own worker processes: it is
one step, in process, which is what the demo and the daily refresh on one host want.

``seed_queue`` and ``share_work`` are in the ``crawl`` pool, one slot: seeding, and the discovery a deep budget
runs before the split, happen one crawl at a time. The drain steps are in no pool, since a pool's one slot
would run them one at a time; workers of two runs draining one queue at once are what workers on several
hosts always are: politeness and budgets are held in the database, per domain and per group.
"""

import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

import dagster as dg
from pydantic import Field

from book_assets.crawl.config import DETAIL, LISTING, TASK_TYPES
from book_assets.crawl.pipeline import Crawl, drain
from book_assets.crawl.stats import WorkerStats
from book_assets.db.connection import Database
from book_assets.defs.catalog import CRAWL_POOL
from book_assets.defs.crawl.assets import (
    BOOK_DETAILS,
    CRAWL_RUN_TAGS,
    LISTING_DISCOVERY,
    materializations,
)
from book_assets.defs.crawl.checks import book_evaluations, listing_evaluations
from book_assets.defs.resources import DatabaseResource, FetcherResource, SchedulingResource, SiteResource, crawl_config
from book_assets.defs.retries import TRANSIENT_RETRY, transient_only
from book_assets.settings import load_settings
from book_assets.store.lifecycle import OpenCrawl, find_crawl


def step_executor(name: str) -> dg.ExecutorDefinition:
    """The executor that places the drain steps (``name``: the ``step_executor`` setting)."""
    if name == "k8s":
        from dagster_k8s import k8s_job_executor

        return k8s_job_executor
    if name == "docker":
        from dagster_docker import docker_executor

        return docker_executor
    if name == "in_process":
        return dg.in_process_executor
    return dg.multiprocess_executor


class ReportConfig(dg.Config):
    settle_crawl: int | None = Field(
        default=None,
        description="Settle this crawl (its id in the crawls table): one whose run was interrupted before it "
        "reported. Unset: the crawl this run's seed opened, or none.",
    )


@dataclass(frozen=True)
class Seeded:
    """What ``seed_queue`` hands on: whether the start page was enqueued, and the crawl it opened."""

    created: bool
    crawl: OpenCrawl


class ShareConfig(dg.Config):
    task_types: list[str] = Field(
        default_factory=lambda: list(TASK_TYPES), description="Task types to work on (listing, detail)."
    )
    workers: int | None = Field(
        default=None, description="Drain steps, one worker each; unset: the fetcher's workers (its setting)."
    )


@dataclass(frozen=True)
class SharedWork:
    """What ``share_work`` hands to ``report_crawl``: what came before the split and when the run began."""

    task_types: tuple[str, ...]
    first: WorkerStats
    #: The run's start on the database's clock: the steps may run on other hosts.
    since: datetime
    quotas: dict[str, int] = field(default_factory=dict)
    seeded: bool = False
    #: The crawl this run's seed opened: the one its report settles (None: a drain-only run).
    crawl: OpenCrawl | None = None


@dataclass(frozen=True)
class Reported:
    """What ``report_crawl`` hands to ``check_crawl``: the assets the run materialized, whether its seed
    started a discovery, and the books found."""

    pages: int
    listing: bool
    details: bool
    discovered: bool
    books_found: int


def _crawl(
    database: DatabaseResource, site: SiteResource, fetcher: FetcherResource, scheduling: SchedulingResource
) -> Crawl:
    return Crawl(database.resolved_url(), crawl_config(site, fetcher, scheduling))


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
) -> dg.Output[Seeded]:
    with transient_only():
        crawl = _crawl(database, site, fetcher, scheduling)
        created = crawl.start()
    assert crawl.opened is not None
    base_url = crawl.config.base_url
    context.log.info(f"seeded {base_url}" if created else f"{base_url} is already queued")
    return dg.Output(
        Seeded(created, crawl.opened), metadata={"start_url": base_url, "created": created, "crawl": crawl.opened.id}
    )


@dg.op(
    ins={"seeded": dg.In(default_value=None)},
    out={"shared": dg.Out(), "steps": dg.DynamicOut()},
    retry_policy=TRANSIENT_RETRY,
    pool=CRAWL_POOL,
    description="Do what must come before the split (a deep budget's discovery), then one drain step per worker.",
)
def share_work(
    context: dg.OpExecutionContext,
    config: ShareConfig,
    seeded: Seeded | None,
    database: DatabaseResource,
    site: SiteResource,
    fetcher: FetcherResource,
    scheduling: SchedulingResource,
) -> Iterator[dg.Output[SharedWork] | dg.DynamicOutput[list[str]]]:
    with transient_only():
        crawl = _crawl(database, site, fetcher, scheduling)
        first, shared_types = crawl.before_sharing(tuple(config.task_types))
    workers = config.workers or crawl.config.workers
    context.log.info(f"{workers} drain step(s) share the {', '.join(shared_types)} tasks")
    assert crawl.since is not None
    yield dg.Output(
        SharedWork(
            tuple(config.task_types),
            first,
            crawl.since,
            crawl.quotas,
            seeded=seeded is not None and seeded.created,
            crawl=seeded.crawl if seeded is not None else None,
        ),
        output_name="shared",
        metadata={"drain_steps": workers, "shared_task_types": ", ".join(shared_types)},
    )
    for index in range(workers):
        yield dg.DynamicOutput(list(shared_types), mapping_key=f"worker_{index}", output_name="steps")


@dg.op(
    retry_policy=TRANSIENT_RETRY,
    description="One worker, in this step's process, until no claimable task of its types is left.",
)
def drain_queue(
    context: dg.OpExecutionContext,
    task_types: list[str],
    database: DatabaseResource,
    site: SiteResource,
    fetcher: FetcherResource,
    scheduling: SchedulingResource,
) -> dg.Output[WorkerStats]:
    with transient_only():
        config = crawl_config(site, fetcher, scheduling)
        stats = drain(database.resolved_url(), config, task_types=tuple(task_types), workers=1)
    worker = f"{socket.gethostname()}:{os.getpid()}"
    context.log.info(f"worker {worker} drained its share: {stats.pages} pages")
    return dg.Output(stats, metadata={"worker": worker, "pages": stats.pages, "books_stored": stats.books_stored})


@dg.op(
    retry_policy=TRANSIENT_RETRY,
    description="Sum the drain steps' stats and record the materializations of the assets they changed.",
)
def report_crawl(
    context: dg.OpExecutionContext,
    config: ReportConfig,
    shared: SharedWork,
    drained: list[WorkerStats],
    database: DatabaseResource,
    site: SiteResource,
    fetcher: FetcherResource,
    scheduling: SchedulingResource,
) -> Iterator[dg.AssetMaterialization | dg.Output[Reported]]:
    stats = WorkerStats(worker_id="all")
    stats.merge(shared.first)
    for one in drained:
        stats.merge(one)
    with transient_only():
        url = database.resolved_url()
        opened = shared.crawl
        if config.settle_crawl is not None:
            with Database(url) as db:
                opened = find_crawl(db, config.settle_crawl)
            if opened is None:
                raise dg.Failure(f"settle_crawl: no crawl {config.settle_crawl} in the crawls table")
        crawl = Crawl(url, crawl_config(site, fetcher, scheduling), since=shared.since, opened=opened)
        crawl.quotas, crawl.seeded = shared.quotas, shared.seeded
        report = crawl.report(stats)
    for line in report.summary_lines():
        context.log.info(line)
    changed = {LISTING_DISCOVERY} if LISTING in shared.task_types else set()
    changed |= {BOOK_DETAILS} if DETAIL in shared.task_types else set()
    for result in materializations(report):
        if result.asset_key in changed:
            yield dg.AssetMaterialization(asset_key=result.asset_key, metadata=result.metadata)
    yield dg.Output(
        Reported(
            report.run.pages,
            listing=LISTING_DISCOVERY in changed,
            details=BOOK_DETAILS in changed,
            discovered=shared.crawl is not None,
            books_found=report.stats.books_found,
        ),
        metadata={"pages": report.run.pages, "drain_steps": len(drained), "elapsed_s": round(report.elapsed_s, 1)},
    )


@dg.op(description="Evaluate the checks of the assets the run materialized (a failed blocking check fails the run).")
def check_crawl(reported: Reported, database: DatabaseResource) -> Iterator[dg.AssetCheckEvaluation | dg.Output[None]]:
    if reported.listing:
        # found_books judges a discovery from the start page; a drain-only run started none.
        yield from listing_evaluations(database, reported.books_found if reported.discovered else None)
    if reported.details:
        yield from book_evaluations(database)
    yield dg.Output(None)


def queue_jobs(executor: str) -> list[dg.JobDefinition]:
    """``crawl_queue_job`` and ``drain_queue_job`` with their drain steps placed by ``executor``."""
    executor_def = step_executor(executor)

    @dg.job(
        name="crawl_queue_job",
        tags=CRAWL_RUN_TAGS,
        executor_def=executor_def,
        description="Seed the start page and drain the queue in one step per worker (no snapshot).",
    )
    def crawl_queue_job() -> None:
        shared, steps = share_work(seeded=seed_queue())
        check_crawl(report_crawl(shared=shared, drained=steps.map(drain_queue).collect()))

    @dg.job(
        name="drain_queue_job",
        tags=CRAWL_RUN_TAGS,
        executor_def=executor_def,
        description="Drain whatever is pending (after a requeue or an interrupted run), one step per worker.",
    )
    def drain_queue_job() -> None:
        shared, steps = share_work()
        check_crawl(report_crawl(shared=shared, drained=steps.map(drain_queue).collect()))

    return [crawl_queue_job, drain_queue_job]


@dg.definitions
def defs() -> dg.Definitions:
    """The queue jobs, with the executor the settings name when the code location loads."""
    return dg.Definitions(jobs=queue_jobs(load_settings().step_executor))
