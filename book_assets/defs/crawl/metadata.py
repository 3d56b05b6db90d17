"""The materialization metadata of the crawl's two assets, from the run's report (what the CLI prints).

The details asset (``book_details``, ``quotes/details``) carries the run's figures (records new, changed,
unchanged, pages, failures by reason), the table's counts (``dagster/row_count``), removals, a deep budget's
outcome, and what the crawl cost (``cost``: fetches, bytes, fetch wall time and parse CPU per page type,
category and fetch mode, with the workers' CPU and the bytes in all as figures the UI plots across runs); the
discovery asset the discovery's (pages, records found). Both carry the run's configuration and politeness.

The keys of the records' figures are in the site's record word (:attr:`~book_assets.sites.site.Site.record`,
:func:`record_key`): ``books_found``, ``books_new``, ``book_versions`` for books, ``authors_found``,
``authors_new``, ``author_versions`` for quotes.
"""

import dagster as dg

from book_assets.crawl.pipeline import CrawlReport, budget_line
from book_assets.crawl.stats import WorkerStats
from book_assets.defs.catalog import AssetMetadata, count_table
from book_assets.sites.site import Site
from book_assets.store.drift import WHOLE_CRAWL, Coverage


def record_key(site: Site, figure: str) -> str:
    """The metadata key of a figure of ``site``'s records, in its record word: ``record_key(books, "found")`` is
    ``books_found``, ``record_key(quotes, "found")`` ``authors_found``."""
    return f"{site.record}s_{figure}"


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


#: The cost table's columns after its key (page type, category, fetch mode): each a field of ``PageCost``.
COST_COLUMNS = (("fetches", "int"), ("bytes", "int"), ("fetch_s", "float"), ("parse_cpu_s", "float"))


def _cost_metadata(stats: WorkerStats) -> AssetMetadata:
    """What the crawl cost: a row per page type, category and fetch mode (the workers that reported; a
    lost worker's fetches are missing, ``workers_lost`` says how many), and the totals."""
    rows = [
        dg.TableRecord(
            {
                "page_type": page_type,
                "category": category,
                "fetch_mode": mode,
                **{name: round(getattr(cost, name), 4) for name, _ in COST_COLUMNS},
            }
        )
        for (page_type, category, mode), cost in sorted(stats.costs.items())
    ]
    columns = [dg.TableColumn(name, "string") for name in ("page_type", "category", "fetch_mode")]
    columns += [dg.TableColumn(name, kind) for name, kind in COST_COLUMNS]
    return {
        "cost": dg.MetadataValue.table(records=rows, schema=dg.TableSchema(columns=columns)),
        "bytes_fetched": sum(cost.bytes for cost in stats.costs.values()),
        "fetch_s": round(sum(cost.fetch_s for cost in stats.costs.values()), 1),
        "parse_cpu_s": round(sum(cost.parse_cpu_s for cost in stats.costs.values()), 2),
        # The worker processes' CPU (user and system) as each measured itself at its end.
        "worker_cpu_s": round(stats.cpu_s, 2),
        # The processes the workers started (the browsers: Chromium, Playwright's driver), which their own leaves out.
        "child_cpu_s": round(stats.child_cpu_s, 2),
    }


#: The columns of ``field_coverage``: a field's figures in this crawl and in the last good one.
COVERAGE_COLUMNS = (
    ("field", "string"),
    ("fill_rate", "float"),
    ("base_fill_rate", "float"),
    ("top_share", "float"),
    ("base_top_share", "float"),
    ("median_length", "int"),
    ("base_median_length", "int"),
    ("drifted", "bool"),
)


def _coverage_table(coverage: tuple[Coverage, ...]) -> dg.TableMetadataValue:
    """Each field's whole-crawl figures beside the last good crawl's: what the drift judgement compared, shown
    on a good day too (a fill rate the history shows)."""

    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 4)

    rows = [
        dg.TableRecord(
            {
                "field": c.field,
                "fill_rate": rounded(c.rate),
                "base_fill_rate": rounded(c.base_rate),
                "top_share": rounded(c.top_share),
                "base_top_share": rounded(c.base_top_share),
                "median_length": c.median_length,
                "base_median_length": c.base_median_length,
                "drifted": c.drifted,
            }
        )
        for c in sorted(coverage, key=lambda c: c.field)
        if c.category == WHOLE_CRAWL
    ]
    schema = dg.TableSchema(columns=[dg.TableColumn(name, kind) for name, kind in COVERAGE_COLUMNS])
    return dg.MetadataValue.table(records=rows, schema=schema)


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
    """The discovery asset's metadata of a crawl."""
    site = report.config.site
    return {
        "start_url": dg.MetadataValue.url(report.config.base_url),
        "seeded": report.seeded,
        "requeued": report.requeued,
        "listing_pages": report.run.listing_pages,
        record_key(site, "found"): report.run.books_found,
        "new_detail_tasks": report.run.new_detail_tasks,
        **_run_metadata(report),
    }


def details_metadata(report: CrawlReport) -> AssetMetadata:
    """The details asset's metadata of a crawl (with the deep budget's outcome when one was set)."""
    run, counts, site = report.run, report.counts, report.config.site
    metadata: AssetMetadata = {
        "dagster/row_count": counts["total"],
        record_key(site, "stored"): run.books_stored,
        record_key(site, "new"): run.books_new,
        record_key(site, "changed"): run.books_changed,
        record_key(site, "unchanged"): run.books_unchanged,
        "pages_not_modified": run.not_modified,
        "pages": run.pages,
        "pages_per_s": round(report.pages_per_s, 2),
        "workers": report.config.workers,
        record_key(site, "total"): counts["total"],
        "unique_urls": counts["unique_urls"],
        "with_raw_html": counts["with_html"],
        f"{site.record}_versions": counts.get("versions", 0),
        record_key(site, "by_category"): count_table(run.by_category, "category", f"{site.record}s stored this run"),
        "tasks_pruned": report.tasks_pruned,
        **_run_metadata(report),
        **_cost_metadata(report.stats),
    }
    if report.crawl_id is not None:  # the crawl the check no_field_drift judges, this run's own
        metadata["crawl_id"] = report.crawl_id
    if report.fields is not None:
        metadata["drifted_fields"] = len(report.drift)
        metadata["field_drift"] = dg.MetadataValue.md("\n".join(f"- {line.strip()}" for line in report.fields.lines()))
        metadata["field_coverage"] = _coverage_table(report.fields.coverage)
    if report.removals is not None:
        metadata[record_key(site, "removed")] = report.removals.removed
        metadata[record_key(site, "returned")] = report.removals.returned
        metadata["removals"] = report.removals.line()
    if report.budgets:
        metadata["quotas"] = count_table(report.quotas, "category", "quota")
        metadata["deep_budget"] = report.config.deep_budget
        metadata["budget_completed"] = sum(b.completed for b in report.budgets)
        metadata["budget_failed"] = sum(b.failed for b in report.budgets)
        metadata["budget_met"] = all(b.met for b in report.budgets)
        metadata["budget_status"] = budget_line(report.budgets)
    return metadata
