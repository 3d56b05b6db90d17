"""Every number `book-pipeline crawl` and `book-pipeline status` print equals what the database holds, on a
site with retries and dozens of failures of six kinds (far more than any top-N list shows)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from book_assets.db.connection import Database
from book_assets.sandbox.catalogue import Catalogue
from book_assets.sandbox.faults import Faults
from book_assets_tests.conftest import child_env

pytestmark = pytest.mark.slow

PATHS = sorted(Catalogue(seed=0, day=0).ground_truth())
FOREVER = 10  # more failures than attempts
SCRIPT: dict[str, list[str]] = {
    **{p: ["404"] for p in PATHS[0:20]},
    **{p: ["500"] * FOREVER for p in PATHS[20:26]},
    **{p: ["truncate"] * FOREVER for p in PATHS[26:30]},
    **{p: ["reset"] * FOREVER for p in PATHS[30:33]},
    **{p: ["429"] * FOREVER for p in PATHS[33:36]},
    **{p: ["hang"] * FOREVER for p in PATHS[36:38]},
    **{p: ["503", "503"] for p in PATHS[38:48]},  # retried twice, then stored
}
EXPECTED_FAILED = {"http_404": 20, "http_5xx": 6, "truncated": 4, "connection": 3, "http_429": 3, "timeout": 2}


def _cli(args: list[str], database_url: str, cwd: Path) -> str:
    env = child_env(
        DATABASE_URL=database_url,
        BOOK_PIPELINE_MAX_ATTEMPTS="3",
        BOOK_PIPELINE_BACKOFF_BASE_S="0.01",
        BOOK_PIPELINE_BACKOFF_MAX_S="0.05",
        BOOK_PIPELINE_TIMEOUT_S="1.5",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "book_assets.cli", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _one(db: Database, sql: str) -> Any:
    return next(iter(db.query(sql)[0].values()))


def test_every_number_crawl_and_status_print_equals_the_database(
    db: Database, database_url: str, sandbox_factory: Any, tmp_path: Path
) -> None:
    site = sandbox_factory(faults=Faults(scripted=SCRIPT, retry_after_s=0, hang_s=5))
    out = _cli(
        ["crawl", "--base-url", site.url + "/", "--fetch", "http", "--workers", "1", "--no-progress"],
        database_url,
        tmp_path,
    )

    books = re.search(r"books: total (\d+) / unique URLs (\d+) / with raw HTML (\d+)", out)
    run = re.search(
        r"this run: (\d+) pages in .*?, (\d+) listing pages, (\d+) new, (\d+) changed, (\d+) unchanged", out
    )
    totals = re.search(r"retries: (\d+); failed tasks: (\d+)", out)
    assert books and run and totals, out
    counts = db.query("SELECT count(*) AS t, count(DISTINCT url) AS u, count(raw_html) AS h FROM books")[0]
    assert tuple(map(int, books.groups())) == (counts["t"], counts["u"], counts["h"]) == (1000 - 38,) * 3
    completed = _one(db, "SELECT count(*) FROM tasks WHERE status = 'completed'")
    listings = _one(db, "SELECT count(*) FROM tasks WHERE status = 'completed' AND task_type = 'listing'")
    assert tuple(map(int, run.groups())) == (completed, listings, counts["t"], 0, 0)
    retries = _one(db, "SELECT sum(attempts - 1) FROM tasks")
    failed = _one(db, "SELECT count(*) FROM tasks WHERE status = 'failed'")
    assert tuple(map(int, totals.groups())) == (retries, failed)
    printed = {kind: int(n) for n, kind in re.findall(r"^  failed +(\d+)  (\S+)$", out, re.MULTILINE)}
    stored = {
        r["error_kind"]: r["n"]
        for r in db.query("SELECT error_kind, count(*) AS n FROM tasks WHERE status = 'failed' GROUP BY 1")
    }
    assert printed == stored == EXPECTED_FAILED

    status = _cli(["status"], database_url, tmp_path)
    by_status = {(t, s): int(n) for t, s, n in re.findall(r"^tasks +(\w+) +(\w+) +(\d+)$", status, re.MULTILINE)}
    stored_status = {
        (r["task_type"], r["status"]): r["n"]
        for r in db.query("SELECT task_type, status, count(*) AS n FROM tasks GROUP BY 1, 2")
    }
    assert by_status == stored_status
    assert f"failed tasks: {failed}" in status
    kinds = {kind: int(n) for n, _type, kind in re.findall(r"^failed +(\d+)  (\w+) +(\S+)$", status, re.MULTILINE)}
    assert kinds == EXPECTED_FAILED
    versions = _one(db, "SELECT count(*) FROM book_versions")
    expected_books = (
        f"books   total {counts['t']} / unique URLs {counts['u']} / with raw HTML {counts['h']}; versions {versions}"
    )
    assert expected_books in status
