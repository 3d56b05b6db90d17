"""The code location loads from the defs folder, and holds exactly the graph it should.

``test_definitions_snapshot`` is the graph in one value (names, groups, kinds, owners, pools, partitions,
freshness, automation, checks), in the style of dagster-open-platform's snapshot tests: a change to the graph
shows here.
"""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg
import pytest
import yaml
from dagster._core.definitions.freshness import CronFreshnessPolicy

from book_assets.db.connection import Database
from book_assets.definitions import build_definitions
from book_assets.defs.catalog import BOOKS_SCHEMA, SNAPSHOT_SCHEMA
from book_assets.settings import PROJECT_ROOT, ConfigError, load_settings


@pytest.fixture(scope="module")
def repo() -> dg.RepositoryDefinition:
    return build_definitions().get_repository_def()


def steps_and_pools(node: dg.NodeDefinition) -> dict[str, str | None]:
    """The ops that compute an asset, with their pools (one for an op-backed asset, every op of a graph's)."""
    if isinstance(node, dg.GraphDefinition):
        return {name: pool for inner in node.nodes for name, pool in steps_and_pools(inner.definition).items()}
    assert isinstance(node, dg.OpDefinition)
    return {node.name: node.pool}


def asset_facts(repo: dg.RepositoryDefinition) -> dict[str, dict[str, Any]]:
    facts = {}
    for key, assets_def in repo.assets_defs_by_key.items():
        spec = next(s for s in assets_def.specs if s.key == key)
        partitions = spec.partitions_def
        freshness = spec.freshness_policy
        facts[key.to_user_string()] = {
            "group": spec.group_name,
            "kinds": sorted(spec.kinds),
            "owners": list(spec.owners),
            "tags": {k: v for k, v in spec.tags.items() if not k.startswith("dagster/kind/")},
            "steps": steps_and_pools(assets_def.node_def),
            "partitions": type(partitions).__name__ if partitions else None,
            "freshness": type(freshness).__name__ if freshness else None,
            "automation": spec.automation_condition.get_label() if spec.automation_condition else None,
            "table_name": spec.metadata.get("dagster/table_name"),
            "deps": sorted(d.asset_key.to_user_string() for d in spec.deps),
        }
    return facts


def test_definitions_snapshot(repo: dg.RepositoryDefinition) -> None:
    assert asset_facts(repo) == {
        "listing_discovery": {
            "group": "crawl",
            "kinds": ["postgres", "python"],
            "owners": ["team:book-pipeline"],
            "tags": {"book-pipeline/layer": "crawl"},
            "steps": {"seed_queue": "crawl", "share_work": "crawl", "drain_queue": None, "report_crawl": None},
            "partitions": None,
            "freshness": None,
            "automation": None,
            "table_name": None,
            "deps": [],
        },
        "book_details": {
            "group": "crawl",
            "kinds": ["postgres", "python"],
            "owners": ["team:book-pipeline"],
            "tags": {"book-pipeline/layer": "crawl"},
            "steps": {"seed_queue": "crawl", "share_work": "crawl", "drain_queue": None, "report_crawl": None},
            "partitions": None,
            "freshness": "CronFreshnessPolicy",
            "automation": None,
            "table_name": "public.books",
            "deps": ["listing_discovery"],
        },
        "quotes/listing_discovery": {
            "group": "quotes_crawl",
            "kinds": ["postgres", "python"],
            "owners": ["team:book-pipeline"],
            "tags": {"book-pipeline/layer": "crawl"},
            "steps": {"seed_queue": "crawl", "share_work": "crawl", "drain_queue": None, "report_crawl": None},
            "partitions": None,
            "freshness": None,
            "automation": None,
            "table_name": None,
            "deps": [],
        },
        "quotes/details": {
            "group": "quotes_crawl",
            "kinds": ["postgres", "python"],
            "owners": ["team:book-pipeline"],
            "tags": {"book-pipeline/layer": "crawl"},
            "steps": {"seed_queue": "crawl", "share_work": "crawl", "drain_queue": None, "report_crawl": None},
            "partitions": None,
            "freshness": "CronFreshnessPolicy",
            "automation": None,
            "table_name": None,
            "deps": ["quotes/listing_discovery"],
        },
        "raw_archive": {
            "group": "archive",
            "kinds": ["python", "warc"],
            "owners": ["team:book-pipeline"],
            "tags": {"book-pipeline/layer": "crawl"},
            "steps": {"raw_archive": None},
            "partitions": "DailyPartitionsDefinition",
            "freshness": None,
            "automation": "once the day's crawl passed its blocking checks",
            "table_name": None,
            "deps": ["book_details"],
        },
        "category_balanced_snapshot": {
            "group": "snapshot",
            "kinds": ["pandas", "parquet", "postgres"],
            "owners": ["team:book-pipeline"],
            "tags": {"book-pipeline/layer": "publish"},
            "steps": {"category_balanced_snapshot": None},
            "partitions": "DailyPartitionsDefinition",
            "freshness": None,
            "automation": "once the day's crawl passed its blocking checks",
            "table_name": "public.category_balanced_snapshot",
            "deps": ["book_details"],
        },
        "quotes/category_balanced_snapshot": {
            "group": "quotes_snapshot",
            "kinds": ["pandas", "parquet"],
            "owners": ["team:book-pipeline"],
            "tags": {"book-pipeline/layer": "publish"},
            "steps": {"quotes__category_balanced_snapshot": None},
            "partitions": "DailyPartitionsDefinition",
            "freshness": None,
            "automation": "once the day's crawl passed its blocking checks",
            "table_name": None,
            "deps": ["quotes/details"],
        },
        "book_changes": {
            "group": "changes",
            "kinds": ["csv", "postgres"],
            "owners": ["team:book-pipeline"],
            "tags": {"book-pipeline/layer": "publish"},
            "steps": {"book_changes": None},
            "partitions": "DailyPartitionsDefinition",
            "freshness": None,
            "automation": "once the day's crawl passed its blocking checks",
            "table_name": None,
            "deps": ["book_details"],
        },
    }
    graph = repo.asset_graph
    checks = {(k.asset_key.to_user_string(), k.name): graph.get_check_spec(k) for k in graph.asset_check_keys}
    assert {name: spec.blocking for name, spec in checks.items()} == {
        ("listing_discovery", "found_books"): True,
        ("listing_discovery", "no_failed_listing_pages"): False,
        ("book_details", "no_error_pages"): True,
        ("book_details", "raw_html_present"): True,
        ("book_details", "required_fields_present"): True,
        ("book_details", "unique_urls"): True,
        ("book_details", "crawl_complete"): True,
        ("book_details", "no_field_drift"): True,
        ("quotes/listing_discovery", "found_authors"): True,
        ("quotes/listing_discovery", "no_failed_listing_pages"): False,
        ("quotes/details", "unique_urls"): True,
        ("quotes/details", "raw_html_present"): True,
        ("quotes/details", "required_fields_present"): True,
        ("quotes/details", "quote_authors_stored"): True,
        ("quotes/details", "crawl_complete"): True,
        ("category_balanced_snapshot", "shares_within_tolerance"): False,
        ("quotes/category_balanced_snapshot", "shares_within_tolerance"): False,
    }
    # Every job that drains a catalogue's queue materializes its one crawl asset: one graph, whichever job ran.
    crawl_assets = ["book_details", "listing_discovery"]
    quotes_assets = ["quotes/details", "quotes/listing_discovery"]
    jobs = {
        j.name: sorted(k.to_user_string() for k in j.asset_layer.selected_asset_keys)
        for j in repo.get_all_jobs()
        if not j.name.startswith("__")
    }
    assert jobs == {
        "crawl_queue_job": crawl_assets,
        "drain_queue_job": crawl_assets,
        "full_refresh_job": crawl_assets,
        "publish_job": ["book_changes", "category_balanced_snapshot", "raw_archive"],
        "quotes_publish_job": ["quotes/category_balanced_snapshot"],
        "quotes_crawl_queue_job": quotes_assets,
        "quotes_drain_queue_job": quotes_assets,
        "quotes_full_refresh_job": quotes_assets,
        "quotes_recrawl_failed_job": quotes_assets,
        "recheck_drift_job": [],
        "recrawl_failed_job": crawl_assets,
        "requeue_failed_tasks": [],
    }
    assert sorted(s.name for s in repo.schedule_defs) == ["daily_full_refresh", "quotes_daily_full_refresh"]
    graphs = {
        name: next(n.definition.name for n in repo.get_job(name).graph.nodes if n.name.endswith("crawl"))
        for name in ("full_refresh_job", "quotes_full_refresh_job")
    }
    assert graphs == {"full_refresh_job": "crawl", "quotes_full_refresh_job": "quotes_crawl"}
    assert sorted(s.name for s in repo.sensor_defs) == [
        "alert_sensor",
        "book_details_observer",
        "drift_cleared_sensor",
        "failed_tasks_sensor",
        "publish_after_crawl",
        "quotes_details_observer",
        "quotes_failed_tasks_sensor",
        "run_failure_summary",
    ]


@pytest.mark.parametrize(
    ("schema", "table"),
    [(BOOKS_SCHEMA, "books"), (SNAPSHOT_SCHEMA, "category_balanced_snapshot")],
    ids=["books", "snapshot"],
)
def test_declared_column_schemas_equal_the_migrated_tables(schema: dg.TableSchema, table: str, db: Database) -> None:
    rows = db.query(
        "SELECT column_name, is_nullable FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name = %s ORDER BY ordinal_position",
        (table,),
    )
    declared = [(c.name, not c.constraints.nullable) for c in schema.columns]
    assert declared == [(r["column_name"], r["is_nullable"] == "NO") for r in rows]


def test_snapshot_declares_its_table_before_any_run(repo: dg.RepositoryDefinition) -> None:
    spec = next(iter(repo.assets_defs_by_key[dg.AssetKey("category_balanced_snapshot")].specs))
    assert spec.metadata["dagster/column_schema"] == SNAPSHOT_SCHEMA
    assert spec.metadata["dagster/table_name"] == "public.category_balanced_snapshot"


def test_snapshot_partitions_are_days_up_to_today_in_utc(repo: dg.RepositoryDefinition) -> None:
    partitions = repo.assets_defs_by_key[dg.AssetKey("category_balanced_snapshot")].partitions_def
    assert isinstance(partitions, dg.DailyPartitionsDefinition) and partitions.timezone == "UTC"
    assert partitions.get_last_partition_key() == datetime.now(UTC).date().isoformat()


def test_assets_carry_code_references(repo: dg.RepositoryDefinition) -> None:
    for key, assets_def in repo.assets_defs_by_key.items():
        spec = next(s for s in assets_def.specs if s.key == key)
        references = spec.metadata["dagster/code_references"].code_references
        assert any(str(r.file_path).endswith(".py") for r in references), key


def test_schedule_runs_the_crawl_unpartitioned_in_utc(repo: dg.RepositoryDefinition) -> None:
    schedule = repo.get_schedule_def("daily_full_refresh")
    assert schedule.cron_schedule == load_settings().schedule_cron
    assert schedule.execution_timezone == "UTC" and schedule.job_name == "full_refresh_job"
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    tick = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
    with (
        dg.instance_for_test() as instance,
        dg.build_schedule_context(instance=instance, scheduled_execution_time=tick, repository_def=repo) as context,
    ):
        requests = list(schedule.evaluate_tick(context).run_requests or [])
    assert [r.partition_key for r in requests] == [None]


def test_the_crawl_job_is_unpartitioned_and_the_publishing_job_holds_the_daily_assets(
    repo: dg.RepositoryDefinition,
) -> None:
    crawl, publish = repo.get_job("full_refresh_job"), repo.get_job("publish_job")
    assert crawl.partitions_def is None  # nothing to backfill: a crawl fetches the site as it is now
    assert {k.to_user_string() for k in crawl.asset_layer.executable_asset_keys} == {
        "listing_discovery",
        "book_details",
    }
    assert isinstance(publish.partitions_def, dg.DailyPartitionsDefinition)
    assert {k.to_user_string() for k in publish.asset_layer.executable_asset_keys} == {
        "category_balanced_snapshot",
        "book_changes",
        "raw_archive",
    }
    sensor = repo.get_sensor_def("publish_after_crawl")
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING


@pytest.mark.parametrize("cron", ["0 3 * * *", "30 4 * * 1", "0 */6 * * *"])
def test_freshness_follows_the_schedules_cron(cron: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOOK_PIPELINE_SCHEDULE_CRON", cron)
    repo = build_definitions().get_repository_def()
    spec = repo.assets_defs_by_key[dg.AssetKey("book_details")].specs_by_key[dg.AssetKey("book_details")]
    policy = spec.freshness_policy
    # The run each tick starts must have landed by an hour later (refresh_deadline_minutes), on any cron.
    deadline = {"0 3 * * *": "0 4 * * *", "30 4 * * 1": "30 5 * * 1", "0 */6 * * *": "0 1,7,13,19 * * *"}
    assert isinstance(policy, CronFreshnessPolicy)
    assert (policy.deadline_cron, policy.lower_bound_delta, policy.timezone) == (
        deadline[cron],
        timedelta(hours=1),
        "UTC",
    )


def test_cron_from_the_environment_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOOK_PIPELINE_SCHEDULE_CRON", "30 4 * * 1")
    assert build_definitions().resolve_schedule_def("daily_full_refresh").cron_schedule == "30 4 * * 1"


def test_bad_cron_fails_the_load_naming_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOOK_PIPELINE_SCHEDULE_CRON", "every day at 3")
    with pytest.raises(ConfigError, match=r"schedule_cron \(BOOK_PIPELINE_SCHEDULE_CRON\)"):
        build_definitions()


def test_bad_threshold_fails_the_load_naming_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOOK_PIPELINE_FAILED_TASKS_THRESHOLD", "0")
    with pytest.raises(ConfigError, match=r"failed_tasks_threshold \(BOOK_PIPELINE_FAILED_TASKS_THRESHOLD\)"):
        build_definitions()


def test_workspace_yaml_and_the_dg_project_name_the_same_code_location() -> None:
    workspace = yaml.safe_load((PROJECT_ROOT / "workspace.yaml").read_text())
    target = workspace["load_from"][0]["python_module"]
    project = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["tool"]["dg"]["project"]
    assert (target["module_name"], target["location_name"]) == (
        project["code_location_target_module"],
        project["code_location_name"],
    )
    assert project["defs_module"] == "book_assets.defs"


def test_dagster_yaml_retries_runs_only_after_crashes_and_limits_pools() -> None:
    config = yaml.safe_load((PROJECT_ROOT / "dagster.yaml").read_text())
    assert config["run_retries"]["enabled"] and config["run_retries"]["retry_on_asset_or_op_failure"] is False
    assert config["concurrency"]["pools"] == {"granularity": "op", "default_limit": 1}
    assert "tag_concurrency_limits" not in config["concurrency"]["runs"]


def test_queue_ops_that_seed_or_split_are_in_the_crawl_pool_and_the_drain_steps_and_requeue_are_not(
    repo: dg.RepositoryDefinition,
) -> None:
    crawl_graph = repo.get_job("crawl_queue_job").graph.node_named("crawl").definition
    assert isinstance(crawl_graph, dg.GraphDefinition)
    names = ("seed_queue", "share_work", "drain_queue", "report_crawl")
    pools = {name: _op(crawl_graph, name).pool for name in names}
    # The drain steps run side by side: the pool's one slot would run them one at a time.
    assert pools == {"seed_queue": "crawl", "share_work": "crawl", "drain_queue": None, "report_crawl": None}
    assert _op(repo.get_job("requeue_failed_tasks").graph, "requeue_failed").pool is None


def _op(graph: dg.GraphDefinition, name: str) -> dg.OpDefinition:
    definition = graph.node_named(name).definition
    assert isinstance(definition, dg.OpDefinition), name
    return definition


def test_database_url_is_never_shown_with_its_password() -> None:
    from book_assets.defs.resources import DatabaseResource

    resource = DatabaseResource(url="postgresql://crawler:s3cret@db.example:5432/books")
    assert "s3cret" not in resource.masked_url()
    assert resource.masked_url() == "postgresql://crawler:***@db.example:5432/books"


def test_asset_jobs_run_in_process_since_the_crawl_step_spawns_its_own_workers(repo: dg.RepositoryDefinition) -> None:
    for name in ("full_refresh_job", "recrawl_failed_job"):
        assert repo.get_job(name).executor_def.name == dg.in_process_executor.name, name
