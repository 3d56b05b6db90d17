"""Prometheus metrics of a crawl: what each worker process does, and what the queue holds.

Two endpoints, both bound to ``metrics_host`` (127.0.0.1 unless told otherwise):

* **The workers'** (``metrics_port``, off by default): served by the process that runs a drain (the CLI's
  ``crawl``, ``work``, a Dagster drain step) while it runs. Its worker processes are forked from a fork server,
  so each writes its figures to memory-mapped files in one folder per drain (prometheus_client's multiprocess
  mode, ``PROMETHEUS_MULTIPROC_DIR``) and the drain's endpoint sums them at each scrape: one target per drain,
  whatever its width, and a worker that dies keeps its counted pages (its live gauges are dropped at the next
  scrape). Every figure comes from an event the worker already handles (a fetch, a politeness wait, a
  completion, a failure) or from the counters it already keeps (``WorkerStats``, the fetchers' stats), so
  the metrics and the crawl's summary cannot disagree about what happened.
* **The queue's** (``book-pipeline metrics``, ``queue_metrics_port``): one exporter reads the queue's
  figures from PostgreSQL at each scrape (:meth:`~book_assets.queue.TaskQueue.gauges`, one transaction), so
  every host sees the same numbers; run one of them, not one per host.

Names follow Prometheus' conventions: base units (seconds, bytes), ``_total`` counters, ``_seconds``
histograms. Labels are bounded: mode, task type, domain (the crawl's allowed domains), error kind (an
:class:`~book_assets.scraper.errors.ErrorKind`), HTTP status class, outcome; never a URL, and no value
carries a secret (the database URL is never exported). :data:`WORKER_METRICS` and :data:`QUEUE_METRICS`
list every family; ``deploy/grafana`` and ``deploy/prometheus`` query only those (a test holds it).
"""

from __future__ import annotations

import atexit
import bisect
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

from book_assets.scraper.errors import ErrorKind

if TYPE_CHECKING:  # imported where metrics are on: prometheus_client costs a crawl's start ~0.15 s
    import psutil
    from prometheus_client.metrics_core import Metric

log = logging.getLogger(__name__)

PREFIX: Final = "book_pipeline"
#: How often a worker writes what it counted and observed since the last time to the drain's files, and samples
#: its gauges (pages in flight, memory) and its fetchers' counters; also before it waits for work and at its end.
SAMPLE_EVERY_S: Final = 1.0

FETCH_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
WAIT_BUCKETS: Final = (0.001, 0.01, 0.05, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0)
STORE_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)

#: Every family a worker exports: name (without the counter's ``_total``), type, help, labels.
WORKER_METRICS: Final[dict[str, tuple[str, str, tuple[str, ...]]]] = {
    "fetches": (
        "counter",
        "Pages fetched, by HTTP status class (none: no response).",
        ("mode", "task_type", "status_class"),
    ),
    "fetch_duration_seconds": ("histogram", "Wall time of a page's fetch, redirects included.", ("mode", "task_type")),
    "response_bytes": ("counter", "Bytes of the page bodies fetched.", ("mode", "task_type")),
    "politeness_wait_seconds": ("histogram", "Time a task waited for its domain's request slot.", ("domain",)),
    "handle_duration_seconds": ("histogram", "Parse, archive and store of a fetched page.", ("mode", "task_type")),
    "store_duration_seconds": ("histogram", "The transaction storing a page and completing its task.", ("task_type",)),
    "tasks_completed": ("counter", "Tasks this crawl completed.", ("mode", "task_type")),
    "task_failures": (
        "counter",
        "Recorded task failures, by kind and what they did (retry or dead).",
        ("mode", "task_type", "error_kind", "outcome"),
    ),
    "lease_losses": ("counter", "Tasks abandoned because another worker took them over (lease gone).", ()),
    "tasks_released": ("counter", "Tasks handed back to the queue unfinished at shutdown.", ()),
    "browser_starts": ("counter", "Chromium launches (the first one and every relaunch).", ()),
    "browser_crashes": ("counter", "Chromium processes that died under the worker.", ()),
    "pages_in_flight": ("gauge", "Pages being worked on now, all workers of the drain.", ()),
    "workers": ("gauge", "Worker processes running now.", ()),
    "worker_resident_memory_bytes": ("gauge", "Resident memory of each worker process (pid label).", ()),
    "worker_browser_resident_memory_bytes": ("gauge", "Resident memory of each worker's browser (pid label).", ()),
}

#: Every family the queue exporter serves: name, help, labels (all gauges: the queue's state now).
QUEUE_METRICS: Final[dict[str, tuple[str, tuple[str, ...]]]] = {
    "queue_up": ("1 when the exporter read the queue at this scrape, 0 when the database did not answer.", ()),
    "queue_tasks": ("Tasks in the queue by type, status and domain.", ("task_type", "status", "domain")),
    "queue_oldest_pending_age_seconds": ("Age of the oldest pending task (since created).", ("task_type", "domain")),
    "queue_overdue_seconds": ("How long the longest-waiting due pending task has been due.", ("task_type", "domain")),
    "queue_expired_leases": ("In-progress tasks whose lease ran out (worker gone).", ("task_type", "domain")),
    "queue_dead_letters": ("Failed (dead-lettered) tasks by error kind.", ("task_type", "error_kind")),
    "queue_budget_left": ("Tasks a budgeted group may still hand out.", ("task_type", "group")),
    "domain_interval_seconds": ("A domain's interval between request starts now.", ("domain",)),
    "domain_floor_interval_seconds": ("The interval an AutoThrottle or Crawl-delay cannot go under.", ("domain",)),
    "domain_next_slot_seconds": ("Seconds until the domain's next request slot (0: free now).", ("domain",)),
    "queue_scrape_duration_seconds": ("Time the exporter took to read the queue.", ()),
}


def exported_names() -> set[str]:
    """Every series name the two endpoints can serve (a histogram's ``_bucket``/``_sum``/``_count``, a
    counter's ``_total``): what a dashboard or an alert rule may query."""
    names = {f"{PREFIX}_{name}" for name in QUEUE_METRICS}
    for name, (kind, _help, _labels) in WORKER_METRICS.items():
        full = f"{PREFIX}_{name}"
        if kind == "counter":
            names.add(f"{full}_total")
        elif kind == "histogram":
            names.update(f"{full}{suffix}" for suffix in ("_bucket", "_sum", "_count"))
        else:
            names.add(full)
    return names


def status_class(status: int | None) -> str:
    """``2xx`` .. ``5xx`` for a response's status, ``none`` when no response came (reset, timeout, refused)."""
    return "none" if status is None else f"{status // 100}xx"


# --------------------------------------------------------------------------- what a worker records


class FetcherCounters(Protocol):
    """What a worker's fetch strategy tells about its fetchers (``FetchStrategy``)."""

    def fetcher_stats(self) -> Mapping[str, int]: ...

    @property
    def browsers(self) -> int: ...


class StatsCounters(Protocol):
    """The counters of ``WorkerStats`` the metrics follow."""

    lost_leases: int
    released: int


class WorkerMetrics:
    """A worker's metrics, recording nothing: what a worker holds when metrics are off (every call is a no-op)."""

    def fetched(self, task_type: str, status: int | None, seconds: float, body_bytes: int = 0) -> None:
        """A fetch ended: with a response of ``status`` (None: none came) after ``seconds``."""

    def waited(self, domain: str, seconds: float) -> None:
        """A task waited ``seconds`` for its domain's politeness slot."""

    def handled(self, task_type: str, seconds: float) -> None:
        """A fetched page was parsed, archived and stored in ``seconds``."""

    def completed(self, task_type: str, store_s: float) -> None:
        """A task completed; its completing transaction took ``store_s``."""

    def failed(self, task_type: str, kind: str, outcome: str) -> None:
        """A failure of ``kind`` was recorded; ``outcome`` is what it did to the task (retry or dead)."""

    def sample(self, in_flight: int, stats: StatsCounters, fetchers: FetcherCounters, *, force: bool = False) -> None:
        """Gauges and the counters kept elsewhere, at most every :data:`SAMPLE_EVERY_S` unless ``force``."""


class _Recording(WorkerMetrics):
    """A worker's metrics written to the drain's multiprocess folder (prometheus_client's mmap files).

    A page's figures are added to plain numbers of this object, and written to the files at most every
    :data:`SAMPLE_EVERY_S` (:meth:`sample`): each value prometheus_client writes takes a lock and a write into
    the mapped file, about ten a page, and written as they come they cost a crawling worker 40 µs a page, three
    times what they cost in a loop apart from a crawl. A worker killed outright loses what it recorded since
    its last sample (under a second); one that ends or goes idle writes everything first.
    """

    def __init__(self, mode: str) -> None:
        import prometheus_client
        import psutil

        self.mode = mode
        self._m: dict[str, Any] = {}
        for name, (kind, doc, labels) in WORKER_METRICS.items():
            full = f"{PREFIX}_{name}"
            if kind == "counter":
                self._m[name] = prometheus_client.Counter(full, doc, labels, registry=None)
            elif kind == "histogram":
                buckets = {"fetch": FETCH_BUCKETS, "polit": WAIT_BUCKETS}.get(name[:5], STORE_BUCKETS)
                self._m[name] = prometheus_client.Histogram(full, doc, labels, buckets=buckets, registry=None)
            else:  # per process: summed over the live workers, or one series each (pid label)
                per_pid = name.endswith("memory_bytes")
                self._m[name] = prometheus_client.Gauge(
                    full, doc, labels, registry=None, multiprocess_mode="liveall" if per_pid else "livesum"
                )
        self._series: dict[tuple[str, ...], Any] = {}
        self._counted: dict[tuple[str, ...], float] = {}  # counter series: added since the last sample
        self._observed: dict[tuple[str, ...], _Observed] = {}  # histogram series: observed since the last sample
        self._m["workers"].set(1)
        self._next_sample = 0.0
        self._synced: dict[str, int] = {}  # counters kept elsewhere: the value already added
        self._process = psutil.Process()

    def _at(self, name: str, *labels: str) -> Any:
        """The series of family ``name`` with ``labels``, looked up once (``labels()`` takes a lock each call)."""
        key = (name, *labels)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = self._m[name].labels(*labels)
        return series

    def fetched(self, task_type: str, status: int | None, seconds: float, body_bytes: int = 0) -> None:
        self._count(("fetches", self.mode, task_type, status_class(status)))
        self._observe(("fetch_duration_seconds", self.mode, task_type), seconds)
        if body_bytes:
            self._count(("response_bytes", self.mode, task_type), body_bytes)

    def waited(self, domain: str, seconds: float) -> None:
        self._observe(("politeness_wait_seconds", domain), seconds)

    def handled(self, task_type: str, seconds: float) -> None:
        self._observe(("handle_duration_seconds", self.mode, task_type), seconds)

    def completed(self, task_type: str, store_s: float) -> None:
        self._count(("tasks_completed", self.mode, task_type))
        self._observe(("store_duration_seconds", task_type), store_s)

    def failed(self, task_type: str, kind: str, outcome: str) -> None:
        self._count(("task_failures", self.mode, task_type, str(kind), str(outcome)))

    def _count(self, series: tuple[str, ...], amount: float = 1) -> None:
        self._counted[series] = self._counted.get(series, 0) + amount

    def _observe(self, series: tuple[str, ...], value: float) -> None:
        pending = self._observed.get(series)
        if pending is None:
            pending = self._observed[series] = _Observed(self._at(*series)._upper_bounds)
        pending.add(value)

    def sample(self, in_flight: int, stats: StatsCounters, fetchers: FetcherCounters, *, force: bool = False) -> None:
        now = time.monotonic()
        if now < self._next_sample and not force:
            return
        self._next_sample = now + SAMPLE_EVERY_S
        self._write_pending()
        self._m["pages_in_flight"].set(in_flight)
        counters = fetchers.fetcher_stats()
        self._sync("lease_losses", stats.lost_leases)
        self._sync("tasks_released", stats.released)
        self._sync("browser_starts", fetchers.browsers + counters.get("relaunches", 0))
        self._sync("browser_crashes", counters.get("crashes", 0))
        self._m["worker_resident_memory_bytes"].set(self._process.memory_info().rss)
        if fetchers.browsers:
            self._m["worker_browser_resident_memory_bytes"].set(_children_rss(self._process))

    def forget_pending(self) -> None:
        """Drop what was counted and observed since the last sample."""
        self._counted = {}
        self._observed = {}

    def _write_pending(self) -> None:
        """Add what was counted and observed since the last sample to the series' values in the drain's files."""
        counted, self._counted = self._counted, {}
        for series, amount in counted.items():
            self._at(*series).inc(amount)
        for series, pending in self._observed.items():
            if pending.n:
                pending.write_to(self._at(*series))

    def _sync(self, name: str, value: int) -> None:
        """Add what counter ``name``'s source (a count kept by the worker or its fetchers) gained since last time."""
        gained = value - self._synced.get(name, 0)
        if gained > 0:
            self._m[name].inc(gained)
            self._synced[name] = value


class _Observed:
    """A histogram series' observations since they were last written: counts per bucket, how many, their sum."""

    __slots__ = ("bounds", "counts", "n", "sum")

    def __init__(self, bounds: list[float]) -> None:
        self.bounds = bounds
        self.counts = [0] * len(bounds)
        self.n, self.sum = 0, 0.0

    def add(self, value: float) -> None:
        """As ``Histogram.observe``: the first bucket whose upper bound is at least ``value`` (the last is +Inf)."""
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.n += 1
        self.sum += value

    def write_to(self, histogram: Any) -> None:
        """Add these to ``histogram``'s values (a labelled child of a prometheus_client ``Histogram``: its
        ``_buckets`` and ``_sum``, what its ``observe`` adds to), then start again from nothing."""
        for value, count in zip(histogram._buckets, self.counts, strict=True):
            if count:
                value.inc(count)
        histogram._sum.inc(self.sum)
        self.counts = [0] * len(self.bounds)
        self.n, self.sum = 0, 0.0


def _children_rss(process: psutil.Process) -> int:
    import psutil

    total = 0
    for child in process.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.Error:  # gone since it was listed
            continue
    return total


# --------------------------------------------------------------------------- the process's part in a drain

_ENV: Final = "PROMETHEUS_MULTIPROC_DIR"
_NOTHING = WorkerMetrics()
_lock = threading.Lock()
_directory: str | None = None  # the multiprocess folder this process writes to (it joined a drain's)
_recording: _Recording | None = None
_endpoint: WorkerEndpoint | None = None
#: This process's id: read at import and again in a forked child. prometheus_client asks for the process id
#: before every value it writes (a fork means files of the child's own), and ``os.getpid`` is a system call.
_pid = os.getpid()


def _process_id() -> int:
    return _pid


def _forked() -> None:
    """In a forked child: its own process id for its files, and none of the parent's figures not yet written
    (the parent writes those)."""
    global _pid
    _pid = os.getpid()
    if _recording is not None:
        _recording.forget_pending()


os.register_at_fork(after_in_child=_forked)


def preload(port: int | None) -> tuple[str, ...]:
    """What the drain's fork server imports for its workers' metrics, when they are on (``metrics_port``):
    prometheus_client and psutil, about 0.08 s that each worker would otherwise spend importing."""
    return () if port is None else ("prometheus_client", "prometheus_client.multiprocess", "psutil")


def join(directory: str | None) -> None:
    """Write this process's worker metrics to ``directory`` (a drain's; None: record nothing).

    prometheus_client picks its value store when it is imported, from ``PROMETHEUS_MULTIPROC_DIR``; a worker
    forked from the fork server imported it before the folder existed, so the choice is made again here,
    before the first metric is made.
    """
    global _directory, _recording
    if directory is None or directory == _directory:
        return
    from prometheus_client import values

    os.environ[_ENV] = directory
    values.ValueClass = values.MultiProcessValue(_process_id)  # type: ignore[no-untyped-call]
    _directory, _recording = directory, None


def directory() -> str | None:
    """The multiprocess folder this process writes to (a drain passes it to the workers it starts)."""
    return _directory


def worker_metrics(mode: str) -> WorkerMetrics:
    """This process's worker metrics: recording when it joined a drain's folder, a no-op otherwise."""
    global _recording
    if _directory is None:
        return _NOTHING
    with _lock:
        if _recording is None or _recording.mode != mode:
            _recording = _Recording(mode)
        return _recording


_PID = re.compile(r"_(\d+)\.db$")


class _LiveWorkers:
    """The drain's workers' figures summed from their files; files of live gauges of dead workers are
    dropped first (a killed worker's memory is not memory in use), their counters stay."""

    def __init__(self, path: str) -> None:
        from prometheus_client.multiprocess import MultiProcessCollector

        self.path = path
        self._inner = MultiProcessCollector(None, path=path)  # type: ignore[no-untyped-call]
        self.scrapes = 0
        self.scraped = threading.Condition()

    def collect(self) -> Iterable[Metric]:
        import psutil
        from prometheus_client.multiprocess import mark_process_dead

        for name in os.listdir(self.path):
            found = _PID.search(name)
            if name.startswith("gauge_live") and found and not psutil.pid_exists(int(found.group(1))):
                mark_process_dead(int(found.group(1)), self.path)  # type: ignore[no-untyped-call]
        families = list(self._inner.collect())  # type: ignore[no-untyped-call]
        with self.scraped:
            self.scrapes += 1
            self.scraped.notify_all()
        return families


class WorkerEndpoint:
    """The workers' ``/metrics`` of one process (a drain's): started once, kept until the process ends."""

    def __init__(self, host: str, port: int, final_scrape_s: float) -> None:
        import prometheus_client
        from prometheus_client.registry import CollectorRegistry

        self.path = tempfile.mkdtemp(prefix="book-pipeline-metrics-")
        self.live = _LiveWorkers(self.path)
        registry = CollectorRegistry()
        registry.register(self.live)
        self.final_scrape_s = final_scrape_s
        try:
            self.server, self._thread = prometheus_client.start_http_server(port, addr=host, registry=registry)
        except OSError:
            shutil.rmtree(self.path, ignore_errors=True)
            raise
        self.port = int(self.server.server_port)
        join(self.path)

    def wait_for_scrape(self, after: int, timeout_s: float) -> bool:
        """Whether a scrape beyond the ``after``-th came within ``timeout_s``."""
        with self.live.scraped:
            return self.live.scraped.wait_for(lambda: self.live.scrapes > after, timeout=timeout_s)

    def close(self, *, final_scrape: bool = True) -> None:
        """Stop serving; with ``final_scrape``, after one more scrape (within ``final_scrape_s``) when anyone
        scraped before, so the last figures of a crawl that just ended are recorded."""
        if final_scrape and self.final_scrape_s > 0 and self.live.scrapes:
            self.wait_for_scrape(self.live.scrapes, self.final_scrape_s)
        self.server.shutdown()
        self.server.server_close()
        shutil.rmtree(self.path, ignore_errors=True)


def serve_workers(host: str, port: int | None, final_scrape_s: float) -> WorkerEndpoint | None:
    """Serve this process's (and its workers') metrics on ``host:port`` until it exits; None when ``port`` is
    None (metrics off). Started once per process: a crawl's later drains reuse it, so its counters run on."""
    global _endpoint
    if port is None:
        return None
    with _lock:
        if _endpoint is None:
            try:
                _endpoint = WorkerEndpoint(host, port, final_scrape_s)
            except OSError as exc:  # metrics are never a reason to stop a crawl
                log.warning("metrics off: cannot serve on %s:%s (metrics_port): %s", host, port, exc.strerror or exc)
                return None
            atexit.register(stop_serving)
        return _endpoint


def stop_serving(*, final_scrape: bool = True) -> None:
    """Close this process's workers' endpoint, if it serves one (at exit; tests)."""
    global _endpoint, _directory, _recording
    with _lock:
        endpoint, _endpoint = _endpoint, None
    if endpoint is not None:
        from prometheus_client import values

        endpoint.close(final_scrape=final_scrape)
        os.environ.pop(_ENV, None)
        values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]
        _directory, _recording = None, None


# --------------------------------------------------------------------------- the queue's exporter


class QueueReader(Protocol):
    """What the exporter reads: :meth:`book_assets.queue.TaskQueue.gauges`."""

    def gauges(self) -> Any: ...


class QueueCollector:
    """The queue's figures, read from PostgreSQL at each scrape (one transaction). A database that does not
    answer gives ``book_pipeline_queue_up 0`` and nothing else, never a failed scrape."""

    def __init__(self, queue: QueueReader) -> None:
        self.queue = queue
        self._reading = threading.Lock()  # scrapes come on threads of their own; the queue has one connection

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        families = {
            name: GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=list(labels))
            for name, (doc, labels) in QUEUE_METRICS.items()
        }
        started = time.monotonic()
        try:
            with self._reading:
                gauges = self.queue.gauges()
        except Exception:  # an outage is a figure of its own: up 0
            families["queue_up"].add_metric([], 0)
            yield families["queue_up"]
            return
        families["queue_up"].add_metric([], 1)
        for t in gauges.tasks:
            families["queue_tasks"].add_metric([t.task_type, t.status, t.domain], t.n)
            key = (t.task_type, t.domain)
            if t.oldest_pending_s is not None:
                families["queue_oldest_pending_age_seconds"].add_metric(list(key), t.oldest_pending_s)
                families["queue_overdue_seconds"].add_metric(list(key), t.overdue_s or 0.0)
            if t.status == "in_progress":
                families["queue_expired_leases"].add_metric(list(key), t.expired_leases)
        # Every kind of every task type, 0 included: a kind's first dead letters are then a change of its
        # series (what a rule's delta() sees), not the start of a new one.
        for task_type in sorted({t.task_type for t in gauges.tasks} | set(gauges.dead_letters)):
            by_kind = gauges.dead_letters.get(task_type, {})
            for kind in sorted({str(k) for k in ErrorKind} | set(by_kind)):
                families["queue_dead_letters"].add_metric([task_type, kind], by_kind.get(kind, 0))
        for (task_type, group), left in gauges.budget_left.items():
            families["queue_budget_left"].add_metric([task_type, group], left)
        for d in gauges.domains:
            families["domain_interval_seconds"].add_metric([d.domain], d.interval_s)
            families["domain_floor_interval_seconds"].add_metric([d.domain], d.floor_interval_s)
            families["domain_next_slot_seconds"].add_metric([d.domain], d.next_slot_in_s)
        families["queue_scrape_duration_seconds"].add_metric([], time.monotonic() - started)
        yield from families.values()


def serve_queue(queue: QueueReader, host: str, port: int) -> tuple[Any, Callable[[], None]]:
    """Serve the queue exporter on ``host:port`` (a thread); returns the server and a function that stops it."""
    import prometheus_client
    from prometheus_client.registry import CollectorRegistry

    registry = CollectorRegistry()
    registry.register(QueueCollector(queue))
    server, _thread = prometheus_client.start_http_server(port, addr=host, registry=registry)

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return server, stop
