"""A task waiting for its politeness slot does not hold one of the worker's page slots.

With many politely limited sites, most of a crawl's tasks sit waiting for their domain's next slot (up to
an interval). If those waits held page slots, a worker of C pages could serve at most C domains per
interval, however many sites were ready: 20 sites at a 2 s interval reached half their politeness bound
with 16 pages in flight (``docs/growth.md``). Here one page slot and two domains: domain A's tasks come
first in the claim's order, so the worker holds A's second task, waiting a whole interval for its slot,
while B's first task is ready. The order of the slots the database handed out says whether the worker
claimed B's task meanwhile; no duration is measured, and the interval (1 s) is two orders of magnitude
above the time a claim takes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from book_assets.crawl.config import DETAIL, make_queue
from book_assets.crawl.stats import WorkerFigures
from book_assets.crawl.worker import Worker
from book_assets.db.connection import Database
from book_assets.queue import NewTask, domain_of
from book_assets.sandbox.fleet import SandboxFleet
from book_assets_tests.crawl.conftest import sandbox_config

INTERVAL_S = 1.0
PAGES_PER_SITE = 3


def test_a_worker_claims_a_ready_domains_task_while_another_domains_task_waits_for_its_slot(
    db: Database, database_url: str
) -> None:
    with SandboxFleet(2, books=2 * PAGES_PER_SITE, categories=1) as fleet:
        sites = ("127.0.0.1", *(domain_of(url) for url in fleet.urls))
        config = sandbox_config(
            fleet.urls[0], concurrency=1, min_interval_s=INTERVAL_S, obey_robots=False, allowed_domains=sites
        )
        urls = {
            url: [url + book.url_path for book in server.catalogue.books]
            for url, server in zip(fleet.urls, fleet.servers, strict=True)
        }
        site_a, site_b = fleet.urls
        tasks = [NewTask(DETAIL, {"url": u}, priority=1) for u in urls[site_a]]
        tasks += [NewTask(DETAIL, {"url": u}, priority=0) for u in urls[site_b]]
        make_queue(db, config).enqueue_many(tasks)
        stats = asyncio.run(Worker(database_url, config, task_types=(DETAIL,)).run())

    assert WorkerFigures.read(make_queue(db, config), stats).pages == 2 * PAGES_PER_SITE
    rows = db.query("SELECT domain, slot_at FROM tasks WHERE status = 'completed' ORDER BY slot_at")
    slots: dict[str, list[Any]] = {}
    for row in rows:
        slots.setdefault(row["domain"], []).append(row["slot_at"])
    a, b = slots[domain_of(site_a)], slots[domain_of(site_b)]
    assert len(a) == len(b) == PAGES_PER_SITE
    # While A's second task waited for its slot, an interval after the first, B's first was fetched.
    assert b[0] < a[1], f"B's first slot {b[0]} came after A's second {a[1]}: the worker slept on A's slot"
