"""Growth benchmark: how a crawl's cost grows with the catalogue and the number of hosts (not in ``make test``).

Each case serves a sandbox of its size in its own process (``sandbox serve --books N [--hosts K]``), crawls it
in http mode into an emptied scratch database through the project's crawl composition (``Crawl``: start,
work, report), then moves the sandbox to day 1 and crawls again (a conditional re-crawl: the stored
validators are sent). Cases:

- ``1000``, ``10000``, ``100000``: one host of that many books, politeness off (the loopback default).
- ``hosts``: ``--host-books`` books over ``--hosts`` hosts (one port each, so one politeness domain each)
  with a per-domain interval of ``--interval`` seconds, which binds: the politeness bound is
  ``hosts / interval`` pages/s. The crawl's start seeds the first host; the others' start pages are
  enqueued beside it, and every host's domain is an allowed domain, so each gets the interval.

For each crawl: pages/s and its share of the politeness bound; CPU ms per page of the crawl's coordinator,
its workers (summed, as each worker reports its own), the sandbox and PostgreSQL (the postmaster and every
backend, those that exited included; ``postgres_cpu_ms_per_page_by_kind`` splits PostgreSQL's by process kind,
client backends by application name, sampled every 0.25 s); the peak RSS of the largest worker, of the largest
worker's process tree (with its browser in browser mode; sampled each second, with its value at each quarter of
the crawl) and of the sandbox; the workers' claims and their p50/p99 latency as the workers saw them; the time of the
crawl's start, its work and its end (``report``), and within the end the steps it runs (book counts, run
figures, removals, robots, task pruning, WARC index); the database's size per 1,000 books (over the
migrated empty database's). ``ratios`` gives each single-host http case's per-page figures over the
``1000`` case's. Where the server keeps ``pg_stat_statements`` (in ``shared_preload_libraries``: point
``DATABASE_URL`` at such a server; the embedded one has not the extension), ``postgres_statements`` lists the
crawl's top statements by executor time, calls and milliseconds a page. ``--repeat N`` crawls the hosts case N
times and reports the run of median share of the bound, with every run's share.
``--fetch-mode browser`` crawls in Chromium (cases named ``browser-N``), ``--day0-only``
skips the re-crawl, ``--merge`` adds the cases of earlier outputs and ``--svg`` writes the plot of CPU ms per
page against the catalogue's size. ``--sandbox-pass N``
instead fetches every page of an N-book sandbox once and reports the sandbox's peak RSS (its memory serving
a full pass). JSON on stdout::

    {"machine": {...}, "cases": {"1000": {"day0": {...}, "day1": {...}, "db_mb_per_1000_books": N}, ...},
     "ratios": {"10000": {"cpu_ms_per_page": {...}, "end_s_per_1000_books": N, ...}}}

Usage: python benchmarks/growth_bench.py [--cases 1000,10000,hosts] [--workers 2] [--concurrency 8]
       [--hosts 100 --host-books 10000 --host-categories 10 --interval 2.0] [--fetch-mode http]
       [--day0-only] [--merge OUT.json ...] [--svg PLOT.svg] | --sandbox-pass 100000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import multiprocessing
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import scratch_database

from book_assets.crawl import pipeline
from book_assets.crawl.config import LISTING, LISTING_PRIORITY, CrawlConfig, make_queue
from book_assets.db.connection import Database
from book_assets.db.migrations import migrate
from book_assets.queue import TaskQueue
from book_assets.sandbox.catalogue import Catalogue
from book_assets.sites.books import BooksSite

BENCH_DB = "bookpipeline_bench_growth"
#: The steps of ``pipeline.finish`` timed one by one (module attributes of ``book_assets.crawl.pipeline``; the
#: books' counts, ``book_counts``, are the site's ``record_counts``).
END_STEPS = ("settle", "list_robots", "index_days", "list_decisions", "judge_fields")


# --- the sandbox -------------------------------------------------------------------------------------------


class Sandbox:
    """``sandbox serve`` in its own process: its URLs, its CPU time and its peak RSS."""

    def __init__(self, books: int, hosts: int = 1, categories: int | None = None) -> None:
        command = [sys.executable, "-m", "book_assets.cli", "sandbox", "serve", "--port", "0", "--books", str(books)]
        command += ["--hosts", str(hosts)] + (["--categories", str(categories)] if categories else [])
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.process.stdout is not None
        lines = [self.process.stdout.readline() for _ in range(hosts)]
        self.urls = [next(tok for tok in line.split() if tok.startswith("http")).rstrip("/") + "/" for line in lines]
        self.ps = psutil.Process(self.process.pid)

    def cpu_s(self) -> float:
        times = self.ps.cpu_times()
        return times.user + times.system

    def peak_rss_mb(self) -> float:
        """The process's high-water mark of resident memory (``VmHWM``)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
        return 0.0

    def next_day(self) -> None:
        for url in self.urls:
            httpx.post(url + "__sandbox__/day", timeout=120).raise_for_status()

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)


# --- PostgreSQL's CPU --------------------------------------------------------------------------------------


def _postmaster(url: str) -> psutil.Process:
    with Database(url) as db:
        data_directory = db.query("SHOW data_directory")[0]["data_directory"]
    return psutil.Process(int(Path(data_directory, "postmaster.pid").read_text().split()[0]))


def _postgres_cpu_s(postmaster: psutil.Process) -> float:
    """CPU seconds of the postmaster, its live children and the children it has reaped (exited backends)."""
    times = postmaster.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    for child in postmaster.children():
        with contextlib.suppress(psutil.Error):
            c = child.cpu_times()
            total += c.user + c.system
    return total


def _postgres_kind(process: psutil.Process) -> str:
    """A server process's kind from its title: ``backend`` for a client's, else the auxiliary process's name
    (``checkpointer``, ``walwriter``, ``autovacuum worker``, ...)."""
    title = " ".join(process.cmdline())
    name = title.removeprefix("postgres: ").strip()
    for kind in (
        "autovacuum worker",
        "autovacuum launcher",
        "checkpointer",
        "background writer",
        "walwriter",
        "logical replication launcher",
        "stats collector",
        "parallel worker",
    ):
        if name.startswith(kind):
            return kind
    return "backend"


class PostgresCpuByKind:
    """CPU seconds of PostgreSQL's processes by kind over a span, sampled every ``every`` seconds.

    A process that exits between samples is counted up to its last sample; what the postmaster reaped beyond
    that (and its own CPU) is ``other``, so the kinds sum to ``_postgres_cpu_s``'s figure."""

    def __init__(self, postmaster: psutil.Process, url: str, every: float = 0.25) -> None:
        self.postmaster = postmaster
        self.conn = psycopg2.connect(url, application_name="growth-bench sampler")
        self.conn.autocommit = True
        self.every = every
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.kinds: dict[int, str] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.total0 = _postgres_cpu_s(postmaster)

    def _sample(self, initial: bool) -> None:
        for child in self.postmaster.children():
            with contextlib.suppress(psutil.Error):
                times = child.cpu_times()
                if child.pid not in self.kinds:
                    kind = _postgres_kind(child)
                    self.kinds[child.pid] = f"backend: {self._application(child.pid)}" if kind == "backend" else kind
                    self.first[child.pid] = times.user + times.system if initial else 0.0
                self.last[child.pid] = times.user + times.system

    def _application(self, pid: int) -> str:
        """A backend's application name without its instance (``book-pipeline worker``, not its worker id)."""
        with self.conn.cursor() as cur:
            cur.execute("SELECT application_name FROM pg_stat_activity WHERE pid = %s", (pid,))
            row = cur.fetchone()
        return " ".join(str(row[0]).split()[:2]) if row and row[0] else "unnamed"

    def _run(self) -> None:
        while not self.stop.wait(self.every):
            self._sample(initial=False)

    def __enter__(self) -> PostgresCpuByKind:
        self._sample(initial=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self._sample(initial=False)
        self.total = _postgres_cpu_s(self.postmaster) - self.total0
        self.conn.close()

    def seconds(self) -> dict[str, float]:
        by_kind: dict[str, float] = {}
        for pid, kind in self.kinds.items():
            by_kind[kind] = by_kind.get(kind, 0.0) + self.last[pid] - self.first[pid]
        by_kind["other"] = self.total - sum(by_kind.values())
        return by_kind


# --- one crawl in its own process --------------------------------------------------------------------------


@contextlib.contextmanager
def _timed_steps(times: dict[str, float]) -> Iterator[None]:
    """Time the end-of-crawl steps ``pipeline.finish`` calls (and ``TaskQueue.prune``), summed per step."""

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                times[name] = times.get(name, 0.0) + time.perf_counter() - started

        return timed

    saved = {name: getattr(pipeline, name) for name in END_STEPS}
    read, prune, counts = pipeline.RunFigures.read, TaskQueue.prune, BooksSite.record_counts
    for name, fn in saved.items():
        setattr(pipeline, name, wrap(name, fn))
    pipeline.RunFigures.read = wrap("run_figures", read)  # type: ignore[method-assign]
    TaskQueue.prune = wrap("prune_tasks", prune)
    BooksSite.record_counts = wrap("book_counts", counts)  # type: ignore[method-assign]
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(pipeline, name, fn)
        pipeline.RunFigures.read = read  # type: ignore[method-assign]
        TaskQueue.prune = prune
        BooksSite.record_counts = counts  # type: ignore[method-assign]


class TreeMemory(threading.Thread):
    """Samples, every ``every_s``, the resident memory of each worker's process tree (the worker, and in browser
    mode its Playwright driver and Chromium's processes): the workers are the crawl's fork server's children.

    ``series`` is the largest tree's RSS at each sample, to see whether it stays flat over the crawl.
    """

    def __init__(self, every_s: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.every_s = every_s
        self.series: list[float] = []
        self._done = threading.Event()

    def run(self) -> None:
        me = psutil.Process()
        while not self._done.wait(self.every_s):
            trees = []
            for server in me.children():
                for worker in server.children():
                    with contextlib.suppress(psutil.Error):
                        procs = [worker, *worker.children(recursive=True)]
                        trees.append(sum(_rss(p) for p in procs))
            if trees:
                self.series.append(round(max(trees) / 2**20, 1))

    def stop(self) -> dict[str, Any]:
        self._done.set()
        self.join()
        n = len(self.series)
        quarters = [self.series[min(n - 1, n * q // 4)] for q in (1, 2, 3, 4)] if n else []
        return {"peak_mb": max(self.series, default=0.0), "at_quarters_mb": quarters, "samples": n}


def _rss(process: psutil.Process) -> int:
    with contextlib.suppress(psutil.Error):
        return int(process.memory_info().rss)
    return 0


def _crawl(url: str, settings: dict[str, Any], extra_starts: list[str], out: Connection) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF)  # after the imports, which are not the crawl's
    config = CrawlConfig.resolve(**settings)
    steps: dict[str, float] = {}
    t0 = time.perf_counter()
    run = pipeline.begin(url, config)
    with Database(url) as db:
        queue = make_queue(db, config)
        for start in extra_starts:
            queue.enqueue(LISTING, {"url": start, "depth": 1, "start": True}, priority=LISTING_PRIORITY)
    t1 = time.perf_counter()
    memory = TreeMemory()
    memory.start()
    run, stats = pipeline.work(url, run)
    tree = memory.stop()
    t2 = time.perf_counter()
    with _timed_steps(steps):
        report = pipeline.finish(url, run, stats)
    t3 = time.perf_counter()
    me = resource.getrusage(resource.RUSAGE_SELF)
    claims = sorted(ms for ms, n in stats.claim_ms.items() for _ in range(n))
    out.send(
        {
            "pages": report.run.pages,
            "books": report.counts["total"],
            "not_modified": report.run.not_modified,
            "books_changed": report.run.books_changed,
            "books_new": report.run.books_new,
            "failed": sum(report.failed_by_reason.values()),
            "removed": report.removals.removed if report.removals is not None else None,
            "start_s": round(t1 - t0, 3),
            "work_s": round(t2 - t1, 3),
            "end_s": round(t3 - t2, 3),
            "end_steps_s": {name: round(s, 3) for name, s in sorted(steps.items())},
            "coordinator_cpu_s": me.ru_utime + me.ru_stime - before.ru_utime - before.ru_stime,
            # The workers are forked from a fork server, so the crawl's process never reaps them: each reports
            # its own CPU and peak RSS in its stats.
            "workers_cpu_s": stats.cpu_s,
            "peak_worker_rss_mb": round(stats.peak_rss_mb, 1),
            # The largest worker's process tree (with its browser), sampled each second: peak and at each quarter.
            "worker_tree_rss_mb": tree,
            "claims": len(claims),
            "claim_ms": {
                "p50": claims[len(claims) // 2] if claims else None,
                "p99": claims[min(len(claims) - 1, int(len(claims) * 0.99))] if claims else None,
            },
        }
    )
    out.close()


#: The statements a crawl's breakdown lists, by their time in PostgreSQL's executor.
TOP_STATEMENTS = 8


def _statements_reset(url: str) -> str | None:
    """Start pg_stat_statements' count afresh for this database; why not, when the server cannot (the extension
    is not in ``shared_preload_libraries``, as on the embedded server)."""
    conn = psycopg2.connect(url)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            cur.execute("SELECT pg_stat_statements_reset()")
    except psycopg2.Error as exc:
        return f"unavailable: {str(exc).strip().splitlines()[0]}"
    finally:
        conn.close()
    return None


def _statements(url: str, pages: int) -> list[dict[str, Any]]:
    """The crawl's top-level statements in this database by executor time: calls and milliseconds a page."""
    conn = psycopg2.connect(url)
    with conn.cursor() as cur:
        cur.execute(
            "SELECT calls, total_exec_time, rows, left(regexp_replace(query, '\\s+', ' ', 'g'), 90)"
            " FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " ORDER BY total_exec_time DESC LIMIT %s",
            (TOP_STATEMENTS,),
        )
        rows = cur.fetchall()
    conn.close()
    return [
        {
            "query": query,
            "calls_per_page": round(calls / pages, 3),
            "exec_ms_per_page": round(total_ms / pages, 3),
            "mean_ms": round(total_ms / calls, 3) if calls else 0.0,
        }
        for calls, total_ms, _rows, query in rows
    ]


def measure(url: str, sandbox: Sandbox, settings: dict[str, Any], extra_starts: list[str]) -> dict[str, Any]:
    """One crawl in a spawned process, with the CPU of every process involved over its span, and PostgreSQL's
    time by statement where the server keeps pg_stat_statements."""
    postmaster = _postmaster(url)
    statements_unavailable = _statements_reset(url)
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    sb0 = sandbox.cpu_s()
    started = time.monotonic()
    with PostgresCpuByKind(postmaster, url) as postgres_cpu:
        proc = ctx.Process(target=_crawl, args=(url, settings, extra_starts, send))
        proc.start()
        send.close()
        result: dict[str, Any] = receive.recv()
        proc.join()
    wall = time.monotonic() - started
    pg, sb = postgres_cpu.total, sandbox.cpu_s() - sb0
    pages = max(1, result["pages"])
    result["pages_per_s"] = round(result["pages"] / result["work_s"], 1) if result["work_s"] else 0.0
    result["wall_s"] = round(wall, 2)
    cpu = {
        "coordinator": result.pop("coordinator_cpu_s"),
        "workers": result.pop("workers_cpu_s"),
        "postgres": pg,
        "sandbox": sb,
    }
    result["cpu_ms_per_page"] = {name: round(1000 * s / pages, 3) for name, s in cpu.items()}
    result["cpu_ms_per_page"]["crawl_total"] = round(
        1000 * (cpu["coordinator"] + cpu["workers"] + cpu["postgres"]) / pages, 3
    )
    result["postgres_cpu_ms_per_page_by_kind"] = {
        kind: round(1000 * s / pages, 3) for kind, s in sorted(postgres_cpu.seconds().items())
    }
    result["sandbox_peak_rss_mb"] = sandbox.peak_rss_mb()
    result["postgres_statements"] = statements_unavailable or _statements(url, pages)
    return result


def _database_mb(url: str) -> float:
    conn = psycopg2.connect(url)
    with conn.cursor() as cur:
        cur.execute("SELECT pg_database_size(current_database())")
        row = cur.fetchone()
    conn.close()
    return float(row[0]) / 1e6 if row else 0.0


def run_case(url: str, books: int, hosts: int, interval: float | None, args: argparse.Namespace) -> dict[str, Any]:
    """Day 0 into an empty database, then day 1 conditionally, on a fresh sandbox of ``books`` over ``hosts``."""
    scratch_database(BENCH_DB)
    with Database(url) as db:  # before any timing: the first crawl would otherwise include the migrations
        migrate(db)
    empty_mb = _database_mb(url)
    t = time.perf_counter()
    sandbox = Sandbox(books, hosts, args.host_categories if hosts > 1 else None)
    sandbox_start_s = time.perf_counter() - t
    settings: dict[str, Any] = {
        "base_url": sandbox.urls[0],
        "fetch_mode": args.fetch_mode,
        "workers": args.workers,
        "concurrency": args.concurrency,
        "min_interval_s": interval or 0.0,
        "timeout_s": 60,
        # The WARC index covers its UTC day's archive: a folder of the case's own keeps other runs out of it
        # (the day-1 re-crawl, on the same UTC day, still indexes day 0's records beside its own).
        "warc_dir": tempfile.mkdtemp(prefix="growth-warc-"),
    }
    if hosts > 1:
        settings["allowed_domains"] = ("127.0.0.1", *(u.removeprefix("http://").rstrip("/") for u in sandbox.urls[1:]))
    out: dict[str, Any] = {
        "books": books,
        "hosts": hosts,
        "fetch_mode": args.fetch_mode,
        "sandbox_start_s": round(sandbox_start_s, 2),
        "db_mb_empty": round(empty_mb, 1),
    }
    try:
        out["day0"] = measure(url, sandbox, settings, sandbox.urls[1:])
        print(json.dumps({"books": books, "hosts": hosts, "day0": out["day0"]}), file=sys.stderr, flush=True)
        out["db_mb"] = round(_database_mb(url), 1)
        out["db_mb_per_1000_books"] = round((out["db_mb"] - empty_mb) / (books / 1000), 2)
        if not args.day0_only:
            sandbox.next_day()
            out["day1"] = measure(url, sandbox, settings, sandbox.urls[1:])
            out["db_mb_after_day1"] = round(_database_mb(url), 1)
    finally:
        sandbox.close()
        shutil.rmtree(settings["warc_dir"], ignore_errors=True)
    if interval:
        bound = hosts / interval
        out["politeness_bound_pages_per_s"] = round(bound, 1)
        for day in ("day0", "day1"):
            if day in out:
                out[day]["share_of_bound"] = round(out[day]["pages_per_s"] / bound, 3)
    return out


def ratios(cases: dict[str, Any]) -> dict[str, Any]:
    """Each single-host case's figures per page (per 1,000 books for the end) over the ``1000`` case's."""
    base = cases.get("1000")
    if base is None:
        return {}
    out: dict[str, Any] = {}
    for name, case in cases.items():
        if name == "1000" or case["hosts"] != 1 or case.get("fetch_mode", "http") != "http":
            continue
        scale = case["books"] / base["books"]
        entry: dict[str, Any] = {}
        for day in ("day0", "day1"):
            if day not in case or day not in base:
                continue
            now, then = case[day], base[day]
            entry[day] = {
                "cpu_ms_per_page": {
                    k: round(v / then["cpu_ms_per_page"][k], 2) if then["cpu_ms_per_page"][k] else None
                    for k, v in now["cpu_ms_per_page"].items()
                },
                "pages_per_s": round(now["pages_per_s"] / then["pages_per_s"], 2),
                "end_s_per_book": round((now["end_s"] / scale) / then["end_s"], 2) if then["end_s"] else None,
                "end_steps_s_per_book": {
                    k: round((v / scale) / then["end_steps_s"][k], 2)
                    for k, v in now["end_steps_s"].items()
                    if then["end_steps_s"].get(k)
                },
                "peak_worker_rss": round(now["peak_worker_rss_mb"] / then["peak_worker_rss_mb"], 2),
                "claim_ms": {
                    k: round(v / then["claim_ms"][k], 2) for k, v in now["claim_ms"].items() if then["claim_ms"].get(k)
                },
            }
        entry["db_mb_per_1000_books"] = round(case["db_mb_per_1000_books"] / base["db_mb_per_1000_books"], 2)
        out[name] = entry
    return out


# --- the sandbox alone: a full pass over its pages ---------------------------------------------------------


def sandbox_pass(books: int, concurrency: int = 16) -> dict[str, Any]:
    """Fetch every page of an N-book sandbox once (listings, then books): its peak RSS and build time."""
    t = time.perf_counter()
    catalogue = Catalogue(books=books)
    build_s = time.perf_counter() - t
    paths = catalogue.listing_paths() + [b.url_path for b in catalogue.books]
    del catalogue
    t = time.perf_counter()
    sandbox = Sandbox(books)
    start_s = time.perf_counter() - t
    rss_at_start = sandbox.peak_rss_mb()

    async def fetch_all() -> int:
        failures = 0
        todo = iter(paths)
        async with httpx.AsyncClient(base_url=sandbox.urls[0], timeout=60) as client:

            async def worker() -> None:
                nonlocal failures
                for path in todo:
                    response = await client.get(path)
                    failures += response.status_code != 200

            await asyncio.gather(*(worker() for _ in range(concurrency)))
        return failures

    try:
        t = time.perf_counter()
        failures = asyncio.run(fetch_all())
        elapsed = time.perf_counter() - t
        return {
            "books": books,
            "pages": len(paths),
            "failures": failures,
            "catalogue_build_s": round(build_s, 2),
            "sandbox_start_s": round(start_s, 2),
            "sandbox_rss_after_start_mb": rss_at_start,
            "sandbox_peak_rss_mb": sandbox.peak_rss_mb(),
            "pass_s": round(elapsed, 1),
            "pages_per_s": round(len(paths) / elapsed, 1),
            "sandbox_cpu_ms_per_page": round(1000 * sandbox.cpu_s() / len(paths), 3),
        }
    finally:
        sandbox.close()


# --- the plot ------------------------------------------------------------------------------------------------

#: The processes plotted, with their colours.
PLOT_SERIES = (("crawl_total", "#222222"), ("workers", "#1f77b4"), ("postgres", "#d62728"), ("coordinator", "#2ca02c"))


def cost_plot_svg(cases: dict[str, Any], about: str) -> str:
    """CPU ms per page of each process against the catalogue's size (log scale), day 0 and day 1, as an SVG.

    Written by hand (a few lines of SVG) so the benchmark needs no plotting library.
    """
    plotted = [c for c in cases.values() if c["hosts"] == 1 and c.get("fetch_mode", "http") == "http"]
    points = sorted((c["books"], c) for c in plotted)
    if not points:
        return ""
    width, height, left, right, top, bottom = 640, 400, 60, 150, 40, 50
    books = [b for b, _ in points]
    costs = [c[d]["cpu_ms_per_page"][k] for _, c in points for d in ("day0", "day1") if d in c for k, _ in PLOT_SERIES]
    lo, hi = math.log10(min(books)), math.log10(max(books))
    top_y = max(1.0, math.ceil(max(costs)))

    def x(b: float) -> float:
        return left + (width - left - right) * ((math.log10(b) - lo) / (hi - lo) if hi > lo else 0.5)

    def y(v: float) -> float:
        return float(height - bottom - (height - top - bottom) * v / top_y)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
        'font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="20" font-size="14">CPU ms per page against catalogue size (http, one host)</text>',
        f'<text x="{left}" y="{height - 8}" fill="#555">{about}</text>',
        f'<line x1="{left}" y1="{y(0)}" x2="{width - right}" y2="{y(0)}" stroke="black"/>',
        f'<line x1="{left}" y1="{y(0)}" x2="{left}" y2="{y(top_y)}" stroke="black"/>',
    ]
    for i in range(int(top_y) + 1):
        out.append(f'<text x="{left - 8}" y="{y(i) + 4}" text-anchor="end">{i}</text>')
        out.append(f'<line x1="{left}" y1="{y(i)}" x2="{width - right}" y2="{y(i)}" stroke="#eee"/>')
    for b in books:
        out.append(f'<text x="{x(b)}" y="{y(0) + 18}" text-anchor="middle">{b:,} books</text>')
    for row, (name, colour) in enumerate(PLOT_SERIES):
        for day, dash in (("day0", ""), ("day1", ' stroke-dasharray="4 3"')):
            days = [(b, c) for b, c in points if day in c]
            path = " ".join(f"{x(b):.1f},{y(c[day]['cpu_ms_per_page'][name]):.1f}" for b, c in days)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
            for b, c in days:
                cy = y(c[day]["cpu_ms_per_page"][name])
                out.append(f'<circle cx="{x(b):.1f}" cy="{cy:.1f}" r="3" fill="{colour}"/>')
        ly = top + 10 + 18 * row
        out.append(f'<line x1="{width - right + 10}" y1="{ly}" x2="{width - right + 30}" y2="{ly}" '
                   f'stroke="{colour}" stroke-width="2"/>')  # fmt: skip
        out.append(f'<text x="{width - right + 36}" y="{ly + 4}">{name.replace("_", " ")}</text>')
    ly = top + 10 + 18 * len(PLOT_SERIES)
    out.append(f'<text x="{width - right + 10}" y="{ly + 4}" fill="#555">solid: day 0</text>')
    out.append(f'<text x="{width - right + 10}" y="{ly + 22}" fill="#555">dashed: day 1 (304s)</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def machine() -> dict[str, Any]:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": commit.stdout.strip(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run whose day-0 share of the politeness bound is the median of ``runs``, with every run's share."""
    ranked = sorted(runs, key=lambda run: float(run["day0"]["share_of_bound"]))
    median = ranked[(len(ranked) - 1) // 2]
    return {**median, "shares_of_bound": [run["day0"]["share_of_bound"] for run in runs]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="1000,10000", help="comma-separated: 1000, 10000, 100000, hosts, none")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--host-books", type=int, default=10_000)
    parser.add_argument("--host-categories", type=int, default=10, help="categories per host in the hosts case")
    parser.add_argument("--interval", type=float, default=2.0, help="per-domain interval of the hosts case (s)")
    parser.add_argument("--sandbox-pass", type=int, default=0, metavar="N", help="only a full pass over N books")
    parser.add_argument("--fetch-mode", default="http", choices=("http", "browser", "adaptive"))
    parser.add_argument("--day0-only", action="store_true", help="no day-1 re-crawl")
    parser.add_argument(
        "--repeat", type=int, default=1, help="crawl the hosts case N times and report the run of median share"
    )
    parser.add_argument("--svg", type=Path, help="write the plot of CPU ms per page against catalogue size here")
    parser.add_argument(
        "--merge", type=Path, nargs="*", default=[], help="earlier outputs of this script whose cases join this run's"
    )
    args = parser.parse_args()
    if args.sandbox_pass:
        print(json.dumps({"machine": machine(), "sandbox_pass": sandbox_pass(args.sandbox_pass)}))
        return
    names = [name for name in args.cases.split(",") if name != "none"]
    url = scratch_database(BENCH_DB) if names else ""
    cases: dict[str, Any] = {}
    for name in names:
        if name == "hosts":
            case = median_run(
                [run_case(url, args.host_books, args.hosts, args.interval, args) for _ in range(args.repeat)]
            )
        else:
            case = run_case(url, int(name), 1, None, args)
        name = name if args.fetch_mode == "http" else f"{args.fetch_mode}-{name}"
        cases[name] = case
        print(json.dumps({name: case}), file=sys.stderr)
    for earlier in args.merge:  # cases run one per invocation (each holds the machine for minutes)
        cases = {**json.loads(earlier.read_text())["cases"], **cases}
    about = machine()
    if args.svg:
        args.svg.write_text(
            cost_plot_svg(cases, f"{about['date'][:10]}, commit {about['commit']}, {about['cpus']} cores")
        )
    print(json.dumps({"machine": about, "cases": cases, "ratios": ratios(cases)}))


if __name__ == "__main__":
    main()
