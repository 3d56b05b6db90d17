"""A worker bound by politeness commits several finished pages in one transaction.

At many politely limited hosts a worker's pages finish tens of milliseconds apart, so committing each as it
finishes costs a transaction a page. Here twelve sites at intervals from 0.2 to 0.475 s (about 40 pages a
second in all, far below what one worker fetches on one core) and one worker: which completions shared a
transaction is read from the completed rows' ``xmin`` (the transaction that wrote them last), so no duration
is measured.
"""

from __future__ import annotations

import asyncio

from book_assets.crawl.config import DETAIL, make_queue
from book_assets.crawl.worker import Worker
from book_assets.db.connection import Database
from book_assets.queue import NewTask, domain_of
from book_assets.sandbox.fleet import SandboxFleet
from book_assets_tests.crawl.conftest import sandbox_config

SITES = 12
BOOKS_PER_SITE = 5


def test_a_worker_bound_by_politeness_commits_its_pages_together_not_one_a_transaction(
    db: Database, database_url: str
) -> None:
    with SandboxFleet(SITES, books=SITES * BOOKS_PER_SITE, categories=1) as fleet:
        sites = ("127.0.0.1", *(domain_of(url) for url in fleet.urls))
        config = sandbox_config(
            fleet.urls[0], concurrency=8, min_interval_s=0.25, obey_robots=False, allowed_domains=sites
        )
        tasks = [
            NewTask(DETAIL, {"url": url + book.url_path})
            for url, server in zip(fleet.urls, fleet.servers, strict=True)
            for book in server.catalogue.books
        ]
        queue = make_queue(db, config)
        queue.enqueue_many(tasks)
        for i, url in enumerate(fleet.urls):  # intervals a little apart: the sites' slots drift apart, as at many hosts
            queue.set_domain_policy(domain_of(url), min_interval_s=0.2 + 0.025 * i)
        asyncio.run(Worker(database_url, config, task_types=(DETAIL,)).run())

    row = db.query(
        "SELECT count(*) AS pages, count(DISTINCT xmin::text) AS transactions FROM tasks WHERE status = 'completed'"
    )[0]
    assert row["pages"] == SITES * BOOKS_PER_SITE, row
    assert row["transactions"] <= row["pages"] // 2, row
