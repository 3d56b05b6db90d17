"""Helpers for the chaos suite: worker processes started through the real CLI, and queue/book summaries."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from book_assets.db.connection import Database

WORKER_CMD = [sys.executable, "-m", "book_assets.cli", "work"]


def worker_env(database_url: str, base_url: str, **settings: Any) -> dict[str, str]:
    """Environment for a ``book-pipeline work`` process: the test DB, the sandbox, no politeness."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOOK_PIPELINE_") and k != "DATABASE_URL"}
    env["DATABASE_URL"] = database_url
    values = {"base_url": base_url, "fetch_mode": "http", "rate": 0, "backoff_base_s": 0.05, "backoff_max_s": 0.5}
    values.update(settings)
    for name, value in values.items():
        env[f"BOOK_PIPELINE_{name.upper()}"] = str(value)
    return env


@pytest.fixture
def spawn_worker(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start ``book-pipeline work`` processes (cwd: an empty folder, so no .env leaks in); all killed at the end."""
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
        log = open(tmp_path / f"worker-{len(procs)}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen([*WORKER_CMD, *args], env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
        procs.append(proc)
        return proc

    yield spawn
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def task_counts(db: Database) -> dict[str, int]:
    rows = db.query("SELECT status, count(*) AS n FROM tasks GROUP BY status")
    return {r["status"]: int(r["n"]) for r in rows}


def wait_until(predicate: Callable[[], bool], timeout_s: float, every_s: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every_s)
    return predicate()


def drained(db: Database) -> bool:
    counts = task_counts(db)
    return bool(counts) and counts.get("pending", 0) == 0 and counts.get("in_progress", 0) == 0
