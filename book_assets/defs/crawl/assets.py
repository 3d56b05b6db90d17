"""The crawl as one Dagster step that materializes its two assets: ``listing_discovery`` and ``book_details``.

The step is one call of the crawl's composition (:class:`book_assets.crawl.pipeline.Crawl`), the same the CLI
makes, so Dagster interleaves listing and detail pages as the CLI does and reports the same counts. The queue
holds the work and the worker processes (spawned by the drain, not one Dagster step per URL) do it. Single
pages are retried by the queue; the step's retry policy only re-runs a step that failed as a whole for a
transient reason, and a re-run resumes the same queue instead of starting over.
"""

from collections.abc import Iterator

import dagster as dg

from book_assets.crawl.pipeline import Crawl, CrawlReport, budget_line
from book_assets.defs.catalog import (
    BOOKS_SCHEMA,
    BOOKS_TABLE,
    CRAWL_POOL,
    OWNERS,
    AssetMetadata,
    count_table,
    tags_for,
)
from book_assets.defs.resources import (
    CrawlRunConfig,
    DatabaseResource,
    FetcherResource,
    SchedulingResource,
    SiteResource,
    crawl_config,
)
from book_assets.defs.retries import TRANSIENT_RETRY, transient_only

GROUP = "crawl"
#: Run tag of every run that drains the crawl queue.
CRAWL_TAG = "book-pipeline/crawl"
#: A crawl run that outlives most of a day is stuck (a daily job's next run is due): run monitoring cancels it.
CRAWL_MAX_RUNTIME_S = 20 * 3600
CRAWL_RUN_TAGS = {CRAWL_TAG: "true", "dagster/max_runtime": str(CRAWL_MAX_RUNTIME_S)}
LISTING_DISCOVERY = dg.AssetKey("listing_discovery")
BOOK_DETAILS = dg.AssetKey("book_details")


def _fetch_metadata(report: CrawlReport) -> AssetMetadata:
    """Adaptive mode: pages rendered vs fetched plain, disagreements, and the decision per page type."""
    if not report.decisions:
        return {}
    stats = report.stats
    rows = ["| domain | page type | mode | rendered | plain | agreed | disagreed |", "|---|---|---|" + "---:|" * 4]
    rows += [
        f"| {d.domain} | {d.page_type} | {d.mode} | {d.rendered} | {d.plain} | {d.agreements} | {d.disagreements} |"
        for d in report.decisions
    ]
    return {
        "pages_rendered": stats.rendered,
        "pages_plain": stats.plain,
        "pages_compared": stats.checked,
        "disagreements": stats.disagreements,
        "browsers_started": stats.browsers,
        "fetch_decisions": dg.MetadataValue.md("\n".join(rows)),
    }


def _run_metadata(report: CrawlReport) -> AssetMetadata:
    """What both assets record: the run's configuration, failures and lost workers."""
    return {
        "config": dg.MetadataValue.json(report.config.as_dict()),
        "failed": report.run.failed,
        "retried": report.run.retries,
        "failed_tasks_by_reason": count_table(report.failed_by_reason, "reason", "failed tasks"),
        "workers_lost": len(report.stats.lost_workers),
        "elapsed_s": round(report.elapsed_s, 1),
        # robots.txt (disallowed URLs, Crawl-delay applied) and AutoThrottle's interval at the end
        "politeness": dg.MetadataValue.md("\n".join(f"- {line.strip()}" for line in report.politeness_lines())),
        **_fetch_metadata(report),
    }


def listing_metadata(report: CrawlReport) -> AssetMetadata:
    """``listing_discovery``'s metadata of a crawl."""
    return {
        "start_url": dg.MetadataValue.url(report.config.base_url),
        "seeded": report.seeded,
        "requeued": report.requeued,
        "listing_pages": report.run.listing_pages,
        "books_found": report.stats.books_found,
        "new_detail_tasks": report.run.new_detail_tasks,
        **_run_metadata(report),
    }


def details_metadata(report: CrawlReport) -> AssetMetadata:
    """``book_details``' metadata of a crawl (with the deep budget's outcome when one was set)."""
    run, counts = report.run, report.counts
    metadata: AssetMetadata = {
        "dagster/row_count": counts["total"],
        "books_stored": run.books_stored,
        "books_new": run.books_new,
        "books_changed": run.books_changed,
        "books_unchanged": run.books_unchanged,
        "pages_not_modified": run.not_modified,
        "pages": run.pages,
        "pages_per_s": round(report.pages_per_s, 2),
        "workers": report.config.workers,
        "books_total": counts["total"],
        "unique_urls": counts["unique_urls"],
        "with_raw_html": counts["with_html"],
        "book_versions": counts.get("versions", 0),
        "books_by_category": count_table(run.by_category, "category", "books stored this run"),
        "tasks_pruned": report.tasks_pruned,
        **_run_metadata(report),
    }
    if report.removals is not None:
        metadata["books_removed"] = report.removals.removed
        metadata["books_returned"] = report.removals.returned
        metadata["removals"] = report.removals.line()
    if report.budgets:
        metadata["quotas"] = count_table(report.quotas, "category", "quota")
        metadata["deep_budget"] = report.config.deep_budget
        metadata["budget_completed"] = sum(b.completed for b in report.budgets)
        metadata["budget_failed"] = sum(b.failed for b in report.budgets)
        metadata["budget_met"] = all(b.met for b in report.budgets)
        metadata["budget_status"] = budget_line(report.budgets)
    return metadata


def materializations(report: CrawlReport, *, discovered: bool = True) -> Iterator[dg.MaterializeResult[None]]:
    """The assets' results of one crawl (``listing_discovery`` only when it ``discovered``): what the asset
    step and the queue ops both record. A failed run raises instead, with what it did: no materialization
    for the snapshot to build on, and no retry of the step (the queue retried its pages already)."""
    if report.failure:
        raise dg.Failure(description=report.failure, metadata=details_metadata(report), allow_retries=False)
    if discovered:
        yield dg.MaterializeResult(asset_key=LISTING_DISCOVERY, metadata=listing_metadata(report))
    yield dg.MaterializeResult(asset_key=BOOK_DETAILS, metadata=details_metadata(report))


@dg.multi_asset(
    name="crawl",
    specs=[
        dg.AssetSpec(
            LISTING_DISCOVERY,
            # Not materialized by a retry of the failures, which follows no listing page.
            skippable=True,
            group_name=GROUP,
            kinds={"python", "postgres"},
            owners=OWNERS,
            tags=tags_for("crawl"),
            description="Shallow pass: the start page and every listing page, one detail task per book found.",
        ),
        dg.AssetSpec(
            BOOK_DETAILS,
            group_name=GROUP,
            kinds={"python", "postgres"},
            owners=OWNERS,
            tags=tags_for("crawl"),
            metadata={"dagster/table_name": BOOKS_TABLE, "dagster/column_schema": BOOKS_SCHEMA},
            deps=[LISTING_DISCOVERY],
            description="Deep pass: every pending detail page fetched, validated and stored as a book.",
        ),
    ],
    retry_policy=TRANSIENT_RETRY,
    pool=CRAWL_POOL,
    description="One crawl: W worker processes drain the queue, listing and detail pages interleaved.",
)
def crawl(
    context: dg.AssetExecutionContext,
    config: CrawlRunConfig,
    database: DatabaseResource,
    site: SiteResource,
    fetcher: FetcherResource,
    scheduling: SchedulingResource,
) -> Iterator[dg.MaterializeResult[None]]:
    with transient_only():
        resolved = crawl_config(site, fetcher, scheduling, config)
        context.log.info(f"crawling {resolved.base_url} into {database.masked_url()}")
        this_crawl = Crawl(database.resolved_url(), resolved)
        if config.requeue_failed:
            report = this_crawl.retry_failed(include_permanent=config.include_permanent)
        else:
            report = this_crawl.run()
    for line in report.summary_lines():
        context.log.info(line)
    yield from materializations(report, discovered=not config.requeue_failed)
