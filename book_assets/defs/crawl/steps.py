"""The steps of the crawl's graph: ``seed_queue`` → ``share_work`` → ``drain_queue`` × N → ``report_crawl``.

Each step is one call of the crawl's composition (:mod:`book_assets.crawl.pipeline`), the one the CLI makes,
and hands on the run's one value (:class:`~book_assets.crawl.pipeline.CrawlRun`): ``seed_queue`` resolves the
crawl's configuration from the resources and the run's config and begins the run (or requeues the failures,
or only marks the start of a drain-only run), ``share_work`` does what must come before the split (a deep
budget's discovery, which sets the run's quotas) and fans out the drain steps, each ``drain_queue`` runs its
share of the workers until the queue has nothing left it may claim, and ``report_crawl`` finishes the run
(:func:`~book_assets.crawl.pipeline.finish`) and emits the assets' outputs, whose metadata is the
materialization's (:mod:`book_assets.defs.crawl.assets`). No step after the first resolves the configuration
again: steps on other hosts, in other environments, crawl as the run began. Dagster keeps every step's output
(its IO manager pickles it to storage), so the run value holds no credentials: each step that connects takes
the database's URL from its ``database`` resource, never from its inputs.

A drain step that fails (its workers all died, the database refused it) hands its error on instead of
raising: Dagster would otherwise skip the report, and the books the other steps (or the failed one, before it
failed) wrote would be recorded nowhere. The report then records ``book_details`` as it is, marked
``partial`` with the steps' errors, and the blocking check ``crawl_complete`` fails: the run fails and the
publishing automation does not build on an incomplete crawl. A transient error is still raised while the
step's retries last: a retried step resumes the same queue. A step of a run that is being terminated asks
for no retry (:func:`~book_assets.defs.retries.stop_on_termination`): it stops, and the run is canceled.

``seed_queue`` and ``share_work`` are in the ``crawl`` pool, one slot: seeding, and the discovery a deep budget
runs before the split, happen one crawl at a time. The drain steps are in no pool, since a pool's one slot
would run them one at a time; workers of two runs draining one queue at once are what workers on several
hosts always are: politeness and budgets are held in the database, per domain and per group.
"""

import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass, replace

import dagster as dg
from pydantic import Field

from book_assets import logs
from book_assets.crawl.config import make_queue
from book_assets.crawl.pipeline import CrawlRun, begin, begin_retry, drain, finish, join, split_before_details
from book_assets.crawl.stats import WorkerFigures, WorkerStats
from book_assets.db.connection import Database
from book_assets.defs.catalog import CRAWL_POOL, AssetMetadata, crawl_keys
from book_assets.defs.crawl.metadata import details_metadata, listing_metadata, record_key
from book_assets.defs.resources import (
    CrawlRunConfig,
    DatabaseResource,
    FetcherResource,
    SchedulingResource,
    SiteResource,
    crawl_config,
)
from book_assets.defs.retries import (
    TRANSIENT_RETRY,
    is_transient,
    run_is_stopping,
    stop_on_termination,
    transient_only,
)
from book_assets.store.lifecycle import find_crawl


class CrawlStepsConfig(CrawlRunConfig):
    """The crawl graph's run config: the settings a run may override (:class:`CrawlRunConfig`) and the shape of
    the run (seed or not, the task types, the drain steps, a crawl to settle)."""

    seed: bool = Field(
        default=True,
        description="Open a crawl and enqueue the start page; off: drain what is pending (after a requeue or "
        "an interrupted run), listing_discovery not materialized.",
    )
    task_types: list[str] | None = Field(
        default=None,
        description="Task types to work on (books: listing, detail); unset: every page kind of the catalogue.",
    )
    step_per_worker: bool = Field(
        default=False,
        description="One drain step per worker (W: the fetcher's workers), each placed by the executor; off: "
        "one drain step that runs the W workers as processes of its own.",
    )
    settle_crawl: int | None = Field(
        default=None,
        description="Settle this crawl (its id in the crawls table): one whose run was interrupted before it "
        "reported. Unset: the crawl this run opened, or none.",
    )


class StepConfig(CrawlStepsConfig):
    """A step's config: the graph's, and the catalogue the graph crawls (its config mapping sets it)."""

    site: str | None = Field(
        default=None,
        description="The catalogue the run crawls, set by its crawl graph (the asset's site); unset: the site "
        "resource's, or the site setting's.",
    )


@dataclass(frozen=True)
class Share:
    """One drain step's share: the run, the task types the step works on and its worker processes."""

    run: CrawlRun
    task_types: tuple[str, ...]
    workers: int


@dataclass(frozen=True)
class SharedWork:
    """What ``share_work`` hands to ``report_crawl``: the run (its quotas set), the task types the run works
    on, and what came before the split."""

    run: CrawlRun
    task_types: tuple[str, ...]
    first: WorkerStats


@dataclass(frozen=True)
class Drained:
    """What one drain step did: its workers' stats, where it ran, and its error when it failed."""

    stats: WorkerStats
    worker: str
    error: str | None = None


def shares(run: CrawlRun, task_types: tuple[str, ...], *, step_per_worker: bool) -> list[Share]:
    """The drain steps' shares of the run's workers: one worker each, or one step with all of them."""
    workers = run.config.workers
    if step_per_worker:
        return [Share(run, task_types, 1) for _ in range(workers)]
    return [Share(run, task_types, workers)]


@dg.op(
    retry_policy=TRANSIENT_RETRY,
    pool=CRAWL_POOL,
    description="Resolve the crawl's configuration and begin the run: open the crawl (store its politeness and "
    "weights, enqueue the start page), or requeue the failures, or nothing more in a drain-only run.",
)
def seed_queue(
    context: dg.OpExecutionContext,
    config: StepConfig,
    database: DatabaseResource,
    site: SiteResource,
    fetcher: FetcherResource,
    scheduling: SchedulingResource,
) -> dg.Output[CrawlRun]:
    with transient_only(context):
        resolved = crawl_config(site, fetcher, scheduling, config)
        url = database.resolved_url()
        context.log.info(f"crawling {resolved.base_url} into {database.masked_url()}")
        if config.requeue_failed:
            run = begin_retry(url, resolved, include_permanent=config.include_permanent)
            context.log.info(f"requeued {run.requeued} failed task(s)")
            return dg.Output(run, metadata={"requeued": run.requeued})
        if not config.seed:
            return dg.Output(join(url, resolved), metadata={"seeded": False})
        run = begin(url, resolved, run_id=context.run_id)
    assert run.opened is not None
    context.log.info(f"seeded {resolved.base_url}" if run.seeded else f"{resolved.base_url} is already queued")
    return dg.Output(run, metadata={"start_url": resolved.base_url, "created": run.seeded, "crawl": run.opened.id})


@dg.op(
    out={"shared": dg.Out(), "steps": dg.DynamicOut()},
    retry_policy=TRANSIENT_RETRY,
    pool=CRAWL_POOL,
    description="Do what must come before the split (a deep budget's discovery), then fan out the drain steps.",
)
def share_work(
    context: dg.OpExecutionContext, config: StepConfig, database: DatabaseResource, run: CrawlRun
) -> Iterator[dg.Output[SharedWork] | dg.DynamicOutput[Share]]:
    task_types = tuple(config.task_types) if config.task_types else run.config.task_types
    with transient_only(context), logs.run_id(context.run_id):
        run, first, shared_types = split_before_details(database.resolved_url(), run, task_types, workers=1)
    split = shares(run, shared_types, step_per_worker=config.step_per_worker)
    context.log.info(f"{len(split)} drain step(s) share the {', '.join(shared_types)} tasks")
    yield dg.Output(
        SharedWork(run, task_types, first),
        output_name="shared",
        metadata={"drain_steps": len(split), "shared_task_types": ", ".join(shared_types)},
    )
    for index, share in enumerate(split):
        yield dg.DynamicOutput(share, mapping_key=f"worker_{index}", output_name="steps")


@dg.op(
    retry_policy=TRANSIENT_RETRY,
    description="Run this step's workers until no claimable task of its types is left.",
)
def drain_queue(context: dg.OpExecutionContext, database: DatabaseResource, share: Share) -> dg.Output[Drained]:
    worker = f"{socket.gethostname()}:{os.getpid()}"
    # A terminated run's drain stops (its workers released their tasks); the workers' lines carry the run id.
    with stop_on_termination(context), logs.run_id(context.run_id):
        try:
            stats = drain(database.resolved_url(), share.run.config, task_types=share.task_types, workers=share.workers)
        except Exception as exc:
            if is_transient(exc) and context.retry_number < TRANSIENT_RETRY.max_retries:
                raise  # the step's retry policy runs it again: a retried step resumes the same queue
            error = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
            context.log.error(f"drain step {worker} failed, handed to the report: {error}")
            return dg.Output(
                Drained(WorkerStats(worker_id=worker), worker, error), metadata={"worker": worker, "error": error}
            )
        if run_is_stopping(context):
            # The drain stopped early: a one-worker drain runs its worker in this process, whose signal handlers
            # take the interrupt as a stop. Its share is not drained, so the step does not end as a success.
            raise dg.DagsterExecutionInterruptedError()
    with database.open() as db:
        done = WorkerFigures.read(make_queue(db, share.run.config), stats)
    context.log.info(f"{worker} drained its share: {done.pages} pages")
    stored = record_key(share.run.config.site, "stored")
    return dg.Output(Drained(stats, worker), metadata={"worker": worker, "pages": done.pages, stored: done.books})


@dg.op(
    out={
        "listing_discovery": dg.Out(dg.Nothing, is_required=False),
        "book_details": dg.Out(dg.Nothing, is_required=False),
    },
    retry_policy=TRANSIENT_RETRY,
    description="Read what the run did from the database and record the assets it changed.",
)
def report_crawl(
    context: dg.OpExecutionContext,
    config: StepConfig,
    database: DatabaseResource,
    shared: SharedWork,
    drained: list[Drained],
) -> Iterator[dg.Output[None]]:
    stats = WorkerStats(worker_id="all")
    stats.merge(shared.first)
    for one in drained:
        stats.merge(one.stats)
    errors = [f"{one.worker}: {one.error}" for one in drained if one.error is not None]
    run = shared.run
    with transient_only(context):
        url = database.resolved_url()
        if config.settle_crawl is not None:
            with Database(url) as db:
                settling = find_crawl(db, config.settle_crawl)
            if settling is None:
                raise dg.Failure(f"settle_crawl: no crawl {config.settle_crawl} in the crawls table")
            run = replace(run, opened=settling)
        report = finish(url, run, stats)
    for line in report.summary_lines():
        context.log.info(line)
    if report.failure and not errors and not report.drift:
        # Every task failed: no materialization for the snapshot to build on, and no retry of the step (the
        # queue retried its pages already). A drifted crawl is materialized even so (a redesign that hides a
        # required field fails every page): its blocking check no_field_drift holds the day, and clears once
        # the drift is accepted or a fixed parser's reextract rebuilds the pages.
        raise dg.Failure(description=report.failure, metadata=details_metadata(report), allow_retries=False)
    crawled = shared.run.config
    listed = set(crawled.listing_kinds) & set(shared.task_types)
    if listed and shared.run.opened is not None and not errors:  # this run opened a crawl
        yield dg.Output(None, output_name="listing_discovery", metadata=listing_metadata(report))
    if crawled.detail_kind in shared.task_types or errors:
        partial: AssetMetadata = {
            "partial": bool(errors),
            "failed_drain_steps": len(errors),
            "drain_steps": len(drained),
        }
        if errors:
            partial["drain_errors"] = dg.MetadataValue.md("\n".join(f"- {e}" for e in errors))
            details = crawl_keys(crawled.site.name).details.to_user_string()
            context.log.error(f"{len(errors)} of {len(drained)} drain step(s) failed: {details} is partial")
        yield dg.Output(None, output_name="book_details", metadata={**details_metadata(report), **partial})
