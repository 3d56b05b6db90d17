"""Chromium killed mid-crawl: the worker relaunches it, the pages in flight are retried, nothing is lost.

The crawl runs in a thread of this process (one worker, in process), so the browser's processes are our
descendants: SIGKILL every one whose name contains "chrom" (the browser, its renderers, GPU and utility
processes, the crash handler), twice, while pages are in flight. The Playwright driver (node) survives.
"""

from __future__ import annotations

import contextlib
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psutil
import pytest

from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets.sandbox.faults import Faults
from book_assets.store.books import book_counts
from book_assets_tests.crawl.conftest import sandbox_config, stored_vs_truth
from book_assets_tests.reliability.conftest import task_counts, wait_until

pytestmark = [pytest.mark.chaos, pytest.mark.browser]

CATEGORIES = ("Travel", "Mystery", "Poetry")


def _descendants() -> list[psutil.Process]:
    # Walking the tree races with processes that exit meanwhile (a tab recycled); walk again then.
    for _ in range(5):
        try:
            return psutil.Process().children(recursive=True)
        except psutil.NoSuchProcess:
            continue
    return []


def _chromium_processes() -> list[psutil.Process]:
    found = []
    for child in _descendants():
        try:
            if "chrom" in child.name().lower():
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found


def _kill_chromium() -> int:
    victims = _chromium_processes()
    for proc in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGKILL)
    psutil.wait_procs(victims, timeout=10)
    return len(victims)


def _in_flight(db: Database) -> set[int]:
    return {r["id"] for r in db.query("SELECT id FROM tasks WHERE status = 'in_progress'")}


def _in_flight_until_relaunched(db: Database, timeout_s: float = 30) -> set[int]:
    """Every task in flight from now until a new Chromium runs (or ``timeout_s``)."""
    seen = _in_flight(db)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not _chromium_processes():
        seen |= _in_flight(db)
        time.sleep(0.02)
    return seen | _in_flight(db)


def test_killed_chromium_is_relaunched_and_in_flight_pages_are_retried(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    # A little latency per page keeps four pages in flight most of the time, so a kill always hits some.
    site = sandbox_factory(faults=Faults(latency_s=0.25))
    truth = {p: b for p, b in site.catalogue.ground_truth().items() if b.category in CATEGORIES}
    assert len(truth) == 62
    config = sandbox_config(site.url, mode="browser", concurrency=4, categories=CATEGORIES, max_attempts=3)
    started = time.monotonic()
    kills: list[tuple[int, set[int]]] = []
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="crawl") as pool:
        future = pool.submit(crawl, database_url, config)
        for threshold in (8, 35):

            def reached(books: int = threshold) -> bool:
                return book_counts(db)["total"] >= books or future.done()

            ok = wait_until(reached, 90, every_s=0.05)
            assert ok and not future.done(), "the crawl ended before the kill; slow the site down"
            assert wait_until(lambda: len(_in_flight(db)) >= 2, 10, every_s=0.02), task_counts(db)
            in_flight = _in_flight(db)
            killed = _kill_chromium()
            assert killed > 0, "no Chromium process found among our descendants"
            # Pages claimed until the fetcher noticed and relaunched met the dead browser too.
            kills.append((killed, in_flight | _in_flight_until_relaunched(db)))
        report = future.result(timeout=120)
    elapsed = time.monotonic() - started

    # Every book stored once, exactly as served; no task failed or left behind.
    assert task_counts(db) == {"completed": 62 + len(CATEGORIES) + 1 + 1}, task_counts(db)  # + Mystery page 2, root
    c = book_counts(db)
    assert (c["total"], c["unique_urls"], c["with_html"], c["versions"]) == (62, 62, 62, 62)
    assert stored_vs_truth(db.query("SELECT * FROM books ORDER BY id"), truth, site.url) == []
    assert report.failed_by_reason == {}

    # The browser died twice and was relaunched; the pages it was rendering failed as browser_crashed and
    # succeeded on their second attempt.
    fetcher = report.stats.fetcher
    assert fetcher["crashes"] >= 2 and fetcher["relaunches"] >= 2, fetcher
    crashed = db.query("SELECT id, status, attempts FROM tasks WHERE error LIKE 'browser_crashed%'")
    assert crashed, "no page was in flight at a kill: the test proved nothing"
    assert all(r["status"] == "completed" and r["attempts"] == 2 for r in crashed), crashed
    # Only pages around a kill met the dead browser: those in flight, and at most one refill of the four tabs
    # before the fetcher noticed (a refill can fail within milliseconds, between two samples of the queue).
    in_flight_at_kills = set().union(*(ids for _, ids in kills))
    assert len(crashed) <= len(kills) * 2 * config.fetch.concurrency, (crashed, in_flight_at_kills)
    assert report.stats.errors.get("internal", 0) == 0, report.stats.errors

    # Nothing outlives the crawl: the last browser was closed with it.
    assert wait_until(lambda: not _chromium_processes(), 15), _chromium_processes()
    print(
        f"\nkilled {[k for k, _ in kills]} Chromium processes with {[len(i) for _, i in kills]} tasks in flight; "
        f"{len(crashed)} pages retried; fetcher {fetcher}; {elapsed:.1f}s"
    )
