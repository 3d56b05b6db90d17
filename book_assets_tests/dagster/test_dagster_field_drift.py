"""In Dagster a drifted crawl is stopped at the door: its blocking check fails the run (which alerts), nothing
downstream publishes, the last good snapshot stays the current one; once the drift is accepted, or the fixed
parser's reextract undoes it, the check passes and the day is published."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from book_assets.crawl.config import TASK_TYPES
from book_assets.crawl.pipeline import judge_again
from book_assets.db.connection import Database
from book_assets.definitions import ASSET_CHECKS, ASSETS, BOOKS_ASSETS, BOOKS_CHECKS
from book_assets.defs.crawl.checks import no_field_drift
from book_assets.defs.crawl.jobs import recheck_drift_job
from book_assets.defs.crawl.sensors import drift_cleared_sensor, failure_of
from book_assets.defs.resources import DatabaseResource
from book_assets.queue import TaskQueue
from book_assets.sandbox.redesign import Change, Redesign
from book_assets.store.drift import accept
from book_assets.store.held import reextract_held
from book_assets_tests.crawl.conftest import sandbox_config
from book_assets_tests.crawl.test_reextract_drift import parse_after_the_redesign
from book_assets_tests.dagster.test_dagster_assets import metadata_of, sandbox_resources
from book_assets_tests.dagster.test_dagster_sensors import failure_context
from book_assets_tests.dagster.test_publish_after_crawl import Daemon
from book_assets_tests.dagster.test_publish_backfill import publishing_definitions

pytestmark = pytest.mark.slow

SNAPSHOT = dg.AssetKey("category_balanced_snapshot")


def _evaluation(result: dg.ExecuteInProcessResult, name: str) -> Any:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}[name]


def test_a_drifted_crawl_fails_its_blocking_check_publishes_nothing_and_passes_once_accepted(
    db: Database, database_url: str, sandbox_factory: Any, tmp_path: Path
) -> None:
    site = sandbox_factory(books=100, categories=4)
    resources = sandbox_resources(database_url, site, tmp_path, workers=1)
    today = datetime.now(UTC).date().isoformat()
    with dg.instance_for_test() as instance:
        good = dg.materialize(
            [*BOOKS_ASSETS, *BOOKS_CHECKS], instance=instance, resources=resources, partition_key=today
        )
        assert good.success and _evaluation(good, "no_field_drift").passed
        # A good day shows each field's figures too: the fill rate the history shows, the values' shape.
        coverage = {r.data["field"]: r.data for r in metadata_of(good, "book_details")["field_coverage"].records}
        assert coverage["title"]["fill_rate"] == 1.0 and coverage["title"]["base_fill_rate"] is None
        assert coverage["description"]["median_length"] > 0 and not any(r["drifted"] for r in coverage.values())

        site.set_redesign(Redesign(day=0, changes=frozenset({Change.DESCRIPTION_ID})))
        drifted = dg.materialize(
            [*BOOKS_ASSETS, *BOOKS_CHECKS],
            instance=instance,
            resources=resources,
            partition_key=today,
            raise_on_error=False,
        )
        assert not drifted.success
        details = metadata_of(drifted, "book_details")
        crawl_id = details["crawl_id"]
        assert crawl_id == good_crawl(good) + 1 and details["drifted_fields"] == 1
        coverage = {r.data["field"]: r.data for r in details["field_coverage"].records}
        assert (coverage["description"]["fill_rate"], coverage["description"]["drifted"]) == (0.0, True)
        assert coverage["description"]["base_fill_rate"] > 0.9
        check = _evaluation(drifted, "no_field_drift")
        assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
        assert f"field drift in crawl {crawl_id}: description: " in str(check.description)
        assert "-> 0 % of pages" in str(check.description)
        # Nothing downstream published: the snapshot of the good run stays the current one.
        published = [e.asset_key for e in drifted.get_asset_materialization_events()]
        assert SNAPSHOT not in published
        latest = instance.get_latest_materialization_event(SNAPSHOT)
        assert latest is not None and latest.run_id == good.run_id
        # The failed run is what alert_sensor posts, naming the check.
        alert = failure_of(failure_context(instance, drifted, "run_failure_summary"))
        assert "no_field_drift" in alert.text

        accept(db, crawl_id, "description", "ops-on-call")
        again = dg.materialize(
            [*ASSETS, no_field_drift],
            selection=dg.AssetSelection.checks(no_field_drift),
            instance=instance,
            resources=resources,
        )
        assert again.success
        passed = _evaluation(again, "no_field_drift")
        assert passed.passed and passed.metadata["crawl_id"].value == crawl_id


def _drift_cleared_tick(instance: dg.DagsterInstance, database_url: str) -> dg.SensorResult:
    context = dg.build_sensor_context(instance=instance, resources={"database": DatabaseResource(url=database_url)})
    result = drift_cleared_sensor(context)
    assert isinstance(result, dg.SensorResult)
    return result


def test_an_accepted_drift_has_its_check_run_again_by_itself_and_the_day_is_published(
    db: Database, database_url: str, sandbox_factory: Any, tmp_path: Path
) -> None:
    """After ``drift accept`` nobody re-runs anything by hand: ``drift_cleared_sensor`` sees the failed check's
    crawl no longer drifts and requests ``recheck_drift_job`` (once); the check passes, and the publishing
    automation, which held the day while it failed, requests the day's partition."""
    site = sandbox_factory(books=100, categories=4)
    resources = sandbox_resources(database_url, site, tmp_path, workers=1)
    today = datetime.now(UTC).date().isoformat()
    with dg.instance_for_test() as instance:
        daemon = Daemon(publishing_definitions(database_url, tmp_path), instance)
        good = dg.materialize(
            [*BOOKS_ASSETS, *BOOKS_CHECKS], instance=instance, resources=resources, partition_key=today
        )
        assert good.success
        assert daemon.tick(datetime.now(UTC)) == set()  # the good run published the day itself
        assert "nothing is held" in str(_drift_cleared_tick(instance, database_url).skip_reason)

        site.set_redesign(Redesign(day=0, changes=frozenset({Change.DESCRIPTION_TEASER})))
        drifted = dg.materialize(
            [*BOOKS_ASSETS, *BOOKS_CHECKS],
            instance=instance,
            resources=resources,
            partition_key=today,
            raise_on_error=False,
        )
        assert not drifted.success
        crawl_id = metadata_of(drifted, "book_details")["crawl_id"]
        check = _evaluation(drifted, "no_field_drift")
        assert not check.passed and "description: median length" in str(check.description)
        assert daemon.tick(datetime.now(UTC)) == set()  # held: a blocking check of the crawl failed
        held = _drift_cleared_tick(instance, database_url)
        assert not held.run_requests and f"crawl {crawl_id} still drifts (description)" in str(held.skip_reason)

        accept(db, crawl_id, "description", "ops-on-call")
        cleared = list(_drift_cleared_tick(instance, database_url).run_requests or ())
        assert len(cleared) == 1 and cleared[0].job_name in (None, "recheck_drift_job")
        again = list(_drift_cleared_tick(instance, database_url).run_requests or ())
        assert [r.run_key for r in again] == [cleared[0].run_key]  # the same key: Dagster launches it once
        job = dg.Definitions(
            assets=ASSETS, asset_checks=ASSET_CHECKS, jobs=[recheck_drift_job], resources=resources
        ).resolve_job_def("recheck_drift_job")
        rerun = job.execute_in_process(instance=instance, tags=cleared[0].tags)
        assert rerun.success
        passed = _evaluation(rerun, "no_field_drift")
        assert passed.passed and passed.metadata["crawl_id"].value == crawl_id
        assert "nothing is held" in str(_drift_cleared_tick(instance, database_url).skip_reason)
        assert daemon.tick(datetime.now(UTC)) == {today}


def good_crawl(result: dg.ExecuteInProcessResult) -> int:
    return int(metadata_of(result, "book_details")["crawl_id"])


def test_a_drift_the_fixed_parser_undoes_clears_on_reextract_and_the_day_is_published(
    db: Database, database_url: str, sandbox_factory: Any, tmp_path: Path
) -> None:
    """The drift was the parser's: once it reads the redesigned markup, reextract rebuilds the held pages from
    what the crawl kept and judges the crawl again; the check re-run passes, no acceptance recorded, and the
    publishing job publishes the day with the day's values."""
    site = sandbox_factory(books=60, categories=3)
    resources = sandbox_resources(database_url, site, tmp_path, workers=1)
    today = datetime.now(UTC).date().isoformat()
    with dg.instance_for_test() as instance:
        good = dg.materialize(
            [*BOOKS_ASSETS, *BOOKS_CHECKS], instance=instance, resources=resources, partition_key=today
        )
        assert good.success
        site.set_redesign(Redesign(day=0, changes=frozenset({Change.RATING_CLASS, Change.DESCRIPTION_ID})))
        drifted = dg.materialize(
            [*BOOKS_ASSETS, *BOOKS_CHECKS],
            instance=instance,
            resources=resources,
            partition_key=today,
            raise_on_error=False,
        )
        assert not drifted.success
        crawl_id = metadata_of(drifted, "book_details")["crawl_id"]
        assert not _evaluation(drifted, "no_field_drift").passed
        latest = instance.get_latest_materialization_event(SNAPSHOT)
        assert latest is not None and latest.run_id == good.run_id

        requests = site.stats().total_requests
        queue = TaskQueue(db, task_types=TASK_TYPES)
        assert reextract_held(db, queue, parser=parse_after_the_redesign).still_failing == 0
        judged = judge_again(db, queue, sandbox_config(site.url))
        assert [(r.crawl_id, r.resolved) for r in judged] == [(crawl_id, ("rating",))]
        assert site.stats().total_requests == requests
        assert _drift_cleared_tick(instance, database_url).run_requests  # the sensor would run the check again

        again = dg.materialize(
            [*ASSETS, no_field_drift],
            selection=dg.AssetSelection.checks(no_field_drift),
            instance=instance,
            resources=resources,
        )
        assert again.success
        passed = _evaluation(again, "no_field_drift")
        assert passed.passed and passed.metadata["crawl_id"].value == crawl_id
        assert db.query("SELECT count(*) AS n FROM drift_acceptances")[0]["n"] == 0

        published = publishing_definitions(database_url, tmp_path).resolve_job_def("publish_job")
        result = published.execute_in_process(partition_key=today, instance=instance)
        assert result.success
        latest = instance.get_latest_materialization_event(SNAPSHOT)
        assert latest is not None and latest.run_id == result.run_id
    ratings = db.query("SELECT url, rating FROM category_balanced_snapshot WHERE snapshot_day = %s", (today,))
    stored = {r["url"]: r["rating_value"] for r in db.query("SELECT url, rating_value FROM books")}
    assert ratings and all(r["rating"] is not None and r["rating"] == stored[r["url"]] for r in ratings)
