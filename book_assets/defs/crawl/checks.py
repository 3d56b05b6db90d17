"""Data-quality checks of ``book_details``: the three counts (books, unique URLs, with raw HTML) and what they miss.

Each check is one named query of ``book_assets/sql/checks.sql`` returning the offending row count, the rows
looked at and a sample of offending URLs. All four guard against corrupt data, so they are ERROR and
blocking: a failure stops the snapshot from being built on top of it.
"""

import dagster as dg

from book_assets.defs.crawl.assets import book_details
from book_assets.defs.resources import DatabaseResource
from book_assets.sql import load_queries

Q = load_queries("checks")


def run_check(database: DatabaseResource, query: str, rule: str) -> dg.AssetCheckResult:
    """The result of one ``bad / total / sample`` query: passed when no row breaks ``rule``."""
    with database.open(application_name="book-pipeline checks") as db:
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


@dg.asset_check(asset=book_details, blocking=True, description="No book URL is stored twice.")
def unique_urls(database: DatabaseResource) -> dg.AssetCheckResult:
    return run_check(database, "duplicate_urls", "one row per URL")


@dg.asset_check(asset=book_details, blocking=True, description="Every stored book keeps the raw HTML of its page.")
def raw_html_present(database: DatabaseResource) -> dg.AssetCheckResult:
    return run_check(database, "missing_raw_html", "raw HTML stored")


@dg.asset_check(
    asset=book_details,
    blocking=True,
    description="No error page was stored as a book: product block present, real title, HTTP 200.",
)
def no_error_pages(database: DatabaseResource) -> dg.AssetCheckResult:
    return run_check(database, "error_pages_stored", "a product page served with HTTP 200")


@dg.asset_check(
    asset=book_details, blocking=True, description="Title, price, UPC and category are present on every book."
)
def required_fields_present(database: DatabaseResource) -> dg.AssetCheckResult:
    return run_check(database, "missing_required_fields", "title, price, UPC and category present")


BOOK_CHECKS = [unique_urls, raw_html_present, no_error_pages, required_fields_present]
