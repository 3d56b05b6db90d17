"""Checks of the crawl assets.

``book_details``: the three counts (books, unique URLs, with raw HTML) and what they miss. Each check is one
named query of ``book_assets/sql/checks.sql`` returning the offending row count, the rows looked at and a
sample of offending URLs. All four guard against corrupt data, so they are ERROR and blocking: a failure
stops the snapshot from being built on top of it.

``listing_discovery``: the pass found books (ERROR, blocking), and no listing page ended dead-lettered (WARN:
the books behind a failed listing page are missing, the rest are sound). A crawl that found nothing fails its
run, so the failure alert fires; as the crawl's report materializes both passes at once, the block stops only what
runs on ``listing_discovery`` after that step, not ``book_details``. The count of
books found is the discovery's own materialization metadata; the failures are the queue's dead-lettered
listing tasks, by error kind.

``crawl_complete``, ``found_books`` and ``no_field_drift`` judge the materialization of their own run
(:func:`materialization_judged`): two crawl runs can overlap, and the instance's latest materialization may
be the other run's. A run of the checks alone (after an operator's fix) judges the latest one; each result
names the run it judged.

``crawl_complete`` (blocking): a run whose drain step failed records what it wrote marked partial
(:mod:`book_assets.defs.crawl.steps`), and this check fails it.

``no_field_drift`` (blocking) reads the crawl of the judged materialization of ``book_details`` (its
``crawl_id``) and fails while a field of that crawl drifted and no operator accepted it
(:mod:`book_assets.store.drift`): the run fails, which alerts (``alert_sensor`` names the check), nothing
downstream publishes and the last good snapshot stays the current one. ``book-pipeline drift accept`` records
the acceptance (or ``reextract`` resolves the drift); ``drift_cleared_sensor`` then runs the check again
(``recheck_drift_job``), it passes, and the day's publishing follows.

Every job that materializes the crawl asset (the full refresh, the retry of the failures, the queue jobs) runs
these checks as steps after the crawl's report.
"""

from dataclasses import dataclass

import dagster as dg

from book_assets.crawl.config import DETAIL, LISTING, make_queue
from book_assets.defs.catalog import crawl_keys
from book_assets.defs.resources import DatabaseResource
from book_assets.defs.retries import TRANSIENT_RETRY, transient_only
from book_assets.settings import default
from book_assets.sql import load_queries
from book_assets.store.drift import unaccepted_drift

Q = load_queries("checks")
BOOKS_KEYS = crawl_keys(default("site"))
LISTING_DISCOVERY = BOOKS_KEYS.listing_discovery
BOOK_DETAILS = BOOKS_KEYS.details


def run_check(database: DatabaseResource, query: str, rule: str) -> dg.AssetCheckResult:
    """The result of one ``bad / total / sample`` query: passed when no row breaks ``rule``."""
    with transient_only(None), database.open(application_name="book-pipeline checks") as db:
        row = db.query(Q[query])[0]
    bad, total = int(row["bad"]), int(row["total"])
    sample = list(row["sample"] or [])
    return dg.AssetCheckResult(
        passed=bad == 0,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"{bad} of {total} books break the rule: {rule}" if bad else f"all {total} books: {rule}",
        metadata={
            "offending_rows": bad,
            "books_checked": total,
            "sample": dg.MetadataValue.md("\n".join(f"- {url}" for url in sample) or "(none)"),
        },
    )


#: Each blocking check of ``book_details``: its query and the rule it holds.
BOOK_RULES = {
    "unique_urls": ("duplicate_urls", "one row per URL"),
    "raw_html_present": ("missing_raw_html", "raw HTML stored"),
    "no_error_pages": ("error_pages_stored", "a product page served with HTTP 200"),
    "required_fields_present": ("missing_required_fields", "title, price, UPC and category present"),
}


@dg.asset_check(
    asset=BOOK_DETAILS, blocking=True, retry_policy=TRANSIENT_RETRY, description="No book URL is stored twice."
)
def unique_urls(database: DatabaseResource) -> dg.AssetCheckResult:
    return run_check(database, *BOOK_RULES["unique_urls"])


@dg.asset_check(
    asset=BOOK_DETAILS,
    blocking=True,
    retry_policy=TRANSIENT_RETRY,
    description="Every stored book keeps the raw HTML of its page.",
)
def raw_html_present(database: DatabaseResource) -> dg.AssetCheckResult:
    return run_check(database, *BOOK_RULES["raw_html_present"])


@dg.asset_check(
    asset=BOOK_DETAILS,
    blocking=True,
    retry_policy=TRANSIENT_RETRY,
    description="No error page was stored as a book: product block present, real title, HTTP 200.",
)
def no_error_pages(database: DatabaseResource) -> dg.AssetCheckResult:
    return run_check(database, *BOOK_RULES["no_error_pages"])


@dg.asset_check(
    asset=BOOK_DETAILS,
    blocking=True,
    retry_policy=TRANSIENT_RETRY,
    description="Title, price, UPC and category are present on every book.",
)
def required_fields_present(database: DatabaseResource) -> dg.AssetCheckResult:
    return run_check(database, *BOOK_RULES["required_fields_present"])


@dg.asset_check(
    asset=BOOK_DETAILS,
    blocking=True,
    retry_policy=TRANSIENT_RETRY,
    description="The run's crawl ran to its end: no drain step failed (a partial crawl is recorded, not published).",
)
def crawl_complete(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    judged = materialization_judged(context, BOOK_DETAILS)
    metadata = judged.materialization.metadata if judged.materialization is not None else {}
    failed = metadata.get("failed_drain_steps")
    failed_steps = int(str(failed.value)) if failed is not None else 0
    steps = metadata.get("drain_steps")
    errors = metadata.get("drain_errors")
    return dg.AssetCheckResult(
        passed=failed_steps == 0,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"{failed_steps} drain step(s) failed: the books stored are a partial crawl"
        if failed_steps
        else "every drain step ran to its end",
        metadata={
            "failed_drain_steps": failed_steps,
            "drain_steps": int(str(steps.value)) if steps is not None else 0,
            "drain_errors": errors if errors is not None else dg.MetadataValue.md("(none)"),
            **judged.metadata(),
        },
    )


@dataclass(frozen=True)
class Judged:
    """The materialization a check judges, the run that recorded it, and which one it is (for the result)."""

    materialization: dg.AssetMaterialization | None
    run_id: str | None
    source: str

    def metadata(self) -> dict[str, str]:
        return {"judged_run": self.run_id or "", "source": self.source}


def materialization_judged(context: dg.AssetCheckExecutionContext, key: dg.AssetKey) -> Judged:
    """The materialization of ``key`` a check judges: its own run's (never another run's, which may be a later
    crawl's), else the latest one (a run of the checks alone, after an operator's fix or acceptance)."""
    run_id = context.run.run_id
    records = context.instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records
    ours = [r.asset_materialization for r in records if r.asset_materialization is not None]
    materializations = [m for m in ours if m.asset_key == key]
    if materializations:
        return Judged(materializations[-1], run_id, "this run's materialization")
    event = context.instance.get_latest_materialization_event(key)
    if event is None:
        return Judged(None, None, "no materialization")
    return Judged(event.asset_materialization, event.run_id, "the latest materialization")


def crawl_of_the_run(context: dg.AssetCheckExecutionContext) -> tuple[int | None, str]:
    """The crawl whose books the check judges (the ``crawl_id`` of the judged materialization of
    ``book_details``), and where its id was read."""
    judged = materialization_judged(context, BOOK_DETAILS)
    found = judged.materialization.metadata.get("crawl_id") if judged.materialization is not None else None
    return (int(str(found.value)) if found is not None else None), judged.source


@dg.asset_check(
    asset=BOOK_DETAILS,
    blocking=True,
    retry_policy=TRANSIENT_RETRY,
    description="No field of the crawl drifted (its fill rate fell past drift_threshold, or its values' shape moved "
    "past drift_length_ratio or drift_top_share, against the last good crawl) unless an operator accepted it: the "
    "books keep their last good values until then.",
)
def no_field_drift(context: dg.AssetCheckExecutionContext, database: DatabaseResource) -> dg.AssetCheckResult:
    crawl_id, source = crawl_of_the_run(context)
    if crawl_id is None:
        return dg.AssetCheckResult(
            passed=True,
            severity=dg.AssetCheckSeverity.ERROR,
            description=f"no crawl to judge ({source} names none: a drain-only run or a retry of the failures)",
        )
    with transient_only(context.op_execution_context), database.open(application_name="book-pipeline checks") as db:
        drifts = unaccepted_drift(db, crawl_id)
    lines = [row.line() for row in drifts]
    return dg.AssetCheckResult(
        passed=not drifts,
        severity=dg.AssetCheckSeverity.ERROR,
        description=(
            f"field drift in crawl {crawl_id}: " + "; ".join(lines)
            if drifts
            else f"no field drifted in crawl {crawl_id} (or every drift was accepted)"
        ),
        metadata={
            "crawl_id": crawl_id,
            "source": source,
            "drifted_fields": len({row.field for row in drifts}),
            "drift": dg.MetadataValue.md("\n".join(f"- {line}" for line in lines) or "(none)"),
        },
    )


def books_found_by_discovery(context: dg.AssetCheckExecutionContext, database: DatabaseResource) -> tuple[int, str]:
    """Books the judged discovery found (its ``books_found`` metadata), else the detail tasks the queue holds."""
    judged = materialization_judged(context, LISTING_DISCOVERY)
    found = judged.materialization.metadata.get("books_found") if judged.materialization is not None else None
    if found is not None:
        return int(str(found.value)), f"books_found of {judged.source} (run {(judged.run_id or '')[:8]})"
    with transient_only(context.op_execution_context), database.open(application_name="book-pipeline checks") as db:
        counts = make_queue(db).stats().counts
    return sum(counts.get(DETAIL, {}).values()), "detail tasks in the queue"


@dg.asset_check(
    asset=LISTING_DISCOVERY,
    retry_policy=TRANSIENT_RETRY,
    blocking=True,
    description="The listing pass found at least one book (a detail pass over nothing would publish stale data).",
)
def found_books(context: dg.AssetCheckExecutionContext, database: DatabaseResource) -> dg.AssetCheckResult:
    return found_books_result(*books_found_by_discovery(context, database))


def found_books_result(found: int, source: str) -> dg.AssetCheckResult:
    """``found_books`` of a discovery that found ``found`` books (as ``source`` says)."""
    return dg.AssetCheckResult(
        passed=found > 0,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"{found} books found ({source})" if found else f"no book found ({source})",
        metadata={"books_found": found, "source": source},
    )


@dg.asset_check(
    asset=LISTING_DISCOVERY,
    retry_policy=TRANSIENT_RETRY,
    description="No listing page is dead-lettered; failures are reported by error kind with the commonest errors.",
)
def no_failed_listing_pages(database: DatabaseResource) -> dg.AssetCheckResult:
    return failed_listing_pages_result(database)


def failed_listing_pages_result(database: DatabaseResource) -> dg.AssetCheckResult:
    """``no_failed_listing_pages`` of the queue as it is."""
    with transient_only(None), database.open(application_name="book-pipeline checks") as db:
        stats = make_queue(db).stats(top_failures=5)
    by_kind = stats.failed_by_kind.get(LISTING, {})
    failed = sum(by_kind.values())
    listed = sum(stats.counts.get(LISTING, {}).values())
    kinds = [dg.TableRecord({"kind": kind, "failed": n}) for kind, n in sorted(by_kind.items(), key=lambda kv: -kv[1])]
    return dg.AssetCheckResult(
        passed=failed == 0,
        severity=dg.AssetCheckSeverity.WARN,
        description=(
            f"{failed} of {listed} listing pages failed: "
            + ", ".join(f"{n} {kind}" for kind, n in sorted(by_kind.items(), key=lambda kv: -kv[1]))
            if failed
            else f"all {listed} listing pages fetched"
        ),
        metadata={
            "listing_pages": listed,
            "failed_listing_pages": failed,
            "failed_by_kind": dg.MetadataValue.table(
                records=kinds,
                schema=dg.TableSchema(columns=[dg.TableColumn("kind", "string"), dg.TableColumn("failed", "int")]),
            ),
            "top_errors": dg.MetadataValue.md(
                "\n".join(f"- {n}x {error[:120]}" for error, n in stats.top_failures) or "(none)"
            ),
        },
    )


BOOK_CHECKS = [unique_urls, raw_html_present, no_error_pages, required_fields_present, crawl_complete, no_field_drift]
LISTING_CHECKS = [found_books, no_failed_listing_pages]
