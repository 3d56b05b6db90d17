"""A hostile site: 5xx, 429 with Retry-After, hangs, truncated bodies and resets, all at once.

The sandbox decides each request's fate from ``(seed, path, n)``, so the set of tasks that exhaust their
attempts is the same on every run. Scripted paths fail more often than ``max_attempts`` on purpose, so the
dead-letter and requeue path is exercised whatever the random draws do.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from book_assets.crawl.config import make_queue
from book_assets.crawl.pipeline import crawl, drain
from book_assets.db.connection import Database
from book_assets.sandbox.faults import Faults
from book_assets.sandbox.server import SandboxServer
from book_assets.sql import load_queries
from book_assets_tests.crawl.conftest import sandbox_config, stored_vs_truth
from book_assets_tests.reliability.conftest import task_counts

pytestmark = pytest.mark.chaos

CATEGORIES = ("Travel", "Mystery", "Poetry", "Historical Fiction", "Classics", "Philosophy", "Romance")


def test_hostile_site_stores_only_correct_books_dead_letters_the_rest_and_requeue_completes(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    from book_assets.sandbox.catalogue import Catalogue

    truth = {p: b for p, b in Catalogue(seed=3).ground_truth().items() if b.category in CATEGORIES}
    # Three books that fail four times in a row (one more than max_attempts), then are served.
    doomed = sorted(truth)[:3]
    faults = Faults(
        error_rate=0.10,
        rate_limit_rate=0.05,
        retry_after_s=1,
        hang_rate=0.02,
        hang_s=4.0,
        truncate_rate=0.02,
        reset_rate=0.01,
        scripted={doomed[0]: [503, 500, 503, 503], doomed[1]: ["truncate"] * 4, doomed[2]: ["reset", 429, "hang", 500]},
    )
    site = sandbox_factory(faults=faults, seed=3)
    assert site.catalogue.ground_truth().keys() >= truth.keys()
    config = sandbox_config(site.url, concurrency=8, timeout_s=2.0, max_attempts=3, categories=CATEGORIES)
    started = time.monotonic()
    report = crawl(database_url, config)
    first_pass_s = time.monotonic() - started

    outcomes = site.stats().outcomes
    assert all(outcomes.get(kind, 0) > 0 for kind in ("500", "503", "429", "hang", "truncate", "reset")), outcomes
    rows = db.query("SELECT * FROM books ORDER BY id")
    stored = {r["url"] for r in rows}
    # Whatever was stored is exactly what the site serves: no error page, no truncated body.
    problems = [p for p in stored_vs_truth(rows, truth, site.url) if not p.startswith("missing ")]
    assert problems == []
    assert all(r["http_status"] == 200 and r["raw_html"].rstrip().endswith("</html>") for r in rows)
    assert db.query(load_queries("checks")["error_pages_stored"])[0]["bad"] == 0

    # Tasks out of attempts are dead-lettered with their error; nothing else is left behind.
    failed = db.query("SELECT payload->>'url' AS url, attempts, error FROM tasks WHERE status = 'failed'")
    counts = task_counts(db)
    assert counts.get("pending", 0) == 0 and counts.get("in_progress", 0) == 0
    failed_urls = {f["url"] for f in failed}
    assert {_url(site, p) for p in doomed} <= failed_urls
    assert all(f["attempts"] == 3 and f["error"] for f in failed), failed
    assert sum(report.failed_by_reason.values()) == len(failed)
    expected_urls = {_url(site, p) for p in truth}
    assert not stored & failed_urls  # a book page either stored or failed, never both

    # The sensor's path: requeue the dead letters and run again; the catalogue completes.
    queue = make_queue(db, config)
    for _ in range(3):
        if queue.requeue() == 0:
            break
        drain(database_url, config)
    rows = db.query("SELECT * FROM books ORDER BY id")
    assert stored_vs_truth(rows, truth, site.url) == []
    assert {r["url"] for r in rows} == expected_urls
    assert task_counts(db).get("failed", 0) == 0
    print(
        f"\nfirst pass {first_pass_s:.1f}s: {len(stored)} books stored, {len(failed)} dead-lettered "
        f"{dict(report.failed_by_reason)}; outcomes {outcomes}; total {time.monotonic() - started:.1f}s"
    )


def _url(site: SandboxServer, path: str) -> str:
    return site.url.rstrip("/") + "/" + path.lstrip("/")
