"""Run a crawl's worker processes until the queue has nothing left they may claim, replacing any that die.

Each worker is a process of its own (one browser each) that sends its stats back over a pipe when it
finishes. Workers are forked from a fork server that imported the worker's modules once
(:func:`worker_context`). A worker that dies instead (SIGKILL, the OOM killer, a crashed interpreter) sends nothing: its
leases run out and the other workers take its tasks over, and a replacement is started so the crawl keeps
its width. The drain reports every lost worker; its own counters (fetchers, adaptive mode) are missing from
the totals, the pages it completed are in the database's counts. Replacements are bounded (one per worker
slot), so a worker that cannot start ends the drain with :class:`WorkersLost` instead of restarting forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import multiprocessing
import multiprocessing.context
import multiprocessing.forkserver
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess

from book_assets import logs
from book_assets.crawl.config import CrawlConfig
from book_assets.crawl.lifeline import follow_parent
from book_assets.crawl.stats import WorkerStats
from book_assets.observe import metrics, tracing

#: What the fork server imports before it forks a worker: the process's main module (so no worker runs it
#: again, as a spawned one would) and everything a worker runs. The drain's own process does not import the
#: worker (its HTTP client, browser driver, parsers): that is the fork server's work, done beside the drain's.
#: ``surt`` is the archive writer's index key (``archive/journal.py``), which imports it on first use because other
#: processes that import the archive never write: imported here, its modules (tldextract, requests) are loaded
#: once and shared, not again in each worker at its first page.
PRELOAD = ("__main__", "book_assets.crawl.drain", "book_assets.crawl.worker", "surt")


def worker_context(metrics_port: int | None) -> multiprocessing.context.ForkServerContext:
    """Start workers from a fork server (one per drain process, started on first use) that has imported
    :data:`PRELOAD`, and what traces and metrics (``metrics_port``) need when they are on: a worker starts in
    milliseconds with the crawl's modules already loaded.

    Why not ``spawn``: each spawned worker imported the crawl again and re-ran the main module (the CLI),
    about a second of CPU per worker, half the Python CPU of an http crawl of the sandbox
    (``benchmarks/crawl_bench.py``). Why not ``fork``: the drain's process has threads (a database pool, a
    progress bar, Dagster's), which a fork copies in whatever state they hold; the fork server is a clean
    single-threaded process. A worker follows the drain's process, not the fork server it was forked from: when
    the drain dies, its lifeline stops it (``lifeline.py``).
    """
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([*PRELOAD, *tracing.preload(), *metrics.preload(metrics_port)])
    return context


def warm_up(workers: int, metrics_port: int | None) -> None:
    """Start the fork server now, when ``workers`` processes will be forked later: its imports then run
    beside the caller's own start (database, robots.txt, seeding) instead of before the first worker."""
    if workers > 1:
        worker_context(metrics_port)
        multiprocessing.forkserver.ensure_running()


#: How often the supervisor wakes to report progress while it waits for its workers.
TICK_S = 0.5
#: How long workers get to finish their pages and release their leases after the drain is interrupted.
STOP_GRACE_S = 30.0


class WorkersLost(RuntimeError):
    """Every worker process died and no replacement is left: the drain cannot go on."""


@dataclass(frozen=True)
class LostWorker:
    """A worker process that ended without handing back its stats."""

    worker_id: str
    exitcode: int | None

    def describe(self) -> str:
        code = self.exitcode
        if code is not None and code < 0:
            return f"{self.worker_id} killed by {signal.Signals(-code).name}"
        return f"{self.worker_id} exited with status {code}"


def run_worker(
    database_url: str, config: CrawlConfig, worker_id: str | None, task_types: tuple[str, ...]
) -> WorkerStats:
    """One worker in this process until the queue is drained (its id, unset: ``host:pid``, unique across hosts)."""
    from book_assets.crawl.worker import Worker

    worker = Worker(database_url, config, worker_id=worker_id, task_types=task_types)
    return asyncio.run(worker.run())


#: What a worker process runs: :func:`run_worker`'s signature.
RunWorker = Callable[[str, CrawlConfig, str | None, tuple[str, ...]], WorkerStats]


def _child(
    conn: Connection,
    run: RunWorker,
    database_url: str,
    config: CrawlConfig,
    task_types: tuple[str, ...],
    metrics_dir: str | None,
    otel: dict[str, str],
    log_setup: logs.LogSetup,
) -> None:
    """A worker process, forked from the fork server.

    Its first step freezes what the fork server imported: the garbage collector then never walks those
    objects. A full collection writes to every object it walks, so without this each worker's first one
    copies the pages that hold the imports (objects shared with the fork server and the other workers) into
    the worker. The fork server and two workers forked from it, each running one full collection: 90 MB PSS,
    59 MB with the objects frozen first (``benchmarks/fork_memory_bench.py``). A crawl of the 1,081-page
    sandbox ends before its workers make one (its peak PSS is the same either way); the freeze is for the
    crawls that last.
    """
    gc.freeze()
    log_setup.apply()  # the drain's: the fork server is a fresh interpreter, with the environment it started with
    follow_parent()  # a drain that dies without a word leaves no worker crawling on (lifeline.py)
    metrics.join(metrics_dir)  # its figures go to the drain's /metrics (observe/metrics.py)
    tracing.adopt(otel)  # the drain's OTEL_* settings, not the fork server's
    stats = run(database_url, config, None, task_types)
    with contextlib.suppress(BrokenPipeError):  # the drain is gone: nobody is left to tell
        conn.send(stats)
    conn.close()


@dataclass
class _Running:
    """A worker process and the pipe its stats come back through."""

    process: BaseProcess
    results: Connection
    stats: object = None

    @property
    def worker_id(self) -> str:
        return f"{socket.gethostname()}:{self.process.pid}"

    def receive(self) -> None:
        """Take what the worker sent (its stats), or nothing when it died first (its end of the pipe closed).

        Read as soon as it is readable, not once the worker has ended: a worker blocks in its send until the
        pipe's buffer (64 KiB) has room, so stats larger than that (a crawl over thousands of categories) would
        keep it from ending while its drain waited for it to end.
        """
        if self.results.closed:
            return
        try:
            self.stats = self.results.recv() if self.results.poll() else None
        except (EOFError, OSError):  # nothing sent, or cut off by the worker's death
            self.stats = None
        finally:
            self.results.close()


class Drain:
    """W worker processes over one queue; :meth:`run` returns their summed stats (lost workers included)."""

    def __init__(
        self,
        database_url: str,
        config: CrawlConfig,
        task_types: tuple[str, ...],
        workers: int,
        *,
        run: RunWorker = run_worker,
    ) -> None:
        """``run``: what each worker process runs (a module-level function, found by name in the fork server)."""
        self.database_url = database_url
        self.run_worker = run
        self.config = config
        self.task_types = task_types
        self.workers = workers
        self.replacements_left = workers
        self.running: list[_Running] = []
        self.total = WorkerStats(worker_id="all")
        self._ctx = worker_context(config.metrics_port)
        self._otel = tracing.environment()  # checked before any worker starts
        self._logs = logs.LogSetup.current()

    def _start(self) -> None:
        ours, theirs = self._ctx.Pipe(duplex=False)
        process = self._ctx.Process(
            target=_child,
            args=(
                theirs,
                self.run_worker,
                self.database_url,
                self.config,
                self.task_types,
                metrics.directory(),
                self._otel,
                self._logs,
            ),
            name="book-pipeline worker",
        )
        process.start()
        theirs.close()
        self.running.append(_Running(process, ours))

    def run(self, on_tick: Callable[[], None] | None = None) -> WorkerStats:
        for _ in range(self.workers):
            self._start()
        try:
            while self.running:
                pipes = {r.results: r for r in self.running if not r.results.closed}
                for ready in wait([*pipes, *(r.process.sentinel for r in self.running)], timeout=TICK_S):
                    if ready in pipes:
                        pipes[ready].receive()
                for ended in [r for r in self.running if not r.process.is_alive()]:
                    self._collect(ended)
                if on_tick is not None:
                    on_tick()
        finally:
            self._stop_all()
        return self.total

    def _collect(self, ended: _Running) -> None:
        self.running.remove(ended)
        ended.process.join()
        ended.receive()
        if isinstance(ended.stats, WorkerStats):
            self.total.merge(ended.stats)
            return
        self.total.lost_workers.append(LostWorker(ended.worker_id, ended.process.exitcode).describe())
        self.total.worker_ids.append(ended.worker_id)  # the database has its pages (WorkerFigures)
        if self.replacements_left > 0:
            self.replacements_left -= 1
            self._start()
        elif not self.running:
            raise WorkersLost(
                f"all worker processes died ({'; '.join(self.total.lost_workers)}); "
                "their tasks stay in the queue for the next drain"
            )

    def _stop_all(self) -> None:
        """After an interruption: tell the workers to stop (SIGTERM: in-flight pages finish or are released
        within their grace period), wait for them, then end whatever is still running."""
        for r in self.running:
            if r.process.is_alive():
                r.process.terminate()
        deadline = time.monotonic() + STOP_GRACE_S
        for r in self.running:
            r.process.join(timeout=max(0.0, deadline - time.monotonic()))
            if r.process.is_alive():
                r.process.kill()
                r.process.join(timeout=5)
            r.results.close()
        self.running.clear()


def drain(
    database_url: str,
    config: CrawlConfig,
    *,
    task_types: tuple[str, ...] | None = None,
    workers: int | None = None,
    on_tick: Callable[[], None] | None = None,
) -> WorkerStats:
    """Run workers until nothing of ``task_types`` (None: every page kind of the site) claimable is left;
    returns their summed stats.

    One worker and nobody watching: it runs in this process (no fork, no second browser start).
    """
    follow_parent()  # in a Dagster step: a run worker that dies leaves no drain (and no worker of it) behind
    metrics.serve_workers(config.metrics_host, config.metrics_port, config.metrics_final_scrape_s)
    n = workers or config.workers
    task_types = config.task_types if task_types is None else task_types
    if n == 1 and on_tick is None:
        total = WorkerStats(worker_id="all")
        total.merge(run_worker(database_url, config, None, task_types))
        return total
    return Drain(database_url, config, task_types, n).run(on_tick)
