"""Prometheus metrics of a crawl: what each worker process does, and what the queue holds.

Two endpoints, both bound to ``metrics_host`` (127.0.0.1 unless told otherwise):

* **The workers'** (``metrics_port``, off by default): served by the process that runs a drain (the CLI's
  ``crawl``, ``work``, a Dagster drain step) while it runs. Its worker processes are forked from a fork server,
  so each writes its figures to memory-mapped files in the drain process's folder (prometheus_client's
  multiprocess mode, ``PROMETHEUS_MULTIPROC_DIR``) and the drain's endpoint sums them at each scrape
  (``MultiProcessCollector``; ``mark_process_dead`` for a dead worker's live gauges): one target per drain,
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
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Protocol

from book_assets.scraper.errors import ErrorKind

if TYPE_CHECKING:  # imported where metrics are on: prometheus_client costs a crawl's start ~0.15 s
    import psutil
    from prometheus_client.metrics_core import Metric

log = logging.getLogger(__name__)

PREFIX: Final = "book_pipeline"
#: How often a worker samples its gauges (pages in flight, memory) and the counters kept elsewhere (its stats',
#: its fetchers'); also before it waits for work and at its end. What it counts and observes is written as it comes.
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
    "last_successful_crawl_timestamp_seconds": (
        "When the latest crawl that decided its removals ended (Unix time); absent until one has.",
        (),
    ),
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
    """A worker's metrics: prometheus_client's counters, histograms and gauges, each value written to the
    drain's multiprocess folder as it comes (prometheus_client's multiprocess mode)."""

    def __init__(self, mode: str) -> None:
        import prometheus_client
        import psutil

        self.mode = mode
        self._counters: dict[str, prometheus_client.Counter] = {}
        self._histograms: dict[str, prometheus_client.Histogram] = {}
        self._gauges: dict[str, prometheus_client.Gauge] = {}
        for name, (kind, doc, labels) in WORKER_METRICS.items():
            full = f"{PREFIX}_{name}"
            if kind == "counter":
                self._counters[name] = prometheus_client.Counter(full, doc, labels, registry=None)
            elif kind == "histogram":
                buckets = {"fetch": FETCH_BUCKETS, "polit": WAIT_BUCKETS}.get(name[:5], STORE_BUCKETS)
                self._histograms[name] = prometheus_client.Histogram(full, doc, labels, buckets=buckets, registry=None)
            else:  # per process: summed over the live workers, or one series each (pid label)
                per_pid = name.endswith("memory_bytes")
                self._gauges[name] = prometheus_client.Gauge(
                    full, doc, labels, registry=None, multiprocess_mode="liveall" if per_pid else "livesum"
                )
        self._counted: dict[tuple[str, ...], prometheus_client.Counter] = {}
        self._observed: dict[tuple[str, ...], prometheus_client.Histogram] = {}
        self._gauges["workers"].set(1)
        self._next_sample = 0.0
        self._synced: dict[str, int] = {}  # counters kept elsewhere: the value already added
        self._process = psutil.Process()

    def _count(self, name: str, *labels: str, amount: float = 1) -> None:
        """Add ``amount`` to counter ``name``'s series of ``labels`` (looked up once: ``labels()`` takes a lock)."""
        series = self._counted.get((name, *labels))
        if series is None:
            series = self._counted[(name, *labels)] = self._counters[name].labels(*labels)
        series.inc(amount)

    def _observe(self, name: str, *labels: str, value: float) -> None:
        """Observe ``value`` in histogram ``name``'s series of ``labels``."""
        series = self._observed.get((name, *labels))
        if series is None:
            series = self._observed[(name, *labels)] = self._histograms[name].labels(*labels)
        series.observe(value)

    def fetched(self, task_type: str, status: int | None, seconds: float, body_bytes: int = 0) -> None:
        self._count("fetches", self.mode, task_type, status_class(status))
        self._observe("fetch_duration_seconds", self.mode, task_type, value=seconds)
        if body_bytes:
            self._count("response_bytes", self.mode, task_type, amount=body_bytes)

    def waited(self, domain: str, seconds: float) -> None:
        self._observe("politeness_wait_seconds", domain, value=seconds)

    def handled(self, task_type: str, seconds: float) -> None:
        self._observe("handle_duration_seconds", self.mode, task_type, value=seconds)

    def completed(self, task_type: str, store_s: float) -> None:
        self._count("tasks_completed", self.mode, task_type)
        self._observe("store_duration_seconds", task_type, value=store_s)

    def failed(self, task_type: str, kind: str, outcome: str) -> None:
        self._count("task_failures", self.mode, task_type, str(kind), str(outcome))

    def sample(self, in_flight: int, stats: StatsCounters, fetchers: FetcherCounters, *, force: bool = False) -> None:
        now = time.monotonic()
        if now < self._next_sample and not force:
            return
        self._next_sample = now + SAMPLE_EVERY_S
        self._gauges["pages_in_flight"].set(in_flight)
        counters = fetchers.fetcher_stats()
        self._sync("lease_losses", stats.lost_leases)
        self._sync("tasks_released", stats.released)
        self._sync("browser_starts", fetchers.browsers + counters.get("relaunches", 0))
        self._sync("browser_crashes", counters.get("crashes", 0))
        self._gauges["worker_resident_memory_bytes"].set(self._process.memory_info().rss)
        if fetchers.browsers:
            self._gauges["worker_browser_resident_memory_bytes"].set(_children_rss(self._process))

    def _sync(self, name: str, value: int) -> None:
        """Add what counter ``name``'s source (a count kept by the worker or its fetchers) gained since last time."""
        gained = value - self._synced.get(name, 0)
        if gained > 0:
            self._counters[name].inc(gained)
            self._synced[name] = value


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
_folder: str | None = None  # the multiprocess folder this process made for its drains (it serves their metrics)
_directory: str | None = None  # the multiprocess folder this process writes to (it joined a drain's)
_recording: _Recording | None = None
_endpoint: WorkerEndpoint | None = None


def _drain_folder() -> str:
    """This process's multiprocess folder for the drains it runs, made on first use, with
    ``PROMETHEUS_MULTIPROC_DIR`` naming it from then on: prometheus_client imported after that (in this
    process, in the fork server started after it) writes each value to the folder, as its multiprocess mode
    asks of every process that records."""
    global _folder
    with _lock:
        if _folder is None:
            if "prometheus_client" in sys.modules and _ENV not in os.environ:
                log.warning(
                    "prometheus_client was imported before metrics_port was set: this process's own worker "
                    "records nothing (its forked workers do); set %s before the process starts",
                    _ENV,
                )
            _folder = tempfile.mkdtemp(prefix="book-pipeline-metrics-")
            os.environ[_ENV] = _folder
        return _folder


def preload(port: int | None) -> tuple[str, ...]:
    """What the drain's fork server imports for its workers' metrics, when they are on (``metrics_port``):
    prometheus_client and psutil, about 0.08 s that each worker would otherwise spend importing. The drain's
    folder is made first, so the fork server starts with ``PROMETHEUS_MULTIPROC_DIR`` set."""
    if port is None:
        return ()
    _drain_folder()
    return ("prometheus_client", "prometheus_client.multiprocess", "psutil")


def join(directory: str | None) -> None:
    """Write this process's worker metrics to ``directory`` (a drain's folder; None: record nothing), named by
    ``PROMETHEUS_MULTIPROC_DIR`` before the process makes its first metric."""
    global _directory, _recording
    if directory is not None:
        os.environ[_ENV] = directory
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
        self.path = _drain_folder()  # before prometheus_client is imported here
        import prometheus_client
        from prometheus_client.registry import CollectorRegistry

        self.live = _LiveWorkers(self.path)
        registry = CollectorRegistry()
        registry.register(self.live)
        self.final_scrape_s = final_scrape_s
        self.server, self._thread = prometheus_client.start_http_server(port, addr=host, registry=registry)
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


def serve_workers(host: str, port: int | None, final_scrape_s: float) -> WorkerEndpoint | None:
    """Serve this process's (and its workers') metrics on ``host:port`` until it exits; None when ``port`` is
    None (metrics off). Started once per process: a crawl's later drains reuse it, so its counters run on."""
    global _endpoint
    if port is None:
        return None
    if _endpoint is None:
        try:
            endpoint = WorkerEndpoint(host, port, final_scrape_s)
        except OSError as exc:  # metrics are never a reason to stop a crawl
            log.warning("metrics off: cannot serve on %s:%s (metrics_port): %s", host, port, exc.strerror or exc)
            _drop_folder()
            return None
        with _lock:
            _endpoint = endpoint
        atexit.register(stop_serving)
    return _endpoint


def _drop_folder() -> None:
    """Remove this process's drain folder; the process records nothing from here on."""
    global _folder, _directory, _recording
    with _lock:
        folder, _folder = _folder, None
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
        if os.environ.get(_ENV) == folder:
            del os.environ[_ENV]
    _directory, _recording = None, None


def stop_serving(*, final_scrape: bool = True) -> None:
    """Close this process's workers' endpoint, if it serves one, and remove its folder (at exit; tests).

    A process writes its own values to one folder in its life (prometheus_client opens a process's files
    once), so after it serves again only the workers it starts from then on reach the new endpoint."""
    global _endpoint
    with _lock:
        endpoint, _endpoint = _endpoint, None
    if endpoint is not None:
        endpoint.close(final_scrape=final_scrape)
    _drop_folder()


# --------------------------------------------------------------------------- the queue's exporter


class QueueReader(Protocol):
    """What the exporter reads: :meth:`book_assets.queue.TaskQueue.gauges`."""

    def gauges(self) -> Any: ...


#: When the latest successful crawl ended (:func:`book_assets.store.lifecycle.last_successful_crawl`).
LastSuccess = Callable[[], "datetime | None"]


@dataclass(frozen=True)
class _Read:
    """One read of the exporter: the queue's gauges and when the latest successful crawl ended."""

    gauges: Any
    last_success: datetime | None


class _Reading:
    """A read under way on a daemon thread of its own (a read hung on a frozen database never holds the
    process's exit), and what it gave: its figures or its error."""

    def __init__(self, read: Callable[[], _Read]) -> None:
        self._read = read
        self._done = threading.Event()
        self._result: _Read | None = None
        self._error: BaseException | None = None
        threading.Thread(target=self._run, name="queue-read", daemon=True).start()

    def _run(self) -> None:
        try:
            self._result = self._read()
        except BaseException as exc:  # handed to every scrape that waits for this read
            self._error = exc
        finally:
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def result(self, timeout: float) -> _Read:
        """The figures, waiting at most ``timeout``; raises the read's error, or TimeoutError."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"no answer from the database within {timeout} s")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


class QueueCollector:
    """The queue's figures, read from PostgreSQL at each scrape (one transaction), answered within
    ``answer_within_s`` whatever the database does: a read that fails or takes longer gives
    ``book_pipeline_queue_up 0`` and nothing else, never a failed or timed-out scrape.

    The read runs on a thread of its own, one at a time (the queue has one connection). A scrape that comes
    while a read is under way waits for that read's figures, within its own bound, rather than for a lock: two
    Prometheus replicas scraping together both get the figures, and a read hung on a frozen database holds no
    scrape beyond its bound. The queue's database is opened with no reconnect loop and a short connect
    timeout (``book-pipeline metrics``): a database that is down fails the read at once, and the next scrape
    reads again.
    """

    def __init__(self, queue: QueueReader, *, answer_within_s: float, last_success: LastSuccess | None = None) -> None:
        self.queue = queue
        self.last_success = last_success
        self.answer_within_s = answer_within_s
        self._lock = threading.Lock()  # held only to start a read or join the one under way
        self._reading: _Reading | None = None

    def _read(self) -> _Reading:
        """The read under way, or a new one when none is."""
        with self._lock:
            if self._reading is None or self._reading.done():
                self._reading = _Reading(self._read_now)
            return self._reading

    def _read_now(self) -> _Read:
        return _Read(self.queue.gauges(), self.last_success() if self.last_success else None)

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        families = {
            name: GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=list(labels))
            for name, (doc, labels) in QUEUE_METRICS.items()
        }
        started = time.monotonic()
        try:
            read = self._read().result(timeout=self.answer_within_s)
        except Exception:  # an outage (an error, or no answer in time) is a figure of its own: up 0
            families["queue_up"].add_metric([], 0)
            yield families["queue_up"]
            return
        families["queue_up"].add_metric([], 1)
        gauges = read.gauges
        if read.last_success is not None:
            families["last_successful_crawl_timestamp_seconds"].add_metric([], read.last_success.timestamp())
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


def serve_queue(
    queue: QueueReader, host: str, port: int, *, answer_within_s: float, last_success: LastSuccess | None = None
) -> tuple[Any, Callable[[], None]]:
    """Serve the queue exporter on ``host:port`` (a thread), each scrape answered within ``answer_within_s``;
    returns the server and a function that stops it."""
    import prometheus_client
    from prometheus_client.registry import CollectorRegistry

    registry = CollectorRegistry()
    registry.register(QueueCollector(queue, answer_within_s=answer_within_s, last_success=last_success))
    server, _thread = prometheus_client.start_http_server(port, addr=host, registry=registry)

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return server, stop
