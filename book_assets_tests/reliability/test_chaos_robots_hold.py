"""SIGKILL a worker while it fetches robots.txt: its hold on the fetch runs out within one step's bound."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from book_assets.crawl.config import DETAIL, DETAIL_PRIORITY, make_queue
from book_assets.crawl.pipeline import drain, prepare
from book_assets.crawl.robots import step_hold_s
from book_assets.crawl.stats import WorkerFigures
from book_assets.db.connection import Database
from book_assets.sandbox.faults import Faults
from book_assets_tests.crawl.conftest import sandbox_config
from book_assets_tests.reliability.conftest import wait_until, worker_env

pytestmark = pytest.mark.chaos

ROBOTS = "/robots.txt"
TIMEOUT_S = 2.0


def test_a_killed_robots_txt_fetcher_holds_the_fetch_no_longer_than_one_request_step(
    db: Database, database_url: str, sandbox_factory: Any, spawn_worker: Any
) -> None:
    site = sandbox_factory(faults=Faults(scripted={ROBOTS: ["hang"]}, hang_s=60.0))
    config = sandbox_config(site.url, timeout_s=TIMEOUT_S)
    prepare(db, config)
    book = next(p for p, b in site.catalogue.ground_truth().items() if b.category == "Poetry")
    make_queue(db, config).enqueue(DETAIL, {"url": site.url_for(book), "category": "Poetry"}, priority=DETAIL_PRIORITY)
    proc = spawn_worker(worker_env(database_url, site.url, timeout_s=TIMEOUT_S, lease_s=3))
    assert wait_until(lambda: ROBOTS in site.stats().hits, 60)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)

    left = "SELECT extract(epoch FROM held_until - clock_timestamp()) AS s FROM robots_txt WHERE state = 'fetching'"
    rows = db.query(left)
    assert len(rows) == 1 and rows[0]["s"] <= step_hold_s(TIMEOUT_S)
    # The next worker takes the fetch over once the dead holder's hold has run out, and the crawl goes on.
    stats = drain(database_url, config, task_types=(DETAIL,), workers=1)
    assert WorkerFigures.read(make_queue(db, config), stats).books == 1 and site.stats().hits[ROBOTS] == 2
