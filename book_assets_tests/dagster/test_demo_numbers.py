"""`book-pipeline demo` end to end (http mode, through Dagster on the project's PostgreSQL instance): every
number it prints equals what the database holds, and its runs are runs of the code location (launched from
it, as the UI and the daemon launch them), which run-status sensors see and the daemon can retry."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from book_assets.db.connection import Database
from book_assets_tests.conftest import _admin, child_env

pytestmark = pytest.mark.slow


def test_every_number_the_demo_prints_equals_the_database(db: Database, database_url: str, tmp_path: Path) -> None:
    # An archive of its own: raw_archive counts the day's WARC records, which other tests' crawls would add to.
    env = child_env(
        DATABASE_URL=database_url, BOOK_PIPELINE_DATA_DIR=str(tmp_path), BOOK_PIPELINE_WARC_DIR=str(tmp_path / "warc")
    )
    command = [sys.executable, "-m", "book_assets.cli", "demo", "--fetch", "http", "--port", "0"]
    instance_url = urlunsplit(urlsplit(database_url)._replace(path=f"{urlsplit(database_url).path}_dagster"))
    try:
        proc = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
        with Database(instance_url) as instance:
            runs = instance.query("SELECT pipeline_name, status, run_body FROM runs ORDER BY create_timestamp")
    finally:
        _admin(database_url, f'DROP DATABASE IF EXISTS "{urlsplit(database_url).path.strip("/")}_dagster" WITH (FORCE)')
    out = proc.stdout
    assert proc.returncode == 0, (out + proc.stderr)[-3000:]

    assert re.search(r"Dagster run \S+ succeeded", out), out
    recorded = [(r["pipeline_name"], r["status"]) for r in runs]
    assert recorded == [("full_refresh_job", "SUCCESS"), ("publish_job", "SUCCESS")]
    # Each run's origin is the code location (not an in-process job): re-executable, retried by the daemon.
    assert all('"location_name": "book_assets"' in r["run_body"] for r in runs)
    books = re.search(r"books: +(\d+) stored from (\S+), (\d+) unique URLs, (\d+) with raw HTML", out)
    versions = re.search(r"versions: +(\d+) book versions", out)
    run = re.search(r"this run: +(\d+) new, (\d+) changed, (\d+) unchanged, (\d+) failed pages", out)
    queue = re.search(r"queue: +(\d+) failed task\(s\), (\d+) still pending", out)
    snapshot = re.search(r"snapshot: +(\d+) rows", out)
    checks = re.search(r"checks: +(\d+)/(\d+) passed", out)
    assert books and versions and run and queue and snapshot and checks, out

    counts = db.query("SELECT count(*) AS t, count(DISTINCT url) AS u, count(raw_html) AS h FROM books")[0]
    assert (int(books[1]), int(books[3]), int(books[4])) == (counts["t"], counts["u"], counts["h"]) == (1000,) * 3
    assert int(versions[1]) == db.query("SELECT count(*) AS n FROM book_versions")[0]["n"]
    assert tuple(map(int, run.groups())) == (counts["t"], 0, 0, 0)
    by_status = {r["status"]: r["n"] for r in db.query("SELECT status, count(*) AS n FROM tasks GROUP BY 1")}
    assert (int(queue[1]), int(queue[2])) == (by_status.get("failed", 0), by_status.get("pending", 0))
    assert int(snapshot[1]) == db.query("SELECT count(*) AS n FROM category_balanced_snapshot")[0]["n"]
    assert checks[1] == checks[2] and int(checks[2]) >= 5
