"""The code location loads, and holds exactly the assets, checks, jobs, schedules and sensors it should."""

from __future__ import annotations

import dagster as dg
import pytest

from book_assets.definitions import build_definitions, defs
from book_assets.defs.crawl.assets import CRAWL_TAG
from book_assets.settings import ConfigError, load_settings


@pytest.fixture(scope="module")
def repo() -> dg.RepositoryDefinition:
    return defs.get_repository_def()


def test_definitions_snapshot_of_names(repo: dg.RepositoryDefinition) -> None:
    graph = repo.asset_graph
    assert sorted(k.to_user_string() for k in graph.get_all_asset_keys()) == [
        "book_details",
        "category_balanced_snapshot",
        "listing_discovery",
    ]
    assert sorted((c.asset_key.to_user_string(), c.name) for c in graph.asset_check_keys) == [
        ("book_details", "no_error_pages"),
        ("book_details", "raw_html_present"),
        ("book_details", "required_fields_present"),
        ("book_details", "unique_urls"),
        ("category_balanced_snapshot", "shares_within_tolerance"),
    ]
    jobs = sorted(j.name for j in repo.get_all_jobs() if not j.name.startswith("__"))
    assert jobs == ["crawl_queue_job", "drain_queue_job", "full_refresh_job", "requeue_failed_tasks"]
    assert [s.name for s in repo.schedule_defs] == ["daily_full_refresh"]
    assert sorted(s.name for s in repo.sensor_defs) == ["failed_tasks_sensor", "run_failure_summary"]


def test_lineage_runs_discovery_then_details_then_snapshot(repo: dg.RepositoryDefinition) -> None:
    graph = repo.asset_graph
    details = graph.get(dg.AssetKey("book_details"))
    snapshot = graph.get(dg.AssetKey("category_balanced_snapshot"))
    assert details.parent_keys == {dg.AssetKey("listing_discovery")}
    assert snapshot.parent_keys == {dg.AssetKey("book_details")}


def test_network_steps_retry_with_exponential_jittered_backoff(repo: dg.RepositoryDefinition) -> None:
    for name in ("listing_discovery", "book_details"):
        policy = repo.assets_defs_by_key[dg.AssetKey(name)].op.retry_policy
        assert policy is not None and policy.max_retries >= 1, name
        assert policy.backoff == dg.Backoff.EXPONENTIAL and policy.jitter == dg.Jitter.PLUS_MINUS, name
    drain_op = repo.get_job("crawl_queue_job").graph.node_named("drain_queue").definition
    assert drain_op.retry_policy is not None and drain_op.retry_policy.backoff == dg.Backoff.EXPONENTIAL


def test_crawl_jobs_carry_the_crawl_tag_limited_by_dagster_yaml(repo: dg.RepositoryDefinition) -> None:
    for name in ("full_refresh_job", "crawl_queue_job", "drain_queue_job"):
        assert CRAWL_TAG in repo.get_job(name).tags, name
    assert CRAWL_TAG not in repo.get_job("requeue_failed_tasks").tags


def test_full_refresh_job_materializes_the_three_assets(repo: dg.RepositoryDefinition) -> None:
    job = repo.get_job("full_refresh_job")
    assert {k.to_user_string() for k in job.asset_layer.executable_asset_keys} == {
        "listing_discovery",
        "book_details",
        "category_balanced_snapshot",
    }


def test_data_corruption_checks_are_blocking_errors_and_share_check_warns(repo: dg.RepositoryDefinition) -> None:
    graph = repo.asset_graph
    for key in graph.asset_check_keys:
        spec = graph.get_check_spec(key)
        if key.asset_key == dg.AssetKey("book_details"):
            assert spec.blocking, key
        else:
            assert not spec.blocking, key


def test_schedule_runs_the_full_refresh_daily_in_utc() -> None:
    schedule = defs.resolve_schedule_def("daily_full_refresh")
    assert schedule.cron_schedule == load_settings().schedule_cron
    assert schedule.execution_timezone == "UTC"
    assert schedule.job_name == "full_refresh_job"
    context = dg.build_schedule_context(scheduled_execution_time=None)
    requests = list(schedule.evaluate_tick(context).run_requests or [])
    assert len(requests) == 1 and requests[0].job_name in (None, "full_refresh_job")


def test_cron_from_settings_is_used() -> None:
    custom = build_definitions(load_settings(schedule_cron="30 4 * * 1"))
    assert custom.resolve_schedule_def("daily_full_refresh").cron_schedule == "30 4 * * 1"


def test_bad_cron_fails_at_load_naming_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"schedule_cron \(BOOK_PIPELINE_SCHEDULE_CRON\)"):
        build_definitions(load_settings(schedule_cron="every day at 3"))


def test_database_url_is_never_shown_with_its_password() -> None:
    from book_assets.defs.resources import DatabaseResource

    resource = DatabaseResource(url="postgresql://crawler:s3cret@db.example:5432/books")
    assert "s3cret" not in resource.masked_url()
    assert resource.masked_url() == "postgresql://crawler:***@db.example:5432/books"


def test_jobs_run_in_process_since_crawl_steps_spawn_their_own_workers(repo: dg.RepositoryDefinition) -> None:
    for name in ("full_refresh_job", "crawl_queue_job"):
        assert repo.get_job(name).executor_def.name == dg.in_process_executor.name, name
