"""Pools: with dagster.yaml's ``concurrency.pools``, two steps of the crawl pool never run at once, and a step
in no pool (the snapshot) runs beside them without waiting.

Three runs start together in three processes on one instance whose dagster.yaml holds the project's pool
settings and storage (PostgreSQL, in a database of the test's own); each step holds for a few seconds. Not
Dagster's SQLite storage: two processes that claim the pool's one slot in the same millisecond can both get
it there, which the project's PostgreSQL storage never allows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import dagster as dg
import pytest
import yaml

from book_assets.defs.catalog import CRAWL_POOL
from book_assets.settings import PROJECT_ROOT
from book_assets_tests.conftest import _admin

pytestmark = pytest.mark.slow

#: Longest a crawl step holds the pool waiting for the snapshot step to start: a snapshot step that waited
#: for the pool starts only after it, and the test fails; one that did not is seen at once.
HOLD_S = 120.0


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["start"] < b["end"] and b["start"] < a["end"]


@pytest.fixture
def instance_env(database_url: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A DAGSTER_HOME with the project's storage and pool settings, on a fresh ``<test database>_pools``."""
    project = yaml.safe_load((PROJECT_ROOT / "dagster.yaml").read_text())
    (tmp_path / "dagster.yaml").write_text(
        yaml.safe_dump(
            {key: project[key] for key in ("run_storage", "event_log_storage", "schedule_storage")}
            | {"concurrency": {"pools": project["concurrency"]["pools"]}}
            | {"telemetry": {"enabled": False}}
        )
    )
    parts = urlsplit(database_url)
    name = f"{parts.path.strip('/')}_pools"
    _admin(database_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path)}
    env.update(
        DAGSTER_PG_USERNAME=unquote(parts.username or "postgres"),
        DAGSTER_PG_PASSWORD=unquote(parts.password or "trust"),
        DAGSTER_PG_HOST=parts.hostname or "127.0.0.1",
        DAGSTER_PG_PORT=str(parts.port or 5432),
        DAGSTER_PG_DB=name,
    )
    yield env
    _admin(database_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _pool_step_runs(home: Path) -> bool:
    """One run of a one-step job in the crawl pool, on the instance at ``home``."""

    @dg.op(pool=CRAWL_POOL)
    def drain() -> None:
        pass

    @dg.job
    def pool_job() -> None:
        drain()

    with dg.DagsterInstance.from_config(str(home)) as instance:
        return pool_job.execute_in_process(instance=instance, raise_on_error=False).success


def test_a_crawl_pool_step_runs_after_the_operator_changes_the_default_pool_limit(
    instance_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first step records the pool's limit from ``default_limit``; after the operator changes it, the next
    step writes the new limit over the recorded one. Dagster's own storage inserts, fails on the existing row
    inside its transaction and fails the step, every step, until someone edits the pool in the UI. (Two runs
    whose steps meet a new pool at the same moment fail the same way.)"""
    for variable, value in instance_env.items():
        if variable.startswith("DAGSTER_"):
            monkeypatch.setenv(variable, value)
    assert _pool_step_runs(tmp_path)
    config = yaml.safe_load((tmp_path / "dagster.yaml").read_text())
    config["concurrency"]["pools"]["default_limit"] = 2
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(config))

    assert _pool_step_runs(tmp_path)

    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert instance.event_log_storage.get_concurrency_info(CRAWL_POOL).slot_count == 2


def test_crawl_pool_steps_run_one_at_a_time_and_a_step_in_no_pool_does_not_wait(
    instance_env: dict[str, str], tmp_path: Path
) -> None:
    # Create the instance's storage once, before three processes would race to create it.
    with pytest.MonkeyPatch.context() as patch:
        for variable, value in instance_env.items():
            if variable.startswith("DAGSTER_"):
                patch.setenv(variable, value)
        dg.DagsterInstance.from_config(str(tmp_path)).dispose()
    env = instance_env
    probes = [("crawl_a", CRAWL_POOL), ("crawl_b", CRAWL_POOL), ("snapshot", "-")]
    marker = tmp_path / "snapshot-started"  # a crawl step holds the pool until the snapshot step has started
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "book_assets_tests.dagster.pool_probe", name, pool, str(marker), str(HOLD_S)],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, pool in probes
    ]
    spans = {}
    for proc in procs:
        out, _ = proc.communicate(timeout=240)
        assert proc.returncode == 0, out[-2000:]
    for name, _pool in probes:
        spans[name] = json.loads((tmp_path / f"{name}.span.json").read_text())
    assert not overlap(spans["crawl_a"], spans["crawl_b"]), spans
    assert overlap(spans["snapshot"], spans["crawl_a"]) or overlap(spans["snapshot"], spans["crawl_b"]), spans
