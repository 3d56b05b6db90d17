"""The two crawl passes as assets: ``listing_discovery`` (shallow) then ``book_details`` (deep).

Each asset is one call into :mod:`book_assets.crawl.pipeline`; the queue holds the work, the worker processes
(spawned by ``drain``, not one Dagster step per URL) do it, and the asset reports what happened. Single pages
are retried by the queue; the step's :data:`NETWORK_RETRY` only re-runs a step that failed as a whole
(a lost database, a crashed browser pool), and a re-run resumes the same queue instead of starting over.
"""

import time
from collections.abc import Mapping

import dagster as dg

from book_assets.crawl.config import DETAIL, LISTING, CrawlConfig
from book_assets.crawl.pipeline import apply_budget, budget_line, decisions, drain, failed_by_reason, prepare, seed
from book_assets.crawl.storage import book_counts
from book_assets.crawl.worker import WorkerStats, make_queue
from book_assets.db.connection import Database
from book_assets.defs.resources import (
    DatabaseResource,
    FetcherResource,
    SchedulingResource,
    SiteResource,
    crawl_config,
)

GROUP = "crawl"
#: Run tag of every run that drains the crawl queue; dagster.yaml allows one such run at a time.
CRAWL_TAG = "book-pipeline/crawl"
CRAWL_RUN_TAGS = {CRAWL_TAG: "true"}

#: For steps that touch the network: a few tries, exponentially spaced, jittered so retries do not align.
NETWORK_RETRY = dg.RetryPolicy(max_retries=3, delay=10, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS)


def counter_table(counts: Mapping[str, int], key: str, value: str) -> dg.MetadataValue:
    """A two-column Markdown table, largest first."""
    rows = [f"| {key} | {value} |", "|---|---:|"]
    rows += [f"| {name} | {n} |" for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    if len(rows) == 2:
        rows.append("| (none) | 0 |")
    return dg.MetadataValue.md("\n".join(rows))


def fetch_metadata(db: Database, config: CrawlConfig, stats: WorkerStats) -> dict[str, object]:
    """Adaptive mode: pages rendered vs fetched plain, disagreements, and the decision per page type."""
    found = decisions(db, config)
    if not found:
        return {}
    rows = ["| domain | page type | mode | rendered | plain | agreed | disagreed |", "|---|---|---|" + "---:|" * 4]
    rows += [
        f"| {d.domain} | {d.page_type} | {d.mode} | {d.rendered} | {d.plain} | {d.agreements} | {d.disagreements} |"
        for d in found
    ]
    return {
        "pages_rendered": stats.rendered,
        "pages_plain": stats.plain,
        "pages_compared": stats.checked,
        "disagreements": stats.disagreements,
        "fetch_decisions": dg.MetadataValue.md("\n".join(rows)),
    }


@dg.asset(
    group_name=GROUP,
    kinds={"python", "postgres"},
    retry_policy=NETWORK_RETRY,
    description="Shallow pass: seed the start page and follow every listing page, enqueueing one detail task per book.",
)
def listing_discovery(
    context: dg.AssetExecutionContext,
    database: DatabaseResource,
    site: SiteResource,
    fetcher: FetcherResource,
    scheduling: SchedulingResource,
) -> dg.MaterializeResult:
    config = crawl_config(site, fetcher, scheduling)
    url = database.resolved_url()
    context.log.info(
        f"discovering {config.base_url} into {database.masked_url()} "
        f"({config.fetch.mode}, {config.workers} workers x {config.fetch.concurrency} pages, rate {config.rate}s)"
    )
    with database.open() as db:
        prepare(db, config)
        seeded = seed(db, config)
    stats = drain(url, config, task_types=(LISTING,), workers=config.workers)
    with database.open() as db:
        failures = failed_by_reason(db, config)
        fetching = fetch_metadata(db, config, stats)
    return dg.MaterializeResult(
        metadata={
            "start_url": dg.MetadataValue.url(config.base_url),
            "seeded": seeded,
            "listing_pages": stats.listing_pages,
            "books_found": stats.books_found,
            "new_detail_tasks": stats.new_detail_tasks,
            "failed": stats.failed,
            "retried": stats.retried,
            "failed_tasks_by_reason": counter_table(failures, "reason", "failed tasks"),
            "elapsed_s": round(stats.elapsed_s, 1),
            **fetching,
        }
    )


@dg.asset(
    group_name=GROUP,
    kinds={"python", "postgres"},
    deps=[listing_discovery],
    retry_policy=NETWORK_RETRY,
    description="Deep pass: W worker processes fetch every pending detail task and store validated books.",
)
def book_details(
    context: dg.AssetExecutionContext,
    database: DatabaseResource,
    site: SiteResource,
    fetcher: FetcherResource,
    scheduling: SchedulingResource,
) -> dg.MaterializeResult:
    config = crawl_config(site, fetcher, scheduling)
    url = database.resolved_url()
    started = time.monotonic()
    quotas: dict[str, int] = {}
    if config.deep_budget is not None:
        with database.open() as db:
            quotas = apply_budget(db, config)
        context.log.info(f"deep budget {config.deep_budget} split over {len(quotas)} categories")
    stats = drain(url, config, task_types=(DETAIL,), workers=config.workers)
    elapsed = time.monotonic() - started
    with database.open() as db:
        counts = book_counts(db)
        failures = failed_by_reason(db, config)
        fetching = fetch_metadata(db, config, stats)
    metadata: dict[str, object] = {
        "dagster/row_count": counts["total"],
        "books_stored": stats.books_stored,
        "books_new": stats.books_new,
        "books_changed": stats.books_changed,
        "books_unchanged": stats.books_unchanged,
        "failed": stats.failed,
        "retried": stats.retried,
        "pages": stats.pages,
        "pages_per_s": round(stats.pages / elapsed, 2) if elapsed > 0 else 0.0,
        "elapsed_s": round(elapsed, 1),
        "workers": config.workers,
        "books_total": counts["total"],
        "unique_urls": counts["unique_urls"],
        "with_raw_html": counts["with_html"],
        "book_versions": counts.get("versions", 0),
        "books_by_category": counter_table(stats.by_category, "category", "books stored this run"),
        "failed_tasks_by_reason": counter_table(failures, "reason", "failed tasks"),
        **fetching,
    }
    if quotas:
        metadata["quotas"] = counter_table(quotas, "category", "quota")
        with database.open() as db:
            budgets = make_queue(db, config).budget_report(DETAIL)
        metadata["deep_budget"] = config.deep_budget
        metadata["budget_completed"] = sum(b.completed for b in budgets)
        metadata["budget_failed"] = sum(b.failed for b in budgets)
        metadata["budget_met"] = all(b.met for b in budgets)
        metadata["budget_status"] = budget_line(budgets)
    return dg.MaterializeResult(metadata=metadata)
