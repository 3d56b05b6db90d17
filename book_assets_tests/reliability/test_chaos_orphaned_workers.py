"""A crawl SIGKILLed mid-crawl (as an OOM kill, a lost node or a killed Dagster run worker would) leaves no
worker crawling on: each of its worker processes sees its parent gone, stops claiming, releases or finishes
its pages within its grace period and exits, so the next run starts from a queue nobody holds."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from book_assets.db.connection import Database
from book_assets.sandbox import Faults
from book_assets.store.books import book_counts
from book_assets_tests.conftest import child_env
from book_assets_tests.reliability.conftest import task_counts, wait_until

pytestmark = pytest.mark.chaos


def test_the_workers_of_a_sigkilled_crawl_stop_and_release_their_leases(
    db: Database, database_url: str, sandbox_factory: Any, tmp_path: Path
) -> None:
    # 1,000 books at a quarter of a second each over eight slots: a crawl of two minutes, killed in its first
    # seconds, so workers that crawled on would still be at it long after they should have stopped.
    sandbox = sandbox_factory(faults=Faults(latency_s=0.25))
    env = child_env(DATABASE_URL=database_url, BOOK_PIPELINE_MIN_INTERVAL_S="0", BOOK_PIPELINE_LEASE_S="120")
    command = [sys.executable, "-m", "book_assets.cli", "crawl", "--base-url", sandbox.url + "/", "--fetch", "http"]
    log = tmp_path / "crawl.log"  # the CLI's output, and its workers' after it died
    with log.open("wb") as out:
        crawl = subprocess.Popen(
            [*command, "--workers", "2", "--concurrency", "4", "--no-progress"],
            env=env,
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    workers: list[psutil.Process] = []
    try:

        def crawling() -> bool:
            assert crawl.poll() is None, "the crawl ended before it could be killed"
            workers[:] = psutil.Process(crawl.pid).children(recursive=True)
            return len(workers) >= 2 and book_counts(db)["total"] >= 20

        assert wait_until(crawling, 120)
        os.kill(crawl.pid, signal.SIGKILL)
        crawl.wait(timeout=30)
        # Each worker stops within its grace period (10 s) after it notices (about a second), well before the
        # 120 s its leases would take to run out or the crawl would take to finish.
        _gone, alive = psutil.wait_procs(workers, timeout=60)
        assert alive == [], f"workers still running a minute after their crawl was killed: {alive}"
    finally:
        for process in workers:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
    assert "Traceback" not in log.read_text(errors="replace"), log.read_text(errors="replace")[-3000:]
    counts = task_counts(db)
    assert counts.get("in_progress", 0) == 0, counts  # every lease released, none left to expire
    assert counts.get("pending", 0) > 0, counts  # they stopped: the rest waits for the next run
