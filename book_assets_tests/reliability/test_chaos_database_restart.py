"""PostgreSQL stopped and started mid-crawl (a private cluster, never the shared one): the crawl finishes."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg2
import pytest

from book_assets.db import embedded
from book_assets.db.connection import Database
from book_assets.sql import load_queries
from book_assets.store.books import book_counts
from book_assets_tests.crawl.conftest import stored_vs_truth
from book_assets_tests.reliability.conftest import task_counts, wait_until, worker_env

pytestmark = pytest.mark.chaos


def test_crawl_survives_a_database_restart_with_no_partial_rows(
    private_database: Any, sandbox: Any, tmp_path: Path
) -> None:
    pgdata, url = private_database
    env = worker_env(url, sandbox.url, concurrency=4)
    log = open(tmp_path / "crawl.log", "wb")  # noqa: SIM115
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "book_assets.cli", "crawl", "--workers", "2", "--no-progress"],
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        assert wait_until(lambda: _books(url) >= 100, 90), (tmp_path / "crawl.log").read_text()[-2000:]
        stopped_at = _books(url)
        assert embedded.down(pgdata)
        time.sleep(3)  # the outage
        embedded.up(pgdata)
        code = proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    output = (tmp_path / "crawl.log").read_text()
    assert code == 0, output[-3000:]
    db = Database(url)
    try:
        c = book_counts(db)
        assert (c["total"], c["unique_urls"], c["with_html"]) == (1000, 1000, 1000)
        counts = task_counts(db)
        assert counts.get("failed", 0) == 0 and counts.get("pending", 0) == 0, counts
        missing = db.query(load_queries("checks")["missing_required_fields"])[0]
        assert missing["bad"] == 0, missing
        rows = db.query("SELECT * FROM books ORDER BY id")
        assert stored_vs_truth(rows, sandbox.catalogue.ground_truth(), sandbox.url) == []
    finally:
        db.close()
    print(f"\nstopped PostgreSQL at {stopped_at} books; crawl finished in {time.monotonic() - started:.1f}s")


def _books(url: str) -> int:
    try:
        conn = psycopg2.connect(url, connect_timeout=5)
    except psycopg2.OperationalError:
        return 0
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM books")
            row = cur.fetchone()
            return int(row[0]) if row else 0
    except psycopg2.Error:
        return 0
    finally:
        conn.close()
