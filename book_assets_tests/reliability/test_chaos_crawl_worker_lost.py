"""`book-pipeline crawl` survives one of its own worker processes being SIGKILLed: it replaces the worker,
finishes the crawl exactly and says in its summary that a worker was lost. The run's figures still count
every page, the lost worker's included: they come from the database, not from the workers' counters."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from book_assets.db.connection import Database
from book_assets.sandbox import Faults
from book_assets.store.books import book_counts
from book_assets_tests.conftest import child_env
from book_assets_tests.reliability.conftest import wait_until

pytestmark = pytest.mark.chaos

#: Three categories, 327 books over 18 listing pages: at about 30 pages/s the crawl lasts ten seconds or so,
#: and the kill lands well inside it (a third of the catalogue proves what all of it would, three times faster).
CATEGORIES = ("Default", "Nonfiction", "Fiction")
BOOKS = 327


def _worker_pids(db: Database) -> set[int]:
    """Pids of the crawl's worker processes, from the connections they open (named after host:pid)."""
    rows = db.query(
        "SELECT application_name AS name FROM pg_stat_activity "
        "WHERE datname = current_database() AND application_name LIKE 'book-pipeline worker %%'"
    )
    return {int(found[1]) for r in rows if (found := re.search(r":(\d+)$", r["name"]))}


def test_a_sigkilled_crawl_worker_is_replaced_and_the_crawl_still_stores_every_book(
    db: Database, database_url: str, sandbox_factory: Any, tmp_path: Path
) -> None:
    sandbox = sandbox_factory(faults=Faults(latency_s=0.25))  # about 30 pages/s: the kill lands mid-crawl
    env = child_env(DATABASE_URL=database_url, BOOK_PIPELINE_LEASE_S="3", BOOK_PIPELINE_MIN_INTERVAL_S="0")
    command = [sys.executable, "-m", "book_assets.cli", "crawl", "--base-url", sandbox.url + "/", "--fetch", "http"]
    crawl = subprocess.Popen(
        [*command, "--categories", ",".join(CATEGORIES), "--workers", "2", "--concurrency", "4", "--no-progress"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def two_workers_crawling() -> bool:
            assert crawl.poll() is None, crawl.communicate()[1][-3000:]
            children = {p.pid for p in psutil.Process(crawl.pid).children(recursive=True)}
            return len(_worker_pids(db) & children) == 2 and book_counts(db)["total"] > 50

        assert wait_until(two_workers_crawling, 120)
        children = {p.pid for p in psutil.Process(crawl.pid).children(recursive=True)}
        victim = min(_worker_pids(db) & children)
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        out, err = crawl.communicate(timeout=300)
    finally:
        if crawl.poll() is None:  # the crawl and every worker it started, or the pipes never close
            for process in [*psutil.Process(crawl.pid).children(recursive=True), psutil.Process(crawl.pid)]:
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.kill()
            crawl.communicate()
    assert crawl.returncode == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    counts = book_counts(db)
    assert (counts["total"], counts["unique_urls"], counts["with_html"]) == (BOOKS, BOOKS, BOOKS), out
    pending = db.query("SELECT count(*) AS n FROM tasks WHERE status <> 'completed'")[0]["n"]
    assert pending == 0
    assert "workers lost: 1" in out and "SIGKILL" in out, out
    run = re.search(r"this run: (\d+) pages in .*?, (\d+) listing pages, (\d+) new, (\d+) changed", out)
    assert run, out
    completed = db.query("SELECT count(*) AS n FROM tasks WHERE status = 'completed'")[0]["n"]
    listings = db.query("SELECT count(*) AS n FROM tasks WHERE status = 'completed' AND task_type = 'listing'")
    assert tuple(map(int, run.groups())) == (completed, listings[0]["n"], BOOKS, 0), out
    assert time.monotonic() - killed_at < 290
