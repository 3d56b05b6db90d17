"""A requeue launched by failed_tasks_sensor goes through the asset graph: the failed book pages are fetched
again, book_details is materialized and its checks are evaluated; and the quotes' own: the failed author pages
of a quotes crawl are fetched again by quotes_recrawl_failed_job, which leaves the books' failures alone."""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest

from book_assets.crawl.config import DETAIL, TASK_TYPES, requeue_policy
from book_assets.db.connection import Database
from book_assets.defs.crawl.assets import SITE_TAG, crawl, crawl_asset
from book_assets.defs.crawl.checks import BOOK_CHECKS, LISTING_CHECKS, crawl_checks
from book_assets.defs.crawl.jobs import crawl_jobs, recrawl_failed_job
from book_assets.defs.crawl.sensors import build_failed_tasks_sensor
from book_assets.defs.resources import DatabaseResource, FetcherResource, SchedulingResource, SiteResource
from book_assets.queue import TaskQueue
from book_assets.sandbox import Faults
from book_assets.sandbox.quotes import truth
from book_assets.sandbox.quotes.server import QuotesServer
from book_assets.scraper.errors import ErrorKind
from book_assets.sites.registry import site_named
from book_assets.store.books import book_counts
from book_assets_tests.dagster.test_dagster_quotes import quotes_resources
from book_assets_tests.sites.quotes.crawling import stored_authors

pytestmark = pytest.mark.slow

QUOTES = site_named("quotes")


def test_the_sensors_requeue_run_fetches_the_failed_books_and_materializes_book_details_with_its_checks(
    db: Database, database_url: str, sandbox_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOOK_PIPELINE_MAX_ATTEMPTS", "2")
    monkeypatch.setenv("BOOK_PIPELINE_BACKOFF_BASE_S", "0.01")
    monkeypatch.setenv("BOOK_PIPELINE_REQUEUE_BACKOFF_S", "0")  # a failed page's first requeue is due at once
    probe = sandbox_factory()
    travel = sorted(p for p, book in probe.catalogue.ground_truth().items() if book.category == "Travel")
    # Three Travel books answer 500 twice: the first crawl fails them for good, a later fetch succeeds.
    site = sandbox_factory(faults=Faults(scripted={path: ["500", "500"] for path in travel[:3]}))
    resources = {
        "database": DatabaseResource(url=database_url),
        "site": SiteResource(base_url=f"{site.url}/", allowed_domains=[site.host], categories=["Travel"]),
        "fetcher": FetcherResource(fetch_mode="http", workers=1, concurrency=4),
        "scheduling": SchedulingResource(),
    }
    with dg.DagsterInstance.ephemeral() as instance:
        first = dg.materialize([crawl], instance=instance, resources=resources)
        assert first.success and book_counts(db)["total"] == len(travel) - 3

        sensor = build_failed_tasks_sensor(3, requeue_policy(3, 0))
        request = sensor(dg.build_sensor_context(instance=instance, resources={"database": resources["database"]}))
        assert isinstance(request, dg.SensorResult)
        assert [r.job_name or sensor.job_name for r in request.run_requests or []] == ["recrawl_failed_job"]

        defs = dg.Definitions(
            assets=[crawl], asset_checks=[*LISTING_CHECKS, *BOOK_CHECKS], jobs=[recrawl_failed_job], resources=resources
        )
        rerun = defs.resolve_job_def("recrawl_failed_job").execute_in_process(instance=instance)
    assert rerun.success
    assert book_counts(db)["total"] == len(travel)
    materialized = {
        e.step_materialization_data.materialization.asset_key.to_user_string()
        for e in rerun.get_asset_materialization_events()
    }
    assert "book_details" in materialized
    checked = {(e.asset_key.to_user_string(), e.check_name): e.passed for e in rerun.get_asset_check_evaluations()}
    book_checks = {name: ok for (asset, name), ok in checked.items() if asset == "book_details"}
    assert book_checks and all(book_checks.values()), checked
    details = next(
        e.step_materialization_data.materialization
        for e in rerun.get_asset_materialization_events()
        if e.asset_key == dg.AssetKey("book_details")
    )
    assert details.metadata["books_new"].value == 3


def test_quotes_recrawl_failed_job_fetches_the_failed_author_pages_again_and_leaves_the_books_failures_alone(
    db: Database, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOOK_PIPELINE_MAX_ATTEMPTS", "2")
    monkeypatch.setenv("BOOK_PIPELINE_BACKOFF_BASE_S", "0.01")
    monkeypatch.setenv("BOOK_PIPELINE_REQUEUE_BACKOFF_S", "0")  # a failed page's first requeue is due at once
    failing = sorted(truth.authors())[:3]
    # Three author pages answer 500 twice: the first crawl fails them for good, a later fetch succeeds.
    scripted = {f"/author/{slug}/": [500, 500] for slug in failing}
    # A book page failed by the queue's own API, as a books crawl's worker would, with a kind that can change.
    books_queue = TaskQueue(db, task_types=TASK_TYPES, default_interval_s=0)
    books_queue.enqueue(DETAIL, {"url": "http://books.test/a_1/index.html", "category": "Travel"}, max_attempts=1)
    (book_task,) = books_queue.claim("test", 1, task_types=[DETAIL]).tasks
    books_queue.fail(book_task, "http_5xx: injected", kind=ErrorKind.HTTP_5XX, retryable=True)
    book_failure = db.query("SELECT id, status, requeues, attempts FROM tasks WHERE task_type = %s", (DETAIL,))

    with QuotesServer(scripted=scripted) as server, dg.DagsterInstance.ephemeral() as instance:
        jobs = crawl_jobs(QUOTES)
        defs = dg.Definitions(
            assets=[crawl_asset(QUOTES)],
            asset_checks=crawl_checks(QUOTES).every,
            jobs=[jobs.full_refresh, jobs.recrawl_failed],
            resources=quotes_resources(database_url, server),
            executor=dg.in_process_executor,
        )
        first = defs.resolve_job_def("quotes_full_refresh_job").execute_in_process(
            instance=instance, raise_on_error=False
        )
        # The quotes of the three authors link authors not stored: the blocking check fails the run (and /js/,
        # no listing in http mode, is the WARN it always is).
        judged = {e.check_name: e.passed for e in first.get_asset_check_evaluations()}
        assert not first.success
        assert {name for name, ok in judged.items() if not ok} == {"quote_authors_stored", "no_failed_listing_pages"}
        stored = {row["url"] for row in db.query("SELECT url FROM authors")}
        assert len(stored) == 47 and not {server.url_for(path) for path in scripted} & stored
        failed = db.query(
            "SELECT payload->>'url' AS url, error_kind FROM tasks WHERE status = 'failed' AND task_type = 'author'"
        )
        assert {(row["url"], row["error_kind"]) for row in failed} == {
            (server.url_for(path), ErrorKind.HTTP_5XX) for path in scripted
        }

        sensor = build_failed_tasks_sensor(3, requeue_policy(3, 0), site=QUOTES)
        assert sensor.name == "quotes_failed_tasks_sensor"
        database = DatabaseResource(url=database_url)
        request = sensor(dg.build_sensor_context(instance=instance, resources={"database": database}))
        assert isinstance(request, dg.SensorResult)
        assert [r.job_name or sensor.job_name for r in request.run_requests or []] == ["quotes_recrawl_failed_job"]
        rerun = defs.resolve_job_def("quotes_recrawl_failed_job").execute_in_process(instance=instance)

    assert rerun.success
    assert rerun.dagster_run.tags[SITE_TAG] == "quotes"
    assert truth.author_differences(stored_authors(db)) == [] and len(stored_authors(db)) == 50
    assert {row["status"] for row in db.query("SELECT status FROM tasks WHERE task_type = 'author'")} == {"completed"}
    details = next(
        e.step_materialization_data.materialization
        for e in rerun.get_asset_materialization_events()
        if e.asset_key == dg.AssetKey(["quotes", "details"])
    )
    assert (details.metadata["authors_stored"].value, details.metadata["authors_new"].value) == (3, 3)
    checked = {(e.asset_key.to_user_string(), e.check_name): e.passed for e in rerun.get_asset_check_evaluations()}
    assert checked and all(ok for (asset, _), ok in checked.items() if asset == "quotes/details"), checked
    # The books' failure is the books' sensor's to requeue: the quotes' run left it as it was.
    assert db.query("SELECT id, status, requeues, attempts FROM tasks WHERE task_type = %s", (DETAIL,)) == book_failure
    assert book_failure[0]["status"] == "failed"
