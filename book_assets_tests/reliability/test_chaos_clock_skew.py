"""Politeness holds when one worker host's clock runs 0.5 s ahead: workers sleep on intervals the database
computes, never on their own wall clock against the database's.

Two ``book-pipeline work`` processes crawl one category of the sandbox with 0.3 s between request starts;
one of them runs under libfaketime (Debian's ``faketime``) with its clock 0.5 s ahead. The skewed worker
starts first and the honest one joins once the skewed one has completed pages, so the skewed worker's
requests are among those measured however slowly either process starts. The sandbox, on the
test's clock, records when each request arrives. The database spaces the slots an interval apart, and no
request reaches the site before its slot (a worker sleeping on its own clock would start half a second
early). A request that leaves late, on a busy machine, comes closer to the next one at the site: that gap is
measured by ``benchmarks/scale_bench.py`` (``skewed_host_min_spacing_s``), not asserted here.
"""

from __future__ import annotations

import itertools
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from book_assets.crawl.config import CrawlConfig
from book_assets.crawl.pipeline import begin
from book_assets.db.connection import Database
from book_assets.settings import load_settings
from book_assets_tests.reliability.conftest import drained, wait_until, worker_env

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

INTERVAL_S = 0.3
SKEW = "+0.5s"
#: How far before its slot a request may reach the site: the slot and the site's timestamp are readings of
#: one clock, and a worker waits for the latest moment its slot can be (``DatabaseClock.due``).
TOLERANCE_S = 0.005
LIBFAKETIME = [
    Path(d) / "faketime" / "libfaketimeMT.so.1"
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")
]


def _libfaketime() -> Path:
    for path in LIBFAKETIME:
        if path.exists():
            return path
    pytest.skip("libfaketime not found (Debian package faketime): cannot skew a worker's clock")


def _skewed(env: dict[str, str], library: Path) -> dict[str, str]:
    return {**env, "LD_PRELOAD": str(library), "FAKETIME": SKEW, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}


def _clock_offset_s(env: dict[str, str], db: Database) -> float:
    """How far a Python process started with ``env`` has its wall clock ahead of the database's."""
    probe = "import time, datetime; print(time.time(), datetime.datetime.now().timestamp())"
    before = float(db.query("SELECT extract(epoch FROM clock_timestamp()) AS t")[0]["t"])
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    after = float(db.query("SELECT extract(epoch FROM clock_timestamp()) AS t")[0]["t"])
    wall, dt_now = (float(x) for x in out.split())
    assert abs(wall - dt_now) < 0.05, "time.time() and datetime.now() disagree"
    return wall - (before + after) / 2


def _completed(db: Database) -> int:
    return int(db.query("SELECT count(*) AS n FROM tasks WHERE status = 'completed'")[0]["n"])


def test_a_worker_whose_clock_runs_half_a_second_ahead_keeps_the_politeness_spacing(
    db: Database,
    database_url: str,
    sandbox_factory: Any,
    spawn_worker: Callable[..., subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    library = _libfaketime()
    sandbox = sandbox_factory()
    settings = {"min_interval_s": INTERVAL_S, "categories": "Travel", "concurrency": 2, "lease_s": 30}
    env = worker_env(database_url, sandbox.url + "/", **settings)
    skewed = _skewed(env, library)
    offset = _clock_offset_s(skewed, db)
    assert 0.3 < offset < 0.8, f"libfaketime did not move the worker's clock ahead ({offset:+.3f}s)"
    assert abs(_clock_offset_s(env, db)) < 0.2, "the honest worker's clock is already off"

    config = CrawlConfig.from_settings(load_settings(base_url=sandbox.url + "/", fetch_mode="http", **settings))
    assert begin(database_url, config).seeded  # the domain's interval is stored, the start page queued
    sandbox.reset_stats()
    workers = [spawn_worker(skewed)]
    try:
        assert wait_until(lambda: _completed(db) >= 2, 120), "the skewed worker completed no page"
        workers.append(spawn_worker(env))
        assert wait_until(lambda: drained(db), 120), "the crawl of one category did not finish"
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.wait(timeout=60)
    logs = [(tmp_path / f"worker-{i}.log").read_text(errors="replace") for i in range(2)]
    assert all("Traceback" not in log for log in logs), logs
    served = _completed(db)
    assert served == 1 + 1 + 11  # the start page, Travel's listing, its 11 books
    pages = [int(m.group(1)) for log in logs if (m := re.search(r"worker stopped: (\d+) pages", log))]
    assert len(pages) == 2 and pages[0] >= 2, f"the skewed worker (the first) must have fetched pages: {logs}"
    stats = sandbox.stats()
    assert len(stats.request_times) >= 13

    # The database spaces the slots: one interval between consecutive request slots of the domain.
    slots = {
        urlsplit(r["url"]).path: r["slot_at"].timestamp()
        for r in db.query("SELECT payload->>'url' AS url, slot_at FROM tasks WHERE status = 'completed'")
    }
    assert None not in slots.values() and len(slots) == served, slots
    slot_gaps = [b - a for a, b in itertools.pairwise(sorted(slots.values()))]
    assert min(slot_gaps) >= INTERVAL_S - 0.001, slot_gaps

    # Each request starts on its slot, never before it: a worker that slept until its slot on its own clock
    # (0.5 s ahead) would start half a second early. The sandbox and the database share this host's clock.
    early = {
        path: round(slots[path] - arrived, 3)
        for path, arrived in zip(stats.request_paths, stats.request_times, strict=True)
        if path in slots and arrived < slots[path] - TOLERANCE_S
    }
    assert early == {}, f"requests that started before their slot (s early): {early}"
