"""Checks of a catalogue's crawl assets, built for each site definition by :func:`crawl_checks`.

What the engine judges of every catalogue, from its queue and its run:

- on the details asset (``book_details``, ``<site>/details``): ``crawl_complete`` (blocking): a run whose
  drain step failed records what it wrote marked partial (:mod:`book_assets.defs.crawl.steps`), and this check
  fails it; and, for a site whose crawl judges its fields (:attr:`~book_assets.sites.site.Site.drift_and_removals`:
  books), ``no_field_drift`` (blocking);
- on the discovery asset: the pass found records (``found_books``, ``found_authors``: ``found_<record>s``;
  ERROR, blocking), and no listing page of the site's listing kinds ended dead-lettered
  (``no_failed_listing_pages``, WARN: the records behind a failed listing page are missing, the rest are
  sound). A crawl that found nothing fails its run, so the failure alert fires; as the crawl's report
  materializes both passes at once, the block stops only what runs on the discovery asset after that step, not
  the details. The count found is the discovery's own materialization metadata (``books_found``,
  ``authors_found``: ``<record>s_found``, the detail links found); the failures are the queue's dead-lettered
  tasks of the site's listing kinds, by error kind.

What a site declares (:attr:`~book_assets.sites.site.Site.data_checks`): the rules its stored records hold,
each one named query returning the offending row count, the rows looked at and a sample of offending URLs
(books: ``unique_urls``, ``raw_html_present``, ``no_error_pages``, ``required_fields_present``). They guard
against corrupt data, so they are ERROR and blocking: a failure stops anything from being built on top of it.

``crawl_complete``, the found check and ``no_field_drift`` judge the materialization of their own run
(:func:`materialization_judged`): two crawl runs can overlap, and the instance's latest materialization may
be the other run's. A run of the checks alone (after an operator's fix) judges the latest one; each result
names the run it judged.

``no_field_drift`` reads the crawl of the judged materialization of the details asset (its ``crawl_id``) and
fails while a field of that crawl drifted and no operator accepted it (:mod:`book_assets.store.drift`): the
run fails, which alerts (``alert_sensor`` names the check), nothing downstream publishes and the last good
snapshot stays the current one. ``book-pipeline drift accept`` records the acceptance (or ``reextract``
resolves the drift); ``drift_cleared_sensor`` then runs the check again (``recheck_drift_job``), it passes, and
the day's publishing follows.

Every job that materializes a crawl asset (the full refresh, the retry of the failures, the queue jobs) runs
its catalogue's checks as steps after the crawl's report.
"""

from dataclasses import dataclass

import dagster as dg

from book_assets.crawl.config import make_queue
from book_assets.defs.catalog import CrawlKeys, crawl_keys, once_per_site
from book_assets.defs.crawl.metadata import record_key
from book_assets.defs.resources import DatabaseResource
from book_assets.defs.retries import TRANSIENT_RETRY, transient_only
from book_assets.settings import default
from book_assets.sites.registry import site_named
from book_assets.sites.site import DataCheck, Role, Site, default_kind, kinds_of
from book_assets.store.drift import unaccepted_drift


def run_check(database: DatabaseResource, check: DataCheck) -> dg.AssetCheckResult:
    """The result of one of a site's data checks: passed when no row breaks its rule."""
    with transient_only(None), database.open(application_name="book-pipeline checks") as db:
        row = db.query(check.sql, check.params)[0]
    bad, total = int(row["bad"]), int(row["total"])
    sample = list(row["sample"] or [])
    rows, rule = check.rows, check.rule
    return dg.AssetCheckResult(
        passed=bad == 0,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"{bad} of {total} {rows} break the rule: {rule}" if bad else f"all {total} {rows}: {rule}",
        metadata={
            "offending_rows": bad,
            f"{rows}_checked": total,
            "sample": dg.MetadataValue.md("\n".join(f"- {url}" for url in sample) or "(none)"),
        },
    )


def data_check(keys: CrawlKeys, check: DataCheck) -> dg.AssetChecksDefinition:
    """A site's data check as a blocking check of its details asset."""

    @dg.asset_check(
        asset=keys.details,
        name=check.name,
        blocking=True,
        retry_policy=TRANSIENT_RETRY,
        description=check.description,
    )
    def rule_holds(database: DatabaseResource) -> dg.AssetCheckResult:
        return run_check(database, check)

    return rule_holds


def crawl_complete_check(site: Site, keys: CrawlKeys) -> dg.AssetChecksDefinition:
    """``crawl_complete`` of ``site``'s details asset."""

    @dg.asset_check(
        asset=keys.details,
        name="crawl_complete",
        blocking=True,
        retry_policy=TRANSIENT_RETRY,
        description="The run's crawl ran to its end: no drain step failed (a partial crawl is recorded, not "
        "published).",
    )
    def crawl_complete(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        judged = materialization_judged(context, keys.details)
        metadata = judged.materialization.metadata if judged.materialization is not None else {}
        failed = metadata.get("failed_drain_steps")
        failed_steps = int(str(failed.value)) if failed is not None else 0
        steps = metadata.get("drain_steps")
        errors = metadata.get("drain_errors")
        return dg.AssetCheckResult(
            passed=failed_steps == 0,
            severity=dg.AssetCheckSeverity.ERROR,
            description=f"{failed_steps} drain step(s) failed: the {site.record}s stored are a partial crawl"
            if failed_steps
            else "every drain step ran to its end",
            metadata={
                "failed_drain_steps": failed_steps,
                "drain_steps": int(str(steps.value)) if steps is not None else 0,
                "drain_errors": errors if errors is not None else dg.MetadataValue.md("(none)"),
                **judged.metadata(),
            },
        )

    return crawl_complete


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


def crawl_of_the_run(context: dg.AssetCheckExecutionContext, details: dg.AssetKey) -> tuple[int | None, str]:
    """The crawl whose records the check judges (the ``crawl_id`` of the judged materialization of the details
    asset ``details``), and where its id was read."""
    judged = materialization_judged(context, details)
    found = judged.materialization.metadata.get("crawl_id") if judged.materialization is not None else None
    return (int(str(found.value)) if found is not None else None), judged.source


def no_field_drift_check(keys: CrawlKeys) -> dg.AssetChecksDefinition:
    """``no_field_drift`` of a details asset whose crawl judges its fields."""

    @dg.asset_check(
        asset=keys.details,
        name="no_field_drift",
        blocking=True,
        retry_policy=TRANSIENT_RETRY,
        description="No field of the crawl drifted (its fill rate fell past drift_threshold, or its values' shape "
        "moved past drift_length_ratio or drift_top_share, against the last good crawl) unless an operator "
        "accepted it: the records keep their last good values until then.",
    )
    def no_field_drift(context: dg.AssetCheckExecutionContext, database: DatabaseResource) -> dg.AssetCheckResult:
        crawl_id, source = crawl_of_the_run(context, keys.details)
        if crawl_id is None:
            return dg.AssetCheckResult(
                passed=True,
                severity=dg.AssetCheckSeverity.ERROR,
                description=f"no crawl to judge ({source} names none: a drain-only run or a retry of the failures)",
            )
        with (
            transient_only(context.op_execution_context),
            database.open(application_name="book-pipeline checks") as db,
        ):
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

    return no_field_drift


def found_by_discovery(
    context: dg.AssetCheckExecutionContext, database: DatabaseResource, site: Site, keys: CrawlKeys
) -> tuple[int, str]:
    """Records the judged discovery found (its ``<record>s_found`` metadata, ``books_found``: the detail links
    found), else the site's detail tasks the queue holds."""
    judged = materialization_judged(context, keys.listing_discovery)
    key = record_key(site, "found")
    found = judged.materialization.metadata.get(key) if judged.materialization is not None else None
    if found is not None:
        return int(str(found.value)), f"{key} of {judged.source} (run {(judged.run_id or '')[:8]})"
    with transient_only(context.op_execution_context), database.open(application_name="book-pipeline checks") as db:
        counts = make_queue(db).stats().counts
    return sum(counts.get(default_kind(site, Role.DETAIL), {}).values()), "detail tasks in the queue"


def found_records_check(site: Site, keys: CrawlKeys) -> dg.AssetChecksDefinition:
    """``found_<record>s`` (``found_books``) of ``site``'s discovery asset."""

    @dg.asset_check(
        asset=keys.listing_discovery,
        name=f"found_{site.record}s",
        retry_policy=TRANSIENT_RETRY,
        blocking=True,
        description=f"The listing pass found at least one {site.record} (a detail pass over nothing would publish "
        "stale data).",
    )
    def found_records(context: dg.AssetCheckExecutionContext, database: DatabaseResource) -> dg.AssetCheckResult:
        return found_result(*found_by_discovery(context, database, site, keys), site=site)

    return found_records


def found_result(found: int, source: str, *, site: Site) -> dg.AssetCheckResult:
    """The found check of ``site``'s discovery that found ``found`` records (as ``source`` says)."""
    record = site.record
    return dg.AssetCheckResult(
        passed=found > 0,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"{found} {record}s found ({source})" if found else f"no {record} found ({source})",
        metadata={record_key(site, "found"): found, "source": source},
    )


def failed_listing_pages_check(site: Site, keys: CrawlKeys) -> dg.AssetChecksDefinition:
    """``no_failed_listing_pages`` of ``site``'s discovery asset."""

    @dg.asset_check(
        asset=keys.listing_discovery,
        name="no_failed_listing_pages",
        retry_policy=TRANSIENT_RETRY,
        description="No listing page is dead-lettered; failures are reported by error kind with the commonest errors.",
    )
    def no_failed_listing_pages(database: DatabaseResource) -> dg.AssetCheckResult:
        return failed_listing_pages_result(database, site)

    return no_failed_listing_pages


def failed_listing_pages_result(database: DatabaseResource, site: Site) -> dg.AssetCheckResult:
    """``no_failed_listing_pages`` of the queue as it is: the dead-lettered tasks of ``site``'s listing kinds."""
    listing_kinds = kinds_of(site, Role.LISTING)
    with transient_only(None), database.open(application_name="book-pipeline checks") as db:
        stats = make_queue(db).stats(top_failures=5)
    by_kind: dict[str, int] = {}
    for kind in listing_kinds:
        for error, n in stats.failed_by_kind.get(kind, {}).items():
            by_kind[error] = by_kind.get(error, 0) + n
    failed = sum(by_kind.values())
    listed = sum(sum(stats.counts.get(kind, {}).values()) for kind in listing_kinds)
    ranked = sorted(by_kind.items(), key=lambda kv: -kv[1])
    kinds = [dg.TableRecord({"kind": kind, "failed": n}) for kind, n in ranked]
    return dg.AssetCheckResult(
        passed=failed == 0,
        severity=dg.AssetCheckSeverity.WARN,
        description=(
            f"{failed} of {listed} listing pages failed: " + ", ".join(f"{n} {kind}" for kind, n in ranked)
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


@dataclass(frozen=True)
class CrawlChecks:
    """A catalogue's crawl checks: those of its details asset and those of its discovery asset."""

    details: tuple[dg.AssetChecksDefinition, ...]
    listing: tuple[dg.AssetChecksDefinition, ...]

    @property
    def every(self) -> list[dg.AssetChecksDefinition]:
        return [*self.listing, *self.details]

    def named(self, name: str) -> dg.AssetChecksDefinition:
        """The check called ``name``."""
        return next(c for c in self.every if next(iter(c.check_keys)).name == name)


@once_per_site
def crawl_checks(site: Site) -> CrawlChecks:
    """``site``'s crawl checks (one set of objects per site): its own data checks, ``crawl_complete`` and, where
    its crawl judges its fields, ``no_field_drift`` on its details asset; the found check and
    ``no_failed_listing_pages`` on its discovery asset."""
    keys = crawl_keys(site.name)
    details = [data_check(keys, check) for check in site.data_checks]
    details.append(crawl_complete_check(site, keys))
    if site.drift_and_removals:
        details.append(no_field_drift_check(keys))
    listing = (found_records_check(site, keys), failed_listing_pages_check(site, keys))
    return CrawlChecks(tuple(details), listing)


BOOKS_KEYS = crawl_keys(default("site"))
LISTING_DISCOVERY = BOOKS_KEYS.listing_discovery
BOOK_DETAILS = BOOKS_KEYS.details
#: The default site's (books') checks, by name.
_BOOKS = crawl_checks(site_named(default("site")))
unique_urls = _BOOKS.named("unique_urls")
raw_html_present = _BOOKS.named("raw_html_present")
no_error_pages = _BOOKS.named("no_error_pages")
required_fields_present = _BOOKS.named("required_fields_present")
crawl_complete = _BOOKS.named("crawl_complete")
no_field_drift = _BOOKS.named("no_field_drift")
found_books = _BOOKS.named("found_books")
no_failed_listing_pages = _BOOKS.named("no_failed_listing_pages")
BOOK_CHECKS = list(_BOOKS.details)
LISTING_CHECKS = list(_BOOKS.listing)
