"""A worker's events: what happens to its tasks and to itself, as typed values, and the one dispatcher the
worker (and its fetch strategy, :mod:`book_assets.crawl.fetch_modes`) emits each of them into, once.

What records an event subscribes to it (as Scrapy's stats collector and extensions connect to its signals):
the worker's own stats (:class:`StatsRecorder`: only what a worker alone knows, :mod:`book_assets.crawl.stats`),
its Prometheus metrics (:class:`MetricsRecorder`, :func:`~book_assets.observe.metrics.worker_metrics`) and its
task spans (:class:`TraceRecorder`, :func:`~book_assets.observe.tracing.task_traces`). A new sink is one more
subscriber; the worker does not change. What the database records in the transactions the worker runs (pages
completed, books stored, tasks retried or failed for good) is read from the database, never counted here
(:class:`~book_assets.crawl.pipeline.RunFigures`, :class:`~book_assets.crawl.stats.WorkerFigures`).

Events are named tuples: immutable and typed, and made in about half the time of a frozen dataclass, which
matters at a dozen events a page. :meth:`Events.emit` looks the event's class up in a dictionary and calls the
bound methods subscribed to it: nothing is allocated but the event. Receivers run on the thread that emits
(:class:`Claiming` and :class:`Claimed` come from the worker's database thread, the rest from its event loop),
and must not raise: an event is a report, never a reason to stop a task.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from book_assets.observe.metrics import WorkerMetrics
from book_assets.observe.tracing import Outcome, Stage, TaskTraces

if TYPE_CHECKING:
    from book_assets.crawl.stats import PageCost, WorkerStats
    from book_assets.db.connection import Database
    from book_assets.observe.metrics import FetcherCounters
    from book_assets.queue import FailOutcome, Task
    from book_assets.scraper.errors import ErrorKind

# --------------------------------------------------------------------------- the vocabulary


class Claiming(NamedTuple):
    """A claim is about to be sent, on the worker's database thread (``db`` is its connection)."""

    db: Database


class Claimed(NamedTuple):
    """A claim answered with ``tasks`` tasks, ``seconds`` after it was sent."""

    tasks: int
    seconds: float


class Started(NamedTuple):
    """The worker starts on ``task``, claimed by a statement sent at ``claimed_at`` (``time.monotonic()``)."""

    task: Task
    claimed_at: float | None


class StageEntered(NamedTuple):
    """``task`` enters ``stage`` (the previous one ends)."""

    task: Task
    stage: Stage


class WaitedForSlot(NamedTuple):
    """``task``'s politeness slot came after ``seconds`` of waiting."""

    task: Task
    seconds: float


class FetchEnded(NamedTuple):
    """``task``'s fetch ended after ``seconds``: with a response of ``status`` (None: none came) and a body of
    ``body_bytes``, by the ``browser`` or over plain HTTP; ``kind``: why it failed (None: it succeeded)."""

    task: Task
    status: int | None
    seconds: float
    body_bytes: int = 0
    kind: ErrorKind | None = None
    browser: bool = False


class IntervalSet(NamedTuple):
    """AutoThrottle (or a soft block's back-off) set ``domain``'s interval to ``interval_s`` from this worker's
    observation."""

    domain: str
    interval_s: float


class Adaptive(NamedTuple):
    """Adaptive mode got ``task``'s page: ``rendered`` in the browser, fetched ``plain``, the two ``checked``
    against each other, and whether their records ``disagreed`` (or the plain page parsed only once rendered)."""

    task: Task
    rendered: bool = False
    plain: bool = False
    checked: bool = False
    disagreed: bool = False


class Parsed(NamedTuple):
    """``task``'s page was parsed in ``cpu_s`` of the worker thread's CPU."""

    task: Task
    cpu_s: float


class Handled(NamedTuple):
    """``task``'s page was archived, parsed and stored in ``seconds``."""

    task: Task
    seconds: float


class Completed(NamedTuple):
    """``task`` completed; its completing transaction took ``store_s``."""

    task: Task
    store_s: float


class Failed(NamedTuple):
    """The queue recorded ``task``'s failure as ``kind``; ``outcome`` is what it did (retry or dead)."""

    task: Task
    kind: ErrorKind
    outcome: FailOutcome


class LeaseGone(NamedTuple):
    """Another worker holds ``task`` now (its lease was gone): this worker abandons it."""

    task: Task


class Ended(NamedTuple):
    """``task`` leaves the worker, as ``outcome`` unless a failure of it was recorded."""

    task: Task
    outcome: Outcome


class Released(NamedTuple):
    """At shutdown, ``tasks`` unfinished tasks were handed back to the queue."""

    tasks: int


class Tick(NamedTuple):
    """A turn of the worker's loop with ``in_flight`` pages in flight. ``idle``: none are, and none are coming
    for now (the worker is about to wait for work, or has stopped working): what was recorded goes out."""

    in_flight: int
    idle: bool = False


class Stopped(NamedTuple):
    """The worker ended: what it measured of itself."""

    #: The autoscaled pages in flight: where it started and every value it moved to.
    concurrency: list[int]
    #: Its fetchers' counters, and the browsers it started.
    fetcher: Counter[str]
    browsers: int
    elapsed_s: float
    cpu_s: float
    #: The CPU of the processes it started and saw end (Chromium and Playwright's driver, in browser modes).
    children_cpu_s: float
    peak_rss_mb: float


#: Every event a worker emits.
Event = (
    Claiming
    | Claimed
    | Started
    | StageEntered
    | WaitedForSlot
    | FetchEnded
    | IntervalSet
    | Adaptive
    | Parsed
    | Handled
    | Completed
    | Failed
    | LeaseGone
    | Ended
    | Released
    | Tick
    | Stopped
)
E = TypeVar("E", bound=tuple[Any, ...])

# --------------------------------------------------------------------------- the dispatcher


class Events:
    """The worker's one dispatcher: each event class and the receivers subscribed to it, in order."""

    __slots__ = ("_receivers",)

    def __init__(self) -> None:
        self._receivers: dict[type, tuple[Callable[[Any], None], ...]] = {}

    def connect(self, kind: type[E], receiver: Callable[[E], None]) -> None:
        """Call ``receiver`` with every event of class ``kind`` from now on, after those connected before."""
        self._receivers[kind] = (*self._receivers.get(kind, ()), receiver)

    def emit(self, event: Event) -> None:
        """Hand ``event`` to each of its receivers."""
        for receiver in self._receivers.get(type(event), ()):
            receiver(event)


# --------------------------------------------------------------------------- the worker's subscribers


def subscribe_worker(
    events: Events, stats: WorkerStats, metrics: WorkerMetrics, traces: TaskTraces, fetchers: FetcherCounters
) -> None:
    """Subscribe a worker's stats, then its metrics and its task spans, to ``events``. Metrics or traces that
    are off are the interface's own classes, whose hooks do nothing: they are left out, so an event only they
    would hear costs no call."""
    StatsRecorder(stats).subscribe(events)
    if type(metrics) is not WorkerMetrics:
        MetricsRecorder(metrics, stats, fetchers).subscribe(events)
    if type(traces) is not TaskTraces:
        TraceRecorder(traces).subscribe(events)


def _category(task: Task) -> str | None:
    """The category a task's page cost goes to: a detail task's fairness group, or the category a listing page
    lists (its payload's), None for a page of no one category (the start page)."""
    category = task.group or task.payload.get("category")
    return str(category) if category else None


class StatsRecorder:
    """What only the worker knows, into its :class:`~book_assets.crawl.stats.WorkerStats`."""

    def __init__(self, stats: WorkerStats) -> None:
        self.stats = stats
        #: The cost row of each task in flight's last fetch, which its parse is part of.
        self._fetched: dict[int, PageCost] = {}

    def subscribe(self, events: Events) -> None:
        events.connect(Claimed, self.claimed)
        events.connect(Failed, self.failed)
        events.connect(LeaseGone, self.lease_gone)
        events.connect(IntervalSet, self.interval_set)
        events.connect(Adaptive, self.adaptive)
        events.connect(FetchEnded, self.fetched)
        events.connect(Parsed, self.parsed)
        events.connect(Ended, self.ended)
        events.connect(Released, self.released)
        events.connect(Stopped, self.stopped)

    def claimed(self, event: Claimed) -> None:
        self.stats.claim_ms[float(f"{1000 * event.seconds:.2g}")] += 1

    def failed(self, event: Failed) -> None:
        self.stats.errors[str(event.kind)] += 1

    def lease_gone(self, _event: LeaseGone) -> None:
        self.stats.lost_leases += 1

    def interval_set(self, event: IntervalSet) -> None:
        self.stats.max_interval_s = max(self.stats.max_interval_s, event.interval_s)

    def adaptive(self, event: Adaptive) -> None:
        s = self.stats
        s.rendered += event.rendered
        s.plain += event.plain
        s.checked += event.checked
        s.disagreements += event.disagreed

    def fetched(self, event: FetchEnded) -> None:
        cost = self.stats.cost_of(event.task.task_type, _category(event.task), browser=event.browser)
        cost.fetches += 1
        cost.bytes += event.body_bytes
        cost.fetch_s += event.seconds
        self._fetched[event.task.id] = cost

    def parsed(self, event: Parsed) -> None:
        task = event.task
        cost = self._fetched.get(task.id) or self.stats.cost_of(task.task_type, _category(task), browser=False)
        cost.parse_cpu_s += event.cpu_s

    def ended(self, event: Ended) -> None:
        self._fetched.pop(event.task.id, None)

    def released(self, event: Released) -> None:
        self.stats.released += event.tasks

    def stopped(self, event: Stopped) -> None:
        s = self.stats
        s.concurrency, s.fetcher, s.browsers = event.concurrency, event.fetcher, event.browsers
        s.elapsed_s, s.cpu_s, s.peak_rss_mb = event.elapsed_s, event.cpu_s, event.peak_rss_mb
        s.child_cpu_s = event.children_cpu_s


class MetricsRecorder:
    """The worker's Prometheus figures (:class:`~book_assets.observe.metrics.WorkerMetrics`); the counts it
    samples (lost leases, releases, the fetchers') are read from ``stats`` and ``fetchers``."""

    def __init__(self, metrics: WorkerMetrics, stats: WorkerStats, fetchers: FetcherCounters) -> None:
        self.metrics, self.stats, self.fetchers = metrics, stats, fetchers

    def subscribe(self, events: Events) -> None:
        events.connect(WaitedForSlot, self.waited)
        events.connect(FetchEnded, self.fetched)
        events.connect(Handled, self.handled)
        events.connect(Completed, self.completed)
        events.connect(Failed, self.failed)
        events.connect(Tick, self.tick)

    def waited(self, event: WaitedForSlot) -> None:
        self.metrics.waited(event.task.domain, event.seconds)

    def fetched(self, event: FetchEnded) -> None:
        self.metrics.fetched(event.task.task_type, event.status, event.seconds, event.body_bytes)

    def handled(self, event: Handled) -> None:
        self.metrics.handled(event.task.task_type, event.seconds)

    def completed(self, event: Completed) -> None:
        self.metrics.completed(event.task.task_type, event.store_s)

    def failed(self, event: Failed) -> None:
        self.metrics.failed(event.task.task_type, event.kind, event.outcome)

    def tick(self, event: Tick) -> None:
        self.metrics.sample(event.in_flight, self.stats, self.fetchers, force=event.idle)


class TraceRecorder:
    """The worker's task spans (:class:`~book_assets.observe.tracing.TaskTraces`)."""

    def __init__(self, traces: TaskTraces) -> None:
        self.traces = traces

    def subscribe(self, events: Events) -> None:
        events.connect(Claiming, self.claiming)
        events.connect(Started, self.started)
        events.connect(StageEntered, self.stage_entered)
        events.connect(FetchEnded, self.fetched)
        events.connect(Failed, self.failed)
        events.connect(Ended, self.ended)
        events.connect(Stopped, self.stopped)

    def claiming(self, event: Claiming) -> None:
        self.traces.watch(event.db)

    def started(self, event: Started) -> None:
        self.traces.begin(event.task, event.claimed_at)

    def stage_entered(self, event: StageEntered) -> None:
        self.traces.stage(event.task, event.stage)

    def fetched(self, event: FetchEnded) -> None:
        self.traces.fetched(event.task, event.status, event.seconds, event.kind)

    def failed(self, event: Failed) -> None:
        self.traces.failed(event.task, event.kind, event.outcome)

    def ended(self, event: Ended) -> None:
        self.traces.end(event.task, event.outcome)

    def stopped(self, _event: Stopped) -> None:
        self.traces.flush()
