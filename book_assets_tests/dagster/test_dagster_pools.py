"""Pools: with dagster.yaml's ``concurrency.pools``, two steps of the crawl pool never run at once, and a step
in no pool (the snapshot) runs beside them without waiting.

Three runs start together in three processes on one instance whose dagster.yaml holds the project's pool
settings (and Dagster's own SQLite storage in a temporary DAGSTER_HOME); each step holds for a few seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml

from book_assets.defs.catalog import CRAWL_POOL
from book_assets.settings import PROJECT_ROOT

pytestmark = pytest.mark.slow

HOLD_S = 4.0


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["start"] < b["end"] and b["start"] < a["end"]


def test_crawl_pool_steps_run_one_at_a_time_and_a_step_in_no_pool_does_not_wait(tmp_path: Path) -> None:
    pools = yaml.safe_load((PROJECT_ROOT / "dagster.yaml").read_text())["concurrency"]["pools"]
    (tmp_path / "dagster.yaml").write_text(
        yaml.safe_dump({"concurrency": {"pools": pools}, "telemetry": {"enabled": False}})
    )
    # Create the instance's storage once, before three processes would race to create it.
    dg.DagsterInstance.from_config(str(tmp_path)).dispose()
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path)}
    probes = [("crawl_a", CRAWL_POOL), ("crawl_b", CRAWL_POOL), ("snapshot", "-")]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "book_assets_tests.dagster.pool_probe", name, pool, str(HOLD_S)],
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
        span = json.loads(next(line for line in out.splitlines() if line.startswith("SPAN "))[5:])
        spans[span["name"]] = span
    assert not overlap(spans["crawl_a"], spans["crawl_b"]), spans
    assert overlap(spans["snapshot"], spans["crawl_a"]) or overlap(spans["snapshot"], spans["crawl_b"]), spans
