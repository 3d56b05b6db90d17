"""One crawl worked by ``book-pipeline work`` on several namespace hosts, and what the site saw of it.

The driver (this process, in the root namespace) serves the sandbox on the bridge address, gives each run a
fresh database on the run's own PostgreSQL, starts one worker per host through ``ip netns exec``, waits
until every worker is connected and idle, then starts the crawl (its politeness stored, the start page
seeded: :func:`~book_assets.crawl.pipeline.begin`) and times it until nothing is outstanding. The sandbox
records every request's start, so the spacing per domain is measured where politeness matters: at the site,
across all hosts; :class:`HostSandbox` also notes which host (client address) each start came from.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from book_assets.crawl.config import TASK_TYPES, CrawlConfig, make_queue
from book_assets.crawl.pipeline import begin
from book_assets.db.connection import Database
from book_assets.db.migrations import migrate
from book_assets.sandbox.server import SandboxServer
from book_assets.settings import PROJECT_ROOT
from book_assets.store.books import book_counts
from book_assets_tests.conftest import child_env
from book_assets_tests.scale.hosts import Host, PostgresOnAddress

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
_STOPPED = re.compile(r"worker stopped: (\d+) pages, (\d+) books")


_PEER: ContextVar[str] = ContextVar("sandbox_peer", default="")


class HostSandbox(SandboxServer):
    """The sandbox, also noting the client address of every request start it records: which host sent it.

    The sandbox's stats say when each request started, not from where; this wraps the app's connection
    callback (to learn the peer of the connection) and its recorder's ``begin`` (to note the pair), so the
    server itself is unchanged.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._starts: list[tuple[float, str, str]] = []
        app = self.app
        on_connection, begin = app._on_connection, app.recorder.begin

        async def noting_peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            peer = writer.get_extra_info("peername")
            _PEER.set(str(peer[0]) if peer else "")
            await on_connection(reader, writer)

        def begin_noted(path: str, started: float) -> int:
            with self._lock:
                self._starts.append((started, _PEER.get(), path))
            return begin(path, started)

        app._on_connection = noting_peer  # type: ignore[method-assign]
        app.recorder.begin = begin_noted  # type: ignore[method-assign]

    def reset_stats(self) -> None:
        with self._lock:
            super().reset_stats()
            self._starts.clear()

    def starts(self) -> list[tuple[float, str, str]]:
        """Every site request's (start time, client address, path) since the last reset, in time order."""
        with self._lock:
            return sorted(self._starts)


@dataclass
class HostRun:
    """What one crawl on ``len(hosts)`` hosts did, read from the database, the site and the workers."""

    hosts: int
    books: int
    elapsed_s: float
    counts: dict[str, int]
    outstanding: int
    failed: int
    #: Requests per path the site served (each detail path should be fetched once).
    hits: dict[str, int]
    #: Page requests' starts at the site and the address of the host that sent each, in time order.
    starts: list[tuple[float, str]]
    #: Each completed page's politeness slot (``tasks.slot_at``, epoch seconds of the database's clock) by path.
    slots: dict[str, float] = field(default_factory=dict)
    #: Page requests' (start at the site, path), in time order.
    paths: list[tuple[float, str]] = field(default_factory=list)
    #: Pages each host's worker fetched, from its own summary line (None: no summary, it did not stop cleanly).
    pages_by_host: list[int | None] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)

    @property
    def books_per_s(self) -> float:
        return self.books / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def request_times(self) -> list[float]:
        """Request starts at the site, sorted (``time.time()`` of the root namespace)."""
        return [t for t, _ in self.starts]

    @property
    def requests_by_host(self) -> dict[str, int]:
        return dict(Counter(peer for _, peer in self.starts))

    @property
    def spacings(self) -> list[float]:
        return [b - a for a, b in itertools.pairwise(self.request_times)]

    @property
    def min_spacing_s(self) -> float:
        return min(self.spacings, default=0.0)

    @property
    def warm_spacings(self) -> list[float]:
        """The gaps between consecutive starts, leaving out the gaps next to each host's first request.

        A worker's first request reaches the site later after its politeness slot than the others do
        (its HTTP client finishes setting up on first use: about 80 ms here), so it lands closer to the
        next slot's request than the interval; from its second request on, starts land on their slots.
        """
        firsts, seen = set(), set()
        for i, (_, peer) in enumerate(self.starts):
            if peer not in seen:
                seen.add(peer)
                firsts.add(i)
        return [
            self.starts[i + 1][0] - self.starts[i][0]
            for i in range(len(self.starts) - 1)
            if i not in firsts and i + 1 not in firsts
        ]

    @property
    def min_warm_spacing_s(self) -> float:
        return min(self.warm_spacings, default=0.0)

    @property
    def slot_gaps(self) -> list[float]:
        """The gaps between consecutive slots the database handed out for the domain."""
        return [b - a for a, b in itertools.pairwise(sorted(self.slots.values()))]

    def early_starts(self, tolerance_s: float) -> dict[str, float]:
        """Pages whose request reached the site more than ``tolerance_s`` before their slot: path -> seconds.

        The site and the database read one kernel's clock, whatever namespace each runs in.
        """
        return {
            path: round(self.slots[path] - started, 4)
            for started, path in self.paths
            if path in self.slots and started < self.slots[path] - tolerance_s
        }

    def rate_per_s(self, trim: float = 0.1) -> float:
        """Request starts per second over the middle of the run (``trim`` of the starts cut at each end).

        The ends are not the steady state the bound is about: the crawl opens with one start page and its
        category pages (too few tasks to fill the budget) and closes with the last few pages.
        """
        times = self.request_times
        cut = int(len(times) * trim)
        middle = times[cut : len(times) - cut] if len(times) - 2 * cut >= 2 else times
        span = middle[-1] - middle[0] if len(middle) >= 2 else 0.0
        return (len(middle) - 1) / span if span > 0 else 0.0


def worker_env(database_url: str, settings: Mapping[str, Any]) -> dict[str, str]:
    """The environment of a ``work`` process: this checkout on the path, the run's database and settings only."""
    env = child_env(PYTHONPATH=str(PROJECT_ROOT), DATABASE_URL=database_url)
    for name, value in settings.items():
        env[f"BOOK_PIPELINE_{name.upper()}"] = ",".join(value) if isinstance(value, tuple | list) else str(value)
    return env


def _worker_argv(skew_s: float | None) -> list[str]:
    argv = [sys.executable, "-m", "book_assets.cli", "work"]
    if skew_s is None:
        return argv
    # libfaketime shifts the clock this process reads (time.time(), datetime.now()) by skew_s seconds.
    return ["env", f"LD_PRELOAD={LIBFAKETIME}", f"FAKETIME={skew_s:+g}", *argv]


def _connected_workers(db: Database, database: str) -> int:
    rows = db.query(
        "SELECT count(DISTINCT application_name) AS n FROM pg_stat_activity "
        "WHERE datname = %s AND application_name LIKE 'book-pipeline worker %%'",
        (database,),
    )
    return int(rows[0]["n"])


def run_on_hosts(
    hosts: Sequence[Host],
    postgres: PostgresOnAddress,
    sandbox: HostSandbox,
    settings: Mapping[str, Any],
    *,
    database: str,
    skew_s: Mapping[int, float] | None = None,
    through: Callable[[str], str] | None = None,
    timeout_s: float = 300.0,
) -> HostRun:
    """Crawl ``sandbox`` with one ``book-pipeline work`` per host; ``skew_s`` maps host index -> clock offset.

    ``settings`` are the crawl's settings (base_url is the sandbox's); workers and driver resolve the same
    ones. ``through`` maps a database name to the URL the workers and the crawl use instead of the direct
    one (a connection pooler's in transaction mode, the direct one given as ``DATABASE_DIRECT_URL``); the
    schema is made on the direct connection first, and the run does not wait for the workers to be idle (a
    pooler's server connections do not say whose they are). Every worker is stopped (SIGTERM, then
    SIGKILL) before this returns, whatever happens.
    """
    direct = postgres.create_database(database)
    url = through(database) if through is not None else direct
    full = {"base_url": sandbox.url + "/", **settings}
    config = CrawlConfig.resolve(**full)
    with Database(direct, application_name="scale driver") as setup:
        migrate(setup)
    saved = os.environ.get("DATABASE_DIRECT_URL")
    if through is not None:
        os.environ["DATABASE_DIRECT_URL"] = direct  # the driver's own crawl start goes through the pooler too
    try:
        return _run(hosts, sandbox, database, url, direct if through is not None else None, full, config,
                    skew_s, timeout_s)  # fmt: skip
    finally:
        if saved is None:
            os.environ.pop("DATABASE_DIRECT_URL", None)
        else:
            os.environ["DATABASE_DIRECT_URL"] = saved


def _run(
    hosts: Sequence[Host],
    sandbox: HostSandbox,
    database: str,
    url: str,
    direct: str | None,
    full: dict[str, Any],
    config: CrawlConfig,
    skew_s: Mapping[int, float] | None,
    timeout_s: float,
) -> HostRun:
    through = direct is not None
    with Database(url, application_name="scale driver") as db:
        env = worker_env(url, full)
        if direct is not None:
            env["DATABASE_DIRECT_URL"] = direct
        logdir = Path(tempfile.mkdtemp(prefix="book-pipeline-hosts-logs-"))
        procs: list[subprocess.Popen[bytes]] = []
        try:
            for i, host in enumerate(hosts):
                log = (logdir / f"{host.name}.log").open("wb")
                argv = host.command(_worker_argv((skew_s or {}).get(i)))
                procs.append(subprocess.Popen(argv, env=env, cwd=logdir, stdout=log, stderr=subprocess.STDOUT))
                log.close()
            if not through:
                _wait_for(lambda: _connected_workers(db, database) >= len(hosts), procs, 120, logdir)
                time.sleep(0.3)  # each worker past its first (empty) claim, listening for work
            sandbox.reset_stats()
            started = time.monotonic()
            begin(url, config)
            queue = make_queue(db, config)
            _wait_for(lambda: queue.outstanding(TASK_TYPES) == 0, procs, timeout_s, logdir, poll_s=0.05)
            elapsed = time.monotonic() - started
        finally:
            _stop(procs)
            logs = [(logdir / f"{h.name}.log").read_text(errors="replace") for h in hosts]
            shutil.rmtree(logdir, ignore_errors=True)
        stats = make_queue(db, config).stats()
        slots = {
            urlsplit(row["url"]).path: row["slot_at"].timestamp()
            for row in db.query(
                "SELECT payload->>'url' AS url, slot_at FROM tasks WHERE status = 'completed' AND slot_at IS NOT NULL"
            )
        }
        counts = book_counts(db)
        seen = sandbox.stats()
        # robots.txt is one request per origin and crawl, outside the politeness slots: pages only here.
        pages = [(t, peer, path) for t, peer, path in sandbox.starts() if path != "/robots.txt"]
        return HostRun(
            hosts=len(hosts),
            books=counts["total"],
            elapsed_s=elapsed,
            counts=counts,
            outstanding=stats.total("pending") + stats.total("in_progress"),
            failed=stats.total("failed"),
            hits=seen.hits,
            starts=[(t, peer) for t, peer, _ in pages],
            slots=slots,
            paths=[(t, path) for t, _, path in pages],
            pages_by_host=[_pages(text) for text in logs],
            logs=logs,
        )


def _pages(log: str) -> int | None:
    match = _STOPPED.search(log)
    return int(match.group(1)) if match else None


def _wait_for(
    predicate: Any, procs: list[subprocess.Popen[bytes]], timeout_s: float, logdir: Path, *, poll_s: float = 0.1
) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        dead = [p for p in procs if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            tails = [path.read_text(errors="replace")[-600:] for path in sorted(logdir.glob("*.log"))]
            what = f"{len(dead)} worker(s) exited" if dead else f"not done after {timeout_s:.0f}s"
            raise RuntimeError(f"multi-host crawl: {what}; worker logs: {tails}")
        time.sleep(poll_s)


def _stop(procs: list[subprocess.Popen[bytes]], grace_s: float = 15.0) -> None:
    """SIGTERM each worker (it finishes or releases its pages), SIGKILL what is left after ``grace_s``."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
