"""The queue jobs fan the drain out into one Dagster step per worker, and the executor places the steps.

Under the multiprocess executor (the local default) each drain step is a process of its own and the crawl
stores every book of the categories it crawls; the ``step_executor`` setting alone swaps in ``k8s_job_executor`` or
``docker_executor``, whose run config (deploy/k8s/run-config.yaml, deploy/docker/run-config.yaml, the files
docs/deploy.md tells operators to use) validates against the job. No cluster and no Docker engine exist here:
those two are checked as configuration, not run.
"""

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from book_assets.crawl.pipeline import begin
from book_assets.db.connection import Database
from book_assets.definitions import build_definitions
from book_assets.defs.crawl.assets import crawl
from book_assets.defs.crawl.checks import BOOK_CHECKS, LISTING_CHECKS
from book_assets.defs.crawl.fan_out import crawl_run_config, queue_jobs
from book_assets.defs.resources import DatabaseResource, FetcherResource, SchedulingResource, SiteResource
from book_assets.sandbox.server import SandboxServer
from book_assets.settings import PROJECT_ROOT, ConfigError
from book_assets.store.books import book_counts
from book_assets_tests.crawl.conftest import sandbox_config

DRAIN_STEPS = ("crawl.drain_queue[worker_0]", "crawl.drain_queue[worker_1]")
#: Two categories (184 books over 11 listing pages) keep both drain steps busy; the whole catalogue through
#: Dagster is test_dagster_assets' full materialization.
CATEGORIES = ["Default", "Mystery"]
BOOKS = 184


def queue_definitions(executor: str, resources: Mapping[str, object]) -> dg.Definitions:
    """The queue jobs over the crawl asset and its checks, with ``resources``."""
    return dg.Definitions(
        assets=[crawl], asset_checks=[*LISTING_CHECKS, *BOOK_CHECKS], jobs=queue_jobs(executor), resources=resources
    )


def sandbox_crawl_queue_job(database_url: str, sandbox_url: str, host: str) -> dg.JobDefinition:
    """The project's ``crawl_queue_job`` (multiprocess) bound to the test database and the sandbox; a step
    process rebuilds it from these arguments (``dg.build_reconstructable_job``)."""
    resources = {
        "database": DatabaseResource(url=database_url),
        "site": SiteResource(base_url=f"{sandbox_url}/", allowed_domains=[host], categories=CATEGORIES),
        "fetcher": FetcherResource(fetch_mode="http", workers=2, concurrency=4),
        "scheduling": SchedulingResource(),
    }
    return queue_definitions("multiprocess", resources).resolve_job_def("crawl_queue_job")


@pytest.mark.slow
def test_crawl_queue_job_drains_in_one_process_per_worker_and_stores_every_book(
    db: Database, database_url: str, sandbox: SandboxServer, tmp_path: Path
) -> None:
    job = dg.build_reconstructable_job(
        __name__,
        sandbox_crawl_queue_job.__name__,
        # dagster annotates the arguments as a 1-tuple (tuple[object]), not as tuple[object, ...]
        reconstructable_args=(database_url, sandbox.url, sandbox.host),  # type: ignore[arg-type]
    )
    # Each step still runs in a process of its own, forked from a server that imported this module once:
    # spawned, every one of the five steps would import Dagster and the project again (seconds each).
    forkserver: dict[str, Any] = {"execution": {"config": {"start_method": {"forkserver": {}}}}}
    with (
        dg.instance_for_test(temp_dir=str(tmp_path)) as instance,
        dg.execute_job(job, instance=instance, run_config=forkserver, raise_on_error=False) as result,
    ):
        assert result.success
        events = result.all_events
        starts = {e.step_key: e.pid for e in events if e.event_type == dg.DagsterEventType.STEP_START}
        outputs: dict[str | None, dict[str, Any]] = {
            e.step_key: {k: v.value for k, v in e.step_output_data.metadata.items()}
            for e in events
            if e.event_type == dg.DagsterEventType.STEP_OUTPUT and e.step_key in DRAIN_STEPS
        }
        materializations = [
            e.step_materialization_data.materialization for e in result.get_asset_materialization_events()
        ]
        materialized = {
            m.asset_key.to_user_string(): {k: getattr(v, "value", v) for k, v in m.metadata.items()}
            for m in materializations
        }
    assert set(DRAIN_STEPS) <= set(starts)
    drain_pids = {starts[step] for step in DRAIN_STEPS}
    assert len(drain_pids) == 2 and os.getpid() not in drain_pids  # a process of its own for each step
    for step in DRAIN_STEPS:  # and the worker ran in the step's process (worker ids are host:pid)
        assert outputs[step]["worker"].endswith(f":{starts[step]}"), step

    counts = book_counts(db)
    assert (counts["total"], counts["unique_urls"], counts["with_html"]) == (BOOKS, BOOKS, BOOKS)
    details = materialized["book_details"]
    assert details["books_new"] == BOOKS and details["failed"] == 0 and details["dagster/row_count"] == BOOKS
    assert details["pages"] == sum(outputs[step]["pages"] for step in DRAIN_STEPS)
    assert materialized["listing_discovery"]["books_found"] == BOOKS
    # The report settled the crawl its run's seed opened.
    assert [r["outcome"] for r in db.query("SELECT outcome FROM crawls")] == ["decided"]


def _run_config(name: str) -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load((PROJECT_ROOT / "deploy" / name / "run-config.yaml").read_text())
    return config


@pytest.mark.parametrize(
    ("setting", "executor", "run_config"),
    [("k8s", "k8s", "k8s"), ("docker", "docker", "docker"), ("in_process", "in_process", None)],
)
def test_the_step_executor_setting_alone_places_the_drain_steps(
    monkeypatch: pytest.MonkeyPatch, setting: str, executor: str, run_config: str | None
) -> None:
    monkeypatch.setenv("BOOK_PIPELINE_STEP_EXECUTOR", setting)
    definitions = build_definitions()
    for name in ("crawl_queue_job", "drain_queue_job"):
        job = definitions.resolve_job_def(name)
        assert job.executor_def.name == executor, name
        config = _run_config(run_config) if run_config else {}
        assert dg.validate_run_config(job, config), name
    # The asset jobs keep their one in-process crawl step whatever the setting.
    assert definitions.resolve_job_def("full_refresh_job").executor_def.name == "in_process"


def test_the_default_places_each_drain_step_in_a_process_of_its_own() -> None:
    job = build_definitions().resolve_job_def("crawl_queue_job")
    assert job.executor_def.name == dg.multiprocess_executor.name


def test_run_config_an_executor_does_not_know_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOOK_PIPELINE_STEP_EXECUTOR", "k8s")
    job = build_definitions().resolve_job_def("crawl_queue_job")
    with pytest.raises(dg.DagsterInvalidConfigError, match="job_namespace"):
        dg.validate_run_config(job, {"execution": {"config": {"job_namespace": 3}}})


def test_an_unknown_step_executor_fails_the_load_naming_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOOK_PIPELINE_STEP_EXECUTOR", "kubernetes")
    with pytest.raises(ConfigError, match=r"step_executor \(BOOK_PIPELINE_STEP_EXECUTOR\)"):
        build_definitions()


@pytest.mark.slow
def test_a_deep_budget_is_split_once_after_discovery_and_met_by_the_drain_steps(
    db: Database, database_url: str, sandbox: SandboxServer
) -> None:
    resources = {
        "database": DatabaseResource(url=database_url),
        "site": SiteResource(base_url=f"{sandbox.url}/", allowed_domains=[sandbox.host]),
        "fetcher": FetcherResource(fetch_mode="http", workers=2, concurrency=4),
        "scheduling": SchedulingResource(deep_budget=60, weights={"Travel": 50, "*": 1}),
    }
    job = queue_definitions("in_process", resources).resolve_job_def("crawl_queue_job")
    result = job.execute_in_process()
    assert result.success
    assert book_counts(db)["total"] == 60
    details = next(
        e.step_materialization_data.materialization
        for e in result.get_asset_materialization_events()
        if e.step_materialization_data.materialization.asset_key == dg.AssetKey("book_details")
    ).metadata
    assert details["budget_met"].value is True and details["budget_completed"].value == 60
    table = details["quotas"]
    assert isinstance(table, dg.TableMetadataValue)
    quotas: dict[Any, Any] = {r.data["category"]: r.data["quota"] for r in table.records}
    assert quotas["Travel"] == 11 and sum(quotas.values()) == 60
    # The run evaluated the checks of what it materialized, as the asset jobs' check steps do.
    checks = {(e.asset_key.to_user_string(), e.check_name): e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {
        ("listing_discovery", "found_books"): True,
        ("listing_discovery", "no_failed_listing_pages"): True,
        ("book_details", "unique_urls"): True,
        ("book_details", "raw_html_present"): True,
        ("book_details", "no_error_pages"): True,
        ("book_details", "required_fields_present"): True,
        ("book_details", "crawl_complete"): True,
        ("book_details", "no_field_drift"): True,
    }


def test_a_drain_job_settles_no_crawl_unless_its_report_names_one(
    db: Database, database_url: str, sandbox: SandboxServer
) -> None:
    owner = begin(database_url, sandbox_config(sandbox.url, categories=("Travel",)))  # its run elsewhere
    assert owner.opened is not None
    resources = {
        "database": DatabaseResource(url=database_url),
        "site": SiteResource(base_url=f"{sandbox.url}/", allowed_domains=[sandbox.host], categories=["Travel"]),
        "fetcher": FetcherResource(fetch_mode="http", workers=1, concurrency=4),
        "scheduling": SchedulingResource(),
    }
    job = queue_definitions("in_process", resources).resolve_job_def("drain_queue_job")
    outcome = "SELECT finished_at, outcome, complete_categories FROM crawls WHERE id = %s"

    assert job.execute_in_process().success
    assert book_counts(db)["total"] == 11  # the drain did the owner's work ...
    assert db.query(outcome, (owner.opened.id,))[0]["finished_at"] is None  # ... and left its crawl open

    named = crawl_run_config(seed=False, step_per_worker=True, settle_crawl=owner.opened.id)
    assert job.execute_in_process(run_config=named).success
    row = db.query(outcome, (owner.opened.id,))[0]
    assert (row["outcome"], row["complete_categories"]) == ("decided", 1)


def test_a_queue_run_that_stored_an_error_page_records_its_materialization_then_fails_on_the_blocking_check(
    db: Database, database_url: str, sandbox: SandboxServer
) -> None:
    db.query(
        "INSERT INTO books (url, title, category, price_amount, upc, raw_html, http_status) "
        "VALUES ('http://x.test/404', '404', 'Travel', 1, 'u', '<html>Not Found</html>', 404)"
    )
    resources = {
        "database": DatabaseResource(url=database_url),
        "site": SiteResource(base_url=f"{sandbox.url}/", allowed_domains=[sandbox.host]),
        "fetcher": FetcherResource(fetch_mode="http", workers=1, concurrency=4),
        "scheduling": SchedulingResource(),
    }
    job = queue_definitions("in_process", resources).resolve_job_def("drain_queue_job")
    result = job.execute_in_process(raise_on_error=False)
    assert not result.success
    # A drain-only run opened no crawl: it discovered nothing, so only book_details is materialized.
    materialized = result.get_asset_materialization_events()
    assert {e.step_materialization_data.materialization.asset_key.to_user_string() for e in materialized} == {
        "book_details"
    }
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert not checks["no_error_pages"].passed and checks["no_error_pages"].blocking
    assert "found_books" not in checks  # a drain-only run started no discovery to judge
    (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    error = failure.step_failure_data.error
    assert failure.step_key == "book_details_no_error_pages" and error and "no_error_pages" in error.message
