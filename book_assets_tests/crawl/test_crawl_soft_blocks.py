"""Crawls of a site that answers some requests with a 200 that is not the page: a challenge, a login wall,
an empty body. Each is a retried ``soft_block`` failure, never stored, and its domain backs off."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from book_assets.crawl.config import DETAIL, DETAIL_PRIORITY, make_queue
from book_assets.crawl.pipeline import crawl, drain, prepare
from book_assets.db.connection import Database
from book_assets.queue.context import domain_of
from book_assets.sandbox.faults import Faults
from book_assets_tests.conftest import child_env
from book_assets_tests.crawl.conftest import sandbox_config, stored_vs_truth
from book_assets_tests.reliability.stub_site import Page, StubSite

CATEGORIES = ("Travel", "Poetry")  # 30 books on 3 listing pages


def test_soft_blocks_at_a_rate_are_retried_never_stored_counted_and_back_the_domain_off(
    db: Database, database_url: str, sandbox_factory: Any, books_rows: Any, tmp_path: Path
) -> None:
    server = sandbox_factory(faults=Faults(soft_block_rate=0.2))
    config = sandbox_config(
        server.url, mode="http", categories=CATEGORIES, max_attempts=8, autothrottle_max_interval_s=0.2
    )
    report = crawl(database_url, config)

    served = server.stats().soft_blocks
    blocks = sum(len(kinds) for path, kinds in served.items() if path != "/robots.txt")
    kinds = {kind for path, kinds in served.items() for kind in kinds}
    assert blocks >= 3 and kinds == {"soft_block_challenge", "soft_block_login", "soft_block_empty"}, served
    # Every soft block was a failed attempt of its own kind, and each page came through on a retry.
    assert report.stats.errors.get("soft_block", 0) == blocks
    assert report.failed_by_reason == {}
    truth = {p: b for p, b in server.catalogue.ground_truth().items() if b.category in CATEGORIES}
    assert stored_vs_truth(books_rows(), truth, server.url) == []  # nothing of a block page was stored
    blocked_books = {server.url_for(p) for p in served if "/catalogue/" in p and "/category/" not in p}
    assert blocked_books and blocked_books <= {r["url"] for r in books_rows()}
    assert db.query("SELECT count(*) AS n FROM pages WHERE status = 200 AND body = ''")[0]["n"] == 0
    # The domain backed off: its interval (0 s configured) widened, up to the cap.
    policy = make_queue(db, config).domain_policy(domain_of(server.url))
    assert policy is not None and 0 < policy["min_interval_s"] <= 0.2
    pages = len([p for p in served if p != "/robots.txt"])
    assert make_queue(db, config).stats().last_failure_by_domain[domain_of(server.url)]["soft_block"] == pages
    status = subprocess.run(
        [sys.executable, "-m", "book_assets.cli", "status"],
        env=child_env(DATABASE_URL=database_url),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert f"soft    {pages:>5}  {domain_of(server.url)}: pages a soft block turned away (retried)" in status


def test_a_login_wall_on_a_listing_is_retried_not_taken_for_an_empty_last_page(
    db: Database, database_url: str, sandbox_factory: Any, books_rows: Any
) -> None:
    travel = "/catalogue/category/books/travel_2/index.html"
    server = sandbox_factory(faults=Faults(scripted={travel: ["login"]}))
    report = crawl(database_url, sandbox_config(server.url, mode="http", categories=("Travel",)))

    assert server.stats().soft_blocks == {travel: ["soft_block_login"]}
    assert report.counts["total"] == 11
    row = db.query(
        "SELECT status, attempts, error_kind FROM tasks WHERE payload->>'url' = %s", (server.url_for(travel),)
    )
    assert row == [{"status": "completed", "attempts": 2, "error_kind": "soft_block"}]


CHALLENGE = b"<html><head><title>Just a moment...</title></head><body><div class='cf-turnstile'></div></body></html>"


def test_a_soft_block_that_lifts_within_the_domains_backoff_is_retried_and_the_page_stored(
    db: Database, database_url: str, sandbox: Any, books_rows: Any
) -> None:
    path = sorted(sandbox.catalogue.ground_truth())[0]
    book = Page(body=httpx.get(sandbox.url_for(path), timeout=10).content)
    # The block lifts 2 s after the crawl starts, as long as the domain's backoff cap: attempts spent
    # inside it must not be the last ones.
    with StubSite({path: Page(body=CHALLENGE)}) as site:
        config = sandbox_config(site.url_for("/"), max_attempts=3, autothrottle_max_interval_s=2.0)
        prepare(db, config)
        make_queue(db, config).enqueue(DETAIL, {"url": site.url_for(path)}, priority=DETAIL_PRIORITY)
        lift = threading.Timer(2.0, site.pages.__setitem__, (path, book))
        lift.start()
        try:
            stats = drain(database_url, config, task_types=(DETAIL,), workers=1)
        finally:
            lift.cancel()
        hits = site.hits[path]

    task = db.query("SELECT status, attempts, error_kind FROM tasks")
    assert task == [{"status": "completed", "attempts": hits, "error_kind": "soft_block"}]
    assert stats.errors["soft_block"] == hits - 1 >= 1
    assert [r["url"] for r in books_rows()] == [site.url_for(path)]


@pytest.mark.browser
def test_the_browser_recognises_a_soft_block_as_the_plain_fetch_does(
    db: Database, database_url: str, sandbox_factory: Any, books_rows: Any
) -> None:
    truth = {p: b for p, b in sandbox_factory().catalogue.ground_truth().items() if b.category == "Travel"}
    book, other = sorted(truth)[:2]
    server = sandbox_factory(faults=Faults(scripted={book: ["challenge"], other: ["empty"]}))
    report = crawl(database_url, sandbox_config(server.url, mode="browser", concurrency=2, categories=("Travel",)))

    assert report.stats.errors == {"soft_block": 2}
    assert report.failed_by_reason == {}
    assert stored_vs_truth(books_rows(), truth, server.url) == []
