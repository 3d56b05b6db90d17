"""Backfills that mean days: ``publish_job`` rebuilds past days of the daily assets from the stored history
and launches no crawl; a daily asset materialized without a partition key fails, naming what to give.

The runs are what a backfill of ``publish_job`` launches: one run per day, each with its partition key, on one
instance, through the location's own job (the definitions as loaded, bound to the test database).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from book_assets.crawl.config import TASK_TYPES
from book_assets.db.connection import Database
from book_assets.definitions import ASSET_CHECKS, ASSETS
from book_assets.defs.crawl.jobs import full_refresh_job, publish_job
from book_assets.defs.resources import (
    ArchiveResource,
    DatabaseResource,
    FetcherResource,
    SchedulingResource,
    SiteResource,
)
from book_assets.defs.snapshot.assets import category_balanced_snapshot
from book_assets.queue import TaskQueue
from book_assets_tests.dagster.test_dagster_assets import insert_versioned_book, metadata_of

pytestmark = pytest.mark.slow

DAYS = ("2026-03-01", "2026-03-02", "2026-03-03")
CRAWL_KEYS = {dg.AssetKey("listing_discovery"), dg.AssetKey("book_details")}


def publishing_definitions(database_url: str, data_dir: Path) -> dg.Definitions:
    """The location's assets and jobs with the resources of the test database and a site that serves nothing
    (port 9, discard): a crawl among the runs would fail them."""
    return dg.Definitions(
        assets=ASSETS,
        asset_checks=ASSET_CHECKS,
        jobs=[full_refresh_job, publish_job],
        resources={
            "database": DatabaseResource(url=database_url),
            "site": SiteResource(base_url="http://127.0.0.1:9/"),
            "fetcher": FetcherResource(fetch_mode="http", workers=1),
            "scheduling": SchedulingResource(snapshot_budget=10, data_dir=str(data_dir)),
            "archive": ArchiveResource(data_dir=str(data_dir), warc_dir=str(data_dir / "warc")),
        },
        executor=dg.in_process_executor,
    )


def test_a_backfill_of_the_publishing_job_over_three_past_days_rebuilds_them_from_history_without_crawling(
    db: Database, database_url: str, tmp_path: Path
) -> None:
    # The history: two Travel books stored on day 1, one Poetry book on day 2, nothing on day 3.
    for i in range(2):
        insert_versioned_book(db, f"http://x.test/travel-{i}", "Travel", "10.00", datetime(2026, 3, 1, 9, tzinfo=UTC))
    insert_versioned_book(db, "http://x.test/poetry-0", "Poetry", "5.00", datetime(2026, 3, 2, 9, tzinfo=UTC))
    job = publishing_definitions(database_url, tmp_path).resolve_job_def("publish_job")

    with dg.DagsterInstance.ephemeral() as instance:
        results = {day: job.execute_in_process(partition_key=day, instance=instance) for day in DAYS}
        assert all(result.success for result in results.values())
        for key in (category_balanced_snapshot.key, dg.AssetKey("book_changes"), dg.AssetKey("raw_archive")):
            assert instance.get_materialized_partitions(key) == set(DAYS), key
        # No run crawled: neither crawl asset was materialized, and nothing was queued.
        for run in instance.get_runs():
            assert not (run.asset_selection or set()) & CRAWL_KEYS, run.job_name
        assert all(instance.get_latest_materialization_event(key) is None for key in CRAWL_KEYS)
    assert TaskQueue(db, task_types=TASK_TYPES).stats().total("pending") == 0

    # Each day as it stood at its end.
    snapshot = db.query(
        "SELECT snapshot_day::text AS day, category, count(*)::int AS n FROM category_balanced_snapshot"
        " GROUP BY 1, 2 ORDER BY 1, 2"
    )
    assert snapshot == [
        {"day": "2026-03-01", "category": "Travel", "n": 2},
        {"day": "2026-03-02", "category": "Poetry", "n": 1},
        {"day": "2026-03-02", "category": "Travel", "n": 2},
        {"day": "2026-03-03", "category": "Poetry", "n": 1},
        {"day": "2026-03-03", "category": "Travel", "n": 2},
    ]
    new_books = {day: metadata_of(result, "book_changes")["new"] for day, result in results.items()}
    assert new_books == {"2026-03-01": 2, "2026-03-02": 1, "2026-03-03": 0}


@pytest.mark.parametrize("asset", ["category_balanced_snapshot", "book_changes", "raw_archive"])
def test_a_daily_asset_materialized_without_a_partition_key_fails_naming_the_key_to_give(
    asset: str, db: Database, database_url: str, tmp_path: Path
) -> None:
    definitions = publishing_definitions(database_url, tmp_path)
    job = definitions.resolve_implicit_global_asset_job_def().get_subset(asset_selection={dg.AssetKey(asset)})
    with dg.DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(instance=instance, raise_on_error=False)
        assert not result.success
        assert instance.get_materialized_partitions(dg.AssetKey(asset)) == set()
    (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    error = failure.step_failure_data.error
    assert error is not None
    message = error.message
    assert f"{asset} is partitioned by day (UTC): materialize it with a partition key" in message
    assert db.query("SELECT count(*)::int AS n FROM category_balanced_snapshot")[0]["n"] == 0


BLOCKING_CHECKS = (
    "no_error_pages",
    "raw_html_present",
    "required_fields_present",
    "unique_urls",
    "crawl_complete",
    "no_field_drift",
)


def _crawl_recorded(instance: dg.DagsterInstance, *, failed_check: str | None = None) -> None:
    """What a crawl run records for ``book_details``: its materialization, then its blocking checks."""
    details = dg.AssetKey("book_details")
    instance.report_runless_asset_event(dg.AssetMaterialization(details))
    for name in BLOCKING_CHECKS:
        passed = name != failed_check
        instance.report_runless_asset_event(
            dg.AssetCheckEvaluation(
                asset_key=details, check_name=name, passed=passed, severity=dg.AssetCheckSeverity.ERROR
            )
        )


@pytest.mark.parametrize(
    "failed_check",
    [None, "unique_urls", "crawl_complete", "no_field_drift"],
    ids=["checks-passed", "blocking-check-failed", "partial-crawl", "field-drift"],
)
def test_publishing_follows_a_crawl_for_today_only_once_its_blocking_checks_passed(
    failed_check: str | None, database_url: str, tmp_path: Path
) -> None:
    definitions = publishing_definitions(database_url, tmp_path)
    publish = dg.AssetSelection.assets("category_balanced_snapshot", "book_changes", "raw_archive")
    with dg.DagsterInstance.ephemeral() as instance:
        before = dg.evaluate_automation_conditions(definitions, instance, asset_selection=publish)
        assert before.total_requested == 0  # no crawl yet: nothing to publish
        _crawl_recorded(instance, failed_check=failed_check)
        after = dg.evaluate_automation_conditions(definitions, instance, asset_selection=publish, cursor=before.cursor)
    today = datetime.now(UTC).date().isoformat()
    expected = set() if failed_check else {today}
    for key in ("category_balanced_snapshot", "book_changes", "raw_archive"):
        assert after.get_requested_partitions(dg.AssetKey(key)) == expected, key


def test_a_drifted_crawl_is_published_once_its_accepted_drift_passes_the_check_run_again(
    database_url: str, tmp_path: Path
) -> None:
    """Drift holds publishing; after ``drift accept`` the check run alone passes and the day proceeds."""
    definitions = publishing_definitions(database_url, tmp_path)
    publish = dg.AssetSelection.assets("category_balanced_snapshot", "book_changes", "raw_archive")
    details = dg.AssetKey("book_details")
    with dg.DagsterInstance.ephemeral() as instance:
        first = dg.evaluate_automation_conditions(definitions, instance, asset_selection=publish)
        _crawl_recorded(instance, failed_check="no_field_drift")
        held = dg.evaluate_automation_conditions(definitions, instance, asset_selection=publish, cursor=first.cursor)
        assert held.total_requested == 0
        instance.report_runless_asset_event(
            dg.AssetCheckEvaluation(
                asset_key=details, check_name="no_field_drift", passed=True, severity=dg.AssetCheckSeverity.ERROR
            )
        )
        after = dg.evaluate_automation_conditions(definitions, instance, asset_selection=publish, cursor=held.cursor)
    today = datetime.now(UTC).date().isoformat()
    assert after.get_requested_partitions(dg.AssetKey("category_balanced_snapshot")) == {today}
