"""A requeue launched by failed_tasks_sensor goes through the asset graph: the failed book pages are fetched
again, book_details is materialized and its checks are evaluated."""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest

from book_assets.crawl.config import requeue_policy
from book_assets.db.connection import Database
from book_assets.defs.crawl.assets import crawl
from book_assets.defs.crawl.checks import BOOK_CHECKS, LISTING_CHECKS
from book_assets.defs.crawl.jobs import recrawl_failed_job
from book_assets.defs.crawl.sensors import build_failed_tasks_sensor
from book_assets.defs.resources import DatabaseResource, FetcherResource, SchedulingResource, SiteResource
from book_assets.sandbox import Faults
from book_assets.store.books import book_counts

pytestmark = pytest.mark.slow


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
