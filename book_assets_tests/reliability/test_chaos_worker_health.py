"""The worker's health signal (``health_file``), checked by the probe of deploy/k8s/worker-deployment.yaml run
as the kubelet runs it: healthy while the worker's claim loop turns, unhealthy when the worker is frozen
(SIGSTOP) or cannot reach PostgreSQL, healthy again once it claims again."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from book_assets.db import embedded
from book_assets.settings import PROJECT_ROOT
from book_assets_tests.reliability.conftest import wait_until, worker_env

pytestmark = pytest.mark.chaos

WORKER_DEPLOYMENT = PROJECT_ROOT / "deploy" / "k8s" / "worker-deployment.yaml"
#: The probe's bound on the file's age, lowered from the manifest's so a frozen worker is seen in seconds; the
#: verdicts below wait for a state rather than time it.
MAX_AGE_S = 3


def _probe(name: str) -> list[str]:
    """The exec command of the worker container's probe ``name`` (livenessProbe, readinessProbe)."""
    (container,) = yaml.safe_load(WORKER_DEPLOYMENT.read_text())["spec"]["template"]["spec"]["containers"]
    command: list[str] = container[name]["exec"]["command"]
    return command


def _healthy(health_file: Path, probe: str = "livenessProbe") -> bool:
    env = {
        "PATH": os.environ["PATH"],
        "BOOK_PIPELINE_HEALTH_FILE": str(health_file),
        "HEALTH_MAX_AGE_S": str(MAX_AGE_S),
    }
    return subprocess.run(_probe(probe), env=env, capture_output=True, timeout=30).returncode == 0


def test_a_claiming_worker_is_healthy_and_a_frozen_one_unhealthy_until_it_claims_again(
    database_url: str, spawn_worker: Callable[..., subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    health_file = tmp_path / "run" / "worker.alive"
    worker = spawn_worker(worker_env(database_url, "http://127.0.0.1:9/", health_file=health_file))
    assert wait_until(lambda: _healthy(health_file), 120), "an idle worker that claims is healthy"
    assert _healthy(health_file, "readinessProbe")
    os.kill(worker.pid, signal.SIGSTOP)
    try:
        assert wait_until(lambda: not _healthy(health_file), 60), "a frozen worker is unhealthy"
    finally:
        os.kill(worker.pid, signal.SIGCONT)
    assert wait_until(lambda: _healthy(health_file), 60), "claiming again, it is healthy again"
    assert worker.poll() is None


def test_a_worker_that_cannot_reach_postgresql_is_unhealthy(
    private_database: Any, spawn_worker: Callable[..., subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    pgdata, url = private_database
    health_file = tmp_path / "worker.alive"
    spawn_worker(worker_env(url, "http://127.0.0.1:9/", health_file=health_file))
    assert wait_until(lambda: _healthy(health_file), 120)
    embedded.down(pgdata)
    assert wait_until(lambda: not _healthy(health_file), 60), "no claim can be made: unhealthy"
