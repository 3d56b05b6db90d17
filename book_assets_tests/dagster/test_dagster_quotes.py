"""quotes.toscrape.com's own Dagster definitions, run for real: ``quotes_full_refresh_job`` in process, plain
HTTP, against the quotes stand-in (``quotes_site``), into the test database; and the quotes' own data checks
failing on data that breaks them.

In http mode ``/js/`` is no listing (its quotes are only in a script): its task is dead-lettered as
``not_a_listing_page``, and the WARN check ``no_failed_listing_pages`` says so (the quotes it would show are
all on the pages of ``/``, so the blocking checks pass and the run succeeds).
"""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest

from book_assets.db.connection import Database
from book_assets.definitions import ASSET_CHECKS, ASSETS
from book_assets.defs.crawl.assets import SITE_TAG, crawl_asset
from book_assets.defs.crawl.checks import crawl_checks
from book_assets.defs.crawl.jobs import crawl_jobs
from book_assets.defs.resources import (
    ArchiveResource,
    DatabaseResource,
    FetcherResource,
    SchedulingResource,
    SiteResource,
)
from book_assets.sandbox.quotes import truth
from book_assets.sandbox.quotes.server import QuotesServer
from book_assets.scraper.errors import ErrorKind
from book_assets.sites.registry import site_named
from book_assets_tests.sites.quotes.crawling import stored_authors, stored_quotes

pytestmark = pytest.mark.slow

QUOTES = site_named("quotes")


def quotes_resources(database_url: str, server: QuotesServer, **site: Any) -> dict[str, Any]:
    return {
        "database": DatabaseResource(url=database_url),
        "site": SiteResource(base_url=server.url + "/", min_interval_s=0.0, **site),
        "fetcher": FetcherResource(fetch_mode="http", workers=1, concurrency=4),
        "scheduling": SchedulingResource(),
        "archive": ArchiveResource(),
    }


def run_full_refresh(database_url: str, server: QuotesServer, **site: Any) -> dg.ExecuteInProcessResult:
    definitions = dg.Definitions(
        assets=ASSETS,
        asset_checks=ASSET_CHECKS,
        jobs=[crawl_jobs(QUOTES).full_refresh],
        resources=quotes_resources(database_url, server, **site),
        executor=dg.in_process_executor,
    )
    job = definitions.resolve_job_def("quotes_full_refresh_job")
    with dg.DagsterInstance.ephemeral() as instance:
        return job.execute_in_process(instance=instance, raise_on_error=False)


def test_quotes_full_refresh_job_materializes_the_quotes_assets_stores_the_truth_and_passes_its_blocking_checks(
    db: Database, database_url: str, quotes_site: QuotesServer
) -> None:
    result = run_full_refresh(database_url, quotes_site)
    assert result.success
    assert result.dagster_run.tags[SITE_TAG] == "quotes"
    materialized = {
        e.step_materialization_data.materialization.asset_key.to_user_string()
        for e in result.get_asset_materialization_events()
    }
    assert materialized == {"quotes/listing_discovery", "quotes/details"}
    assert truth.quote_differences(stored_quotes(db)) == [] and truth.author_differences(stored_authors(db)) == []
    assert len(stored_quotes(db)) == 100 and len(stored_authors(db)) == 50
    assert db.query("SELECT count(*) AS n FROM books")[0]["n"] == 0  # the quotes' run crawled no book

    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert set(evaluations) == {
        "found_authors",
        "no_failed_listing_pages",
        "unique_urls",
        "raw_html_present",
        "required_fields_present",
        "quote_authors_stored",
        "crawl_complete",
    }
    failed = {name: e.description for name, e in evaluations.items() if not e.passed}
    assert failed == {
        "no_failed_listing_pages": f"1 of {failed_listing_total(db)} listing pages failed: 1 "
        f"{ErrorKind.NOT_A_LISTING_PAGE}"
    }
    assert evaluations["no_failed_listing_pages"].severity == dg.AssetCheckSeverity.WARN
    assert evaluations["found_authors"].metadata["authors_found"].value == 50
    assert evaluations["quote_authors_stored"].description == "all 100 quotes: the author it links is stored"


def test_the_quotes_materializations_and_found_check_speak_of_authors_not_books(
    db: Database, database_url: str, quotes_site: QuotesServer
) -> None:
    result = run_full_refresh(database_url, quotes_site)
    assert result.success
    metadata = {
        m.asset_key.to_user_string(): m.metadata
        for m in (e.step_materialization_data.materialization for e in result.get_asset_materialization_events())
    }
    listing, details = metadata["quotes/listing_discovery"], metadata["quotes/details"]
    assert listing["authors_found"].value == 50
    assert {key: details[key].value for key in ("authors_stored", "authors_new", "authors_total")} == {
        "authors_stored": 50,
        "authors_new": 50,
        "authors_total": 50,
    }
    assert {"authors_changed", "authors_unchanged", "author_versions", "authors_by_category"} <= set(details)
    by_category = details["authors_by_category"]
    assert isinstance(by_category, dg.TableMetadataValue)
    assert by_category.schema.columns[1].name == "authors stored this run"
    booked = [key for one in metadata.values() for key in one if key.startswith("book")]
    assert booked == []
    found = next(e for e in result.get_asset_check_evaluations() if e.check_name == "found_authors")
    assert set(found.metadata) == {"authors_found", "source"}
    assert (found.description or "").startswith("50 authors found (authors_found of this run's materialization")
    drained = [
        e.step_output_data.metadata
        for e in result.all_events
        if e.step_key
        and e.step_key.startswith("quotes_crawl.drain_queue")
        and e.event_type == dg.DagsterEventType.STEP_OUTPUT
    ]
    assert drained and all("authors_stored" in one and "books_stored" not in one for one in drained)


def failed_listing_total(db: Database) -> int:
    """The quotes' listing tasks in the queue."""
    return int(db.query("SELECT count(*) AS n FROM tasks WHERE task_type IN ('quotes', 'quotes_js')")[0]["n"])


def test_a_site_resource_naming_another_site_is_refused_in_one_line(
    db: Database, database_url: str, quotes_site: QuotesServer
) -> None:
    result = run_full_refresh(database_url, quotes_site, site="books")
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
    error = failure.step_failure_data.error
    assert error is not None
    assert "the Dagster site resource): it names 'books', but this run crawls the assets of site 'quotes'" in (
        error.to_string()
    )
    assert db.query("SELECT count(*) AS n FROM tasks")[0]["n"] == 0


def test_a_quote_whose_author_is_not_stored_fails_the_blocking_check(
    db: Database, database_url: str, quotes_site: QuotesServer
) -> None:
    db.query(
        "INSERT INTO authors (url, name, birth_date, birth_place, raw_html) "
        "VALUES ('http://q.test/author/Known/', 'Known', '1900-01-01', 'in Ulm', '<html></html>')"
    )
    db.query(
        "INSERT INTO quotes (text, author, author_url, tags, page_url) VALUES "
        "('a', 'Known', 'http://q.test/author/Known/', '{}', 'http://q.test/'), "
        "('b', 'Lost', 'http://q.test/author/Lost/', '{}', 'http://q.test/'), "
        "('c', 'Scripted', NULL, '{}', 'http://q.test/js/')"
    )
    checks = crawl_checks(QUOTES)
    judged = [checks.named("quote_authors_stored"), checks.named("required_fields_present")]
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(
            [crawl_asset(QUOTES), *judged],
            selection=dg.AssetSelection.checks(*judged),
            instance=instance,
            resources=quotes_resources(database_url, quotes_site),
            raise_on_error=False,
        )
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    stored = evaluations["quote_authors_stored"]
    assert not stored.passed and stored.severity == dg.AssetCheckSeverity.ERROR
    assert stored.description == "1 of 2 quotes break the rule: the author it links is stored"
    assert stored.metadata["sample"].value == "- http://q.test/author/Lost/"
    assert evaluations["required_fields_present"].passed


def test_the_quotes_jobs_say_what_launches_them_and_what_follows() -> None:
    jobs = crawl_jobs(QUOTES)
    assert (jobs.recrawl_failed.description or "").endswith("Launched by quotes_failed_tasks_sensor.")
    assert (jobs.full_refresh.description or "").endswith("and the day's snapshot by automation (quotes_publish_job).")
