"""A crawl worker SIGKILLed while it archives: the crawl's end completes the index its journal left."""

from __future__ import annotations

import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from book_assets.archive import archive_files, index_day
from book_assets.archive.journal import journal_path
from book_assets.crawl.pipeline import prepare, seed
from book_assets.db.connection import Database
from book_assets.sandbox import Faults
from book_assets_tests.crawl.conftest import sandbox_config
from book_assets_tests.reliability.conftest import drained, task_counts, wait_until, worker_env

pytestmark = pytest.mark.chaos

LEASE_S = 3.0


def _journal_lines(archive: Path) -> int:
    journals = list(archive.rglob("*.journal"))
    return sum(len(j.read_bytes().splitlines()) for j in journals)


def test_a_worker_sigkilled_mid_crawl_leaves_an_index_the_end_step_completes(
    db: Database, database_url: str, sandbox_factory: Any, spawn_worker: Any, tmp_path: Path
) -> None:
    # Pages take ~0.1 s each and the first worker fetches two at a time: the kill lands mid-crawl.
    sandbox = sandbox_factory(faults=Faults(latency_s=0.1, jitter_s=0.05))
    archive = tmp_path / "warc"
    config = sandbox_config(sandbox.url, lease_s=LEASE_S, warc_dir=archive)
    prepare(db, config)
    seed(db, config)
    settings = {"lease_s": LEASE_S, "warc": "true", "warc_dir": archive}
    victim = spawn_worker(worker_env(database_url, sandbox.url, concurrency=2, **settings))
    assert wait_until(lambda: _journal_lines(archive) >= 30, 90), "the worker never archived a page"
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=10)
    assert not drained(db), "the crawl finished before the kill; slow it down"
    [killed] = archive_files(archive)
    # The kill's narrowest window, made certain: its last write's records on disk, their journal line lost,
    # and the line before it cut in half.
    journal = journal_path(killed)
    lines = journal.read_text(encoding="utf-8").splitlines(keepends=True)
    journal.write_text("".join(lines[:-2]) + lines[-2][: len(lines[-2]) // 2], encoding="utf-8")

    survivor = spawn_worker(worker_env(database_url, sandbox.url, concurrency=8, **settings))
    assert wait_until(lambda: drained(db), 240), task_counts(db)
    survivor.terminate()
    assert survivor.wait(timeout=20) == 0

    today = datetime.now(UTC).date()
    summary = index_day(archive, today)  # what the crawl's end step runs
    assert summary.index_path is not None
    index = summary.index_path.read_text(encoding="utf-8")
    repaired = index_day(archive, today, reread=True)
    assert repaired.index_path is not None
    assert index == repaired.index_path.read_text(encoding="utf-8")
    assert summary.files == repaired.files and len(summary.files) == 2
    # Every page the killed worker archived is in the index, those past its journal's end too.
    [scan] = [f for f in summary.files if f.path == killed]
    indexed = sum(f'"filename": "{killed.name}"' in line for line in index.splitlines())
    assert indexed == scan.types["response"] >= len(lines) - 1  # a line per write but the warcinfo's
