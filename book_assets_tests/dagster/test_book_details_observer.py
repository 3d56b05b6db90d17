"""book_details_observer: books written outside Dagster (here by ``book-pipeline crawl``) are recorded as an
observation of book_details, read from the database; writes a Dagster run's report recorded are not recorded
again, and a crawl run in progress makes the sensor wait for its report. Each catalogue's observer records its
own records and crawls only (``quotes_details_observer``)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from book_assets.crawl.pipeline import crawl as pipeline_crawl
from book_assets.db.connection import Database
from book_assets.defs.crawl.assets import BOOK_DETAILS, CRAWL_RUN_TAGS, crawl
from book_assets.defs.crawl.observe import book_details_observer, details_observer
from book_assets.defs.resources import DatabaseResource, FetcherResource, SchedulingResource, SiteResource
from book_assets.sandbox.quotes.server import QuotesServer
from book_assets.sandbox.server import SandboxServer
from book_assets.sites.registry import site_named
from book_assets_tests.conftest import child_env
from book_assets_tests.sites.quotes.crawling import quotes_config

#: The Travel category: 11 books on one listing page.
TRAVEL = 11


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        yield instance


def tick(instance: dg.DagsterInstance, database_url: str, cursor: str | None) -> dg.SensorResult:
    context = dg.build_sensor_context(
        instance=instance,
        cursor=cursor,
        resources={"database": DatabaseResource(url=database_url)},
    )
    result = book_details_observer(context)
    assert isinstance(result, dg.SensorResult)
    return result


def observations(result: dg.SensorResult) -> list[dg.AssetObservation]:
    return [e for e in result.asset_events or [] if isinstance(e, dg.AssetObservation)]


def test_a_cli_crawl_is_recorded_as_one_observation_of_book_details(
    db: Database, database_url: str, sandbox: SandboxServer, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    first = tick(instance, database_url, None)
    assert first.cursor is not None and not observations(first)  # it watches from now on, no replay

    command = [sys.executable, "-m", "book_assets.cli", "crawl", "--base-url", f"{sandbox.url}/", "--fetch", "http"]
    proc = subprocess.run(
        [*command, "--categories", "Travel", "--workers", "1", "--no-progress"],
        env=child_env(DATABASE_URL=database_url),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]

    second = tick(instance, database_url, first.cursor)
    (observed,) = observations(second)
    assert observed.asset_key == BOOK_DETAILS
    metadata: dict[str, Any] = {k: getattr(v, "value", v) for k, v in observed.metadata.items()}
    assert (metadata["books_new"], metadata["books_changed"], metadata["dagster/row_count"]) == (TRAVEL, 0, TRAVEL)
    assert (metadata["pages"], metadata["listing_pages"]) == (TRAVEL + 2, 2)  # the start page, Travel's page
    (ledger,) = metadata["crawls_finished"].records  # the CLI's crawl, from the crawls table
    assert ledger.data["outcome"] == "decided"

    third = tick(instance, database_url, second.cursor)
    assert not observations(third)  # nothing written since: nothing recorded twice


def test_writes_a_dagster_run_recorded_are_not_observed_again(
    db: Database, database_url: str, sandbox: SandboxServer, instance: dg.DagsterInstance
) -> None:
    first = tick(instance, database_url, None)
    resources = {
        "database": DatabaseResource(url=database_url),
        "site": SiteResource(base_url=f"{sandbox.url}/", allowed_domains=[sandbox.host], categories=["Travel"]),
        "fetcher": FetcherResource(fetch_mode="http", workers=1, concurrency=4),
        "scheduling": SchedulingResource(),
    }
    assert dg.materialize([crawl], instance=instance, resources=resources).success

    after = tick(instance, database_url, first.cursor)
    assert not observations(after), "the run's report recorded these books already"


def test_a_crawl_run_in_progress_makes_the_observer_wait_for_its_report(
    db: Database, database_url: str, instance: dg.DagsterInstance
) -> None:
    first = tick(instance, database_url, None)
    run = instance.create_run_for_job(
        dg.GraphDefinition(name="crawl_queue_job").to_job(),
        tags=CRAWL_RUN_TAGS,
        status=dg.DagsterRunStatus.STARTED,
    )
    waiting = tick(instance, database_url, first.cursor)
    assert waiting.cursor == first.cursor and "in progress" in str(waiting.skip_reason)
    instance.report_run_failed(run)
    assert tick(instance, database_url, first.cursor).cursor != first.cursor


def test_each_catalogue_observes_its_own_records_and_its_own_crawls(
    db: Database, database_url: str, quotes_site: QuotesServer, instance: dg.DagsterInstance
) -> None:
    quotes_observer = details_observer(site_named("quotes"))
    assert quotes_observer.name == "quotes_details_observer"

    def both(cursors: tuple[str | None, str | None]) -> tuple[dg.SensorResult, dg.SensorResult]:
        books = tick(instance, database_url, cursors[0])
        context = dg.build_sensor_context(
            instance=instance, cursor=cursors[1], resources={"database": DatabaseResource(url=database_url)}
        )
        quotes = quotes_observer(context)
        assert isinstance(quotes, dg.SensorResult)
        return books, quotes

    books, quotes = both((None, None))
    report = pipeline_crawl(database_url, quotes_config(quotes_site))  # a crawl of quotes outside Dagster
    books, quotes = both((books.cursor, quotes.cursor))
    assert observations(books) == []  # the books' observer sees no book written, and not the quotes' crawl
    (observed,) = observations(quotes)
    assert observed.asset_key == dg.AssetKey(["quotes", "details"])
    metadata: dict[str, Any] = {k: getattr(v, "value", v) for k, v in observed.metadata.items()}
    assert (metadata["authors_new"], metadata["dagster/row_count"]) == (50, 50)
    assert not [key for key in metadata if key.startswith("book")]
    assert metadata["pages"] == report.run.pages and metadata["failed"] == 1  # /js/, no listing in http mode
    (ledger,) = metadata["crawls_finished"].records
    assert ledger.data["crawl"] == report.crawl_id
