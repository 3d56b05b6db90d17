"""Helpers for the chaos suite: worker processes started through the real CLI, and queue/book summaries."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg2
import pytest

from book_assets.db import embedded
from book_assets.db.connection import Database
from book_assets_tests.conftest import child_env

WORKER_CMD = [sys.executable, "-m", "book_assets.cli", "work"]


def worker_env(database_url: str, base_url: str, **settings: Any) -> dict[str, str]:
    """Environment for a ``book-pipeline work`` process: the test DB, the sandbox, no politeness."""
    env = child_env(DATABASE_URL=database_url)
    values = {
        "base_url": base_url,
        "fetch_mode": "http",
        "min_interval_s": 0,
        "backoff_base_s": 0.05,
        "backoff_max_s": 0.5,
    }
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


@pytest.fixture
def private_database() -> Iterator[tuple[Path, str]]:
    """A PostgreSQL cluster of its own (data folder, URL of its database "chaos"), to stop or crash at will."""
    # Not under tmp_path: pytest sessions of other engineers chmod /tmp/pytest-of-<user> to 0700, and the
    # server runs as another system user when we are root, so it would lose access to its own data directory.
    root = Path(tempfile.mkdtemp(prefix="book-pipeline-chaos-pg-"))
    root.chmod(0o755)
    pgdata = root / "pg" / "data"
    state = embedded.up(pgdata)
    assert state.port is not None
    conn = psycopg2.connect(embedded.admin_url(state.port), connect_timeout=10)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute('CREATE DATABASE "chaos"')
    conn.close()
    yield pgdata, embedded.admin_url(state.port, "chaos")
    embedded.down(pgdata)
    shutil.rmtree(root, ignore_errors=True)
