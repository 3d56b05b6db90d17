"""What more than one benchmark uses: scratch databases, a crawl run for measuring, Chromium's ceiling loop, the
memory of a worker's process tree, and the queue's claim-throughput measurement.

A benchmark imports it as ``harness`` (each puts its own folder on ``sys.path``, as it does for the project).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
import psycopg2

from book_assets.crawl.config import CrawlConfig
from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database, resolve_database_url
from book_assets.queue import Backoff, TaskQueue
from book_assets.sandbox.catalogue import Catalogue
from book_assets.scraper.chromium import CHROMIUM_ARGS
from book_assets.settings import load_settings

# --------------------------------------------------------------------------- scratch databases


def scratch_database(name: str) -> str:
    """The URL of database ``name``, dropped and created empty beside the configured one."""
    base = resolve_database_url(load_settings())
    admin = base.rsplit("/", 1)[0] + "/postgres"
    conn = psycopg2.connect(admin)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        cur.execute(f'CREATE DATABASE "{name}"')
    conn.close()
    return base.rsplit("/", 1)[0] + f"/{name}"


def reset_crawl_tables(url: str) -> None:
    """Empty the books, their versions, the pages and the tasks of a scratch database (once migrated)."""
    conn = psycopg2.connect(url)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("SELECT to_regclass('books') IS NOT NULL")
        row = cur.fetchone()
        if row and row[0]:
            cur.execute("TRUNCATE books, book_versions, pages, tasks RESTART IDENTITY CASCADE")
    conn.close()


# --------------------------------------------------------------------------- crawls and Chromium

#: What the ceiling loop blocks inside Chromium: the sandbox's images, stylesheets, fonts and media.
CEILING_BLOCKED = ["*.jpg", "*.jpeg", "*.png", "*.gif", "*.webp", "*.svg", "*.ico", "*.css", "*.woff*", "*.ttf"]


def crawled_paths(catalogue: Catalogue) -> list[str]:
    """The pages a full crawl fetches: the start page, each category's chain of listing pages, every book.
    The ceiling loads these and no others, so its pages/s and the crawl's count the same mix (a listing page
    costs Chromium more than a book page)."""
    main_listing = ("/catalogue/page-", "/catalogue/category/books_1/")
    listings = [p for p in catalogue.listing_paths() if not p.startswith(main_listing)]
    return listings + sorted(catalogue.ground_truth())


async def ceiling_pages_per_s(base_url: str, paths: list[str], tabs: int, chromium: str) -> float:
    """Pages/s of a bare Playwright loop over ``paths`` in ``tabs`` tabs: JavaScript off, the
    :data:`CEILING_BLOCKED` resources blocked inside Chromium, no database, no parsing."""
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=chromium, headless=True, args=list(CHROMIUM_ARGS))
        context = await browser.new_context(java_script_enabled=False, service_workers="block")
        queue: asyncio.Queue[str] = asyncio.Queue()
        for path in paths:
            queue.put_nowait(base_url.rstrip("/") + path)

        async def tab() -> None:
            page = await context.new_page()
            cdp = await context.new_cdp_session(page)
            await cdp.send("Network.enable")
            await cdp.send("Network.setBlockedURLs", {"urls": CEILING_BLOCKED})
            while not queue.empty():
                url = queue.get_nowait()
                response = await page.goto(url, wait_until="load")
                assert response is not None and response.status == 200, url
                await response.body()

        started = time.monotonic()
        await asyncio.gather(*(tab() for _ in range(tabs)))
        elapsed = time.monotonic() - started
        await browser.close()
    return len(paths) / elapsed


def crawl_for_figures(url: str, base_url: str, mode: str, overrides: dict[str, Any], result: Any) -> None:
    """A full crawl of ``base_url`` with politeness off; its figures into ``result`` (a manager's dict, so a
    child process can be the one that crawls).

    A scratch archive per run, as the database is reset per run: the crawl's end indexes the day's WARC
    files, and a folder shared across runs would make each run index every earlier run's files too.
    """
    with tempfile.TemporaryDirectory(prefix="bench-warc-") as warc_dir:
        config = CrawlConfig.resolve(
            base_url=base_url, fetch_mode=mode, min_interval_s=0.0, **{**overrides, "warc_dir": Path(warc_dir)}
        )
        report = crawl(url, config)
        result["pages"] = report.run.pages
        result["books"] = report.counts["total"]
        result["elapsed_s"] = report.elapsed_s
        result["workers"] = config.workers
        result["concurrency"] = config.fetch.concurrency
        result["summary"] = report.summary_lines()
        result["concurrency_history"] = report.stats.concurrency


def worker_pss(root: psutil.Process) -> int:
    """Largest PSS (bytes) of one worker process tree below ``root`` (the crawl's pool children): the worker,
    Playwright's driver and Chromium's processes, pages shared between them counted once."""
    best = 0
    for worker in root.children():
        total = 0
        with contextlib.suppress(psutil.Error):
            for member in [worker, *worker.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    info = member.memory_full_info()
                    total += getattr(info, "pss", info.rss)
        best = max(best, total)
    return best


# --------------------------------------------------------------------------- the queue

#: The one domain of the queue benchmarks, with politeness off: the figures are the queue's overhead.
BENCH_DOMAIN = "bench.example"
QUEUE_TASK_TYPES = ("detail", "listing")
SPAWN = multiprocessing.get_context("spawn")
#: Tasks per fair claim in the fair throughput figures: the batch of the plain one, so the two compare.
FAIR_BATCH = 50
#: Type weights of the interleaved fair figure; the tasks are filled in the same proportion, so that both
#: types stay backlogged to the end.
TYPE_WEIGHTS = {"listing": 1.0, "detail": 3.0}


def bench_queue(db: Database) -> TaskQueue:
    return TaskQueue(db, task_types=QUEUE_TASK_TYPES, lease_s=60, backoff=Backoff(), default_interval_s=0.0)


def reset_queue(db: Database) -> None:
    """An empty queue whose benchmark domain has no interval."""
    db.query(
        "TRUNCATE tasks, domains, queue_scopes, queue_members RESTART IDENTITY; "
        "INSERT INTO domains (domain, min_interval_s) VALUES (%s, 0)",
        (BENCH_DOMAIN,),
    )


def fill_queue(db: Database, n: int, groups: int = 50, types: dict[str, float] | None = None) -> None:
    """n pending tasks over ``groups`` groups: all detail, or split between the types by their weights."""
    weights = types or {"detail": 1.0}
    total = sum(weights.values())
    start = 0
    names = sorted(weights)
    for task_type in names:
        count = n - start if task_type == names[-1] else round(n * weights[task_type] / total)
        db.query(
            """INSERT INTO tasks (task_type, payload, domain, task_group, priority)
               SELECT %s, jsonb_build_object('url', 'http://bench.example/b/' || i), %s,
                      'g' || (i %% %s), 0
               FROM generate_series(%s, %s) AS i""",
            (task_type, BENCH_DOMAIN, groups, start + 1, start + count),
        )
        db.query(
            "INSERT INTO queue_members (scope, member) SELECT %s, 'g' || g FROM generate_series(0, %s) g",
            (f"groups:{task_type}", groups - 1),
        )
        start += count
    conn = psycopg2.connect(db.url)  # VACUUM cannot run in the transaction Database.run opens
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("VACUUM ANALYZE tasks")
    conn.close()


def _claiming_worker(
    url: str, name: str, barrier: Any, results: Any, batch: int, scheduled: bool, interleave: bool
) -> None:
    db = Database(url, application_name=f"queue-bench-{name}")
    queue = bench_queue(db)
    db.connection()
    barrier.wait(120)
    done = 0
    while True:
        if interleave:
            tasks = queue.claim(name, batch, type_weights=TYPE_WEIGHTS, scheduled=scheduled).tasks
        else:
            tasks = queue.claim(name, batch, task_types=["detail"], scheduled=scheduled).tasks
        if not tasks:
            break
        done += queue.complete_many(tasks)
    results.put((done, time.perf_counter()))
    db.close()


def claim_complete_per_s(
    db: Database, url: str, workers: int, n: int, *, batch: int = 50, scheduled: bool = False, interleave: bool = False
) -> float:
    """Tasks claimed and completed per second by ``workers`` processes, each claiming ``batch`` at a time
    (``scheduled``: the fair claim; ``interleave``: listing and detail tasks, claimed with the type weights)."""
    reset_queue(db)
    fill_queue(db, n, types=TYPE_WEIGHTS if interleave else None)
    barrier, results = SPAWN.Barrier(workers + 1), SPAWN.Queue()
    procs = [
        SPAWN.Process(target=_claiming_worker, args=(url, f"w{i}", barrier, results, batch, scheduled, interleave))
        for i in range(workers)
    ]
    for p in procs:
        p.start()
    barrier.wait(120)
    started = time.perf_counter()
    outcomes = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(30)
    finished = max(t for _, t in outcomes)
    total = sum(d for d, _ in outcomes)
    if total != n:
        raise RuntimeError(f"{total} tasks completed out of {n}")
    return float(n / (finished - started))
