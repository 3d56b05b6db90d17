"""The worker's event dispatcher and its three subscribers (pure: no database, no worker)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any, get_args

from book_assets.crawl.events import (
    Adaptive,
    Claimed,
    Completed,
    Ended,
    Event,
    Events,
    Failed,
    FetchEnded,
    Handled,
    IntervalSet,
    LeaseGone,
    MetricsRecorder,
    Parsed,
    Released,
    StageEntered,
    Started,
    StatsRecorder,
    Stopped,
    Tick,
    TraceRecorder,
    WaitedForSlot,
    subscribe_worker,
)
from book_assets.crawl.stats import PageCost, WorkerStats
from book_assets.observe.metrics import FetcherCounters, StatsCounters, WorkerMetrics
from book_assets.observe.tracing import Outcome, Stage, TaskTraces
from book_assets.queue import FailOutcome, Task
from book_assets.scraper.errors import ErrorKind

TASK = Task(
    id=7,
    task_type="detail",
    payload={"url": "http://books.local/a.html"},
    priority=0,
    domain="books.local",
    group="Travel",
    attempt=1,
    max_attempts=3,
    lease_token=1,
    lease_expires_at=datetime(2026, 1, 1, tzinfo=UTC),
    slot_at=None,
)


class _Calls:
    """Every call of a sink's method, by name and arguments."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []


class _Metrics(WorkerMetrics, _Calls):
    def fetched(self, task_type: str, status: int | None, seconds: float, body_bytes: int = 0) -> None:
        self.calls.append(("fetched", task_type, status, seconds, body_bytes))

    def waited(self, domain: str, seconds: float) -> None:
        self.calls.append(("waited", domain, seconds))

    def handled(self, task_type: str, seconds: float) -> None:
        self.calls.append(("handled", task_type, seconds))

    def completed(self, task_type: str, store_s: float) -> None:
        self.calls.append(("completed", task_type, store_s))

    def failed(self, task_type: str, kind: str, outcome: str) -> None:
        self.calls.append(("failed", task_type, kind, outcome))

    def sample(self, in_flight: int, stats: StatsCounters, fetchers: FetcherCounters, *, force: bool = False) -> None:
        self.calls.append(("sample", in_flight, force))


class _Traces(TaskTraces, _Calls):
    def begin(self, task: Task, claimed_at: float | None) -> None:
        self.calls.append(("begin", task.id, claimed_at))

    def stage(self, task: Task, stage: Stage) -> None:
        self.calls.append(("stage", task.id, stage))

    def failed(self, task: Task, kind: ErrorKind, outcome: FailOutcome) -> None:
        self.calls.append(("failed", task.id, kind, outcome))

    def end(self, task: Task, outcome: Outcome) -> None:
        self.calls.append(("end", task.id, outcome))

    def flush(self) -> None:
        self.calls.append(("flush",))


class _Fetchers:
    browsers = 0

    def fetcher_stats(self) -> Counter[str]:
        return Counter()


def _stopped() -> Stopped:
    return Stopped(
        concurrency=[2, 4],
        fetcher=Counter(requests=5),
        browsers=1,
        elapsed_s=3.0,
        cpu_s=1.5,
        children_cpu_s=0.75,
        peak_rss_mb=80,
    )


#: One event of each kind a task's failure and its neighbours bring, in a worker's order.
A_FAILED_TASK: list[Event] = [
    Started(TASK, 1.0),
    StageEntered(TASK, Stage.POLITENESS_WAIT),
    WaitedForSlot(TASK, 0.25),
    StageEntered(TASK, Stage.FETCH),
    FetchEnded(TASK, 503, 0.1),
    Failed(TASK, ErrorKind.HTTP_5XX, FailOutcome.RETRY),
    Ended(TASK, Outcome.COMPLETED),
]


def _subscribed() -> tuple[Events, WorkerStats, _Metrics, _Traces]:
    events, stats, metrics, traces = Events(), WorkerStats(), _Metrics(), _Traces()
    StatsRecorder(stats).subscribe(events)
    MetricsRecorder(metrics, stats, _Fetchers()).subscribe(events)
    TraceRecorder(traces).subscribe(events)
    return events, stats, metrics, traces


def test_a_worker_subscribes_its_stats_and_only_the_metrics_and_traces_that_record() -> None:
    off, on = Events(), Events()
    stats, metrics, traces = WorkerStats(), _Metrics(), _Traces()
    subscribe_worker(off, WorkerStats(), WorkerMetrics(), TaskTraces(), _Fetchers())
    subscribe_worker(on, stats, metrics, traces, _Fetchers())
    assert off._receivers.keys() == {
        Claimed,
        Failed,
        LeaseGone,
        IntervalSet,
        Adaptive,
        FetchEnded,
        Parsed,
        Ended,
        Released,
        Stopped,
    }
    on.emit(Failed(TASK, ErrorKind.TIMEOUT, FailOutcome.DEAD))
    assert stats.errors == {"timeout": 1} and len(metrics.calls) == len(traces.calls) == 1


def test_an_event_reaches_the_receivers_of_its_class_once_each_in_the_order_they_connected() -> None:
    events, heard = Events(), list[tuple[str, Event]]()
    events.connect(Failed, lambda e: heard.append(("first", e)))
    events.connect(Completed, lambda e: heard.append(("completed", e)))
    events.connect(Failed, lambda e: heard.append(("second", e)))
    failure = Failed(TASK, ErrorKind.TIMEOUT, FailOutcome.DEAD)
    events.emit(failure)
    assert heard == [("first", failure), ("second", failure)]


def test_an_event_nobody_subscribed_to_is_dropped() -> None:
    events = Events()
    events.emit(Released(3))  # nothing connected: nothing happens, nothing raises


def test_every_event_is_a_distinct_immutable_class() -> None:
    kinds = get_args(Event)
    assert len(set(kinds)) == len(kinds) >= 15
    assert all(issubclass(kind, tuple) for kind in kinds)  # named tuples: fields cannot be reassigned


def test_a_failure_is_recorded_once_by_the_stats_once_by_the_metrics_and_once_by_the_traces() -> None:
    events, stats, metrics, traces = _subscribed()
    for event in A_FAILED_TASK:
        events.emit(event)
    assert stats.errors == {"http_5xx": 1}
    assert [c for c in metrics.calls if c[0] == "failed"] == [("failed", "detail", ErrorKind.HTTP_5XX, "retry")]
    assert [c for c in traces.calls if c[0] == "failed"] == [("failed", 7, ErrorKind.HTTP_5XX, FailOutcome.RETRY)]


def test_each_event_becomes_the_calls_its_subscribers_made_before_there_were_events() -> None:
    events, stats, metrics, traces = _subscribed()
    for event in A_FAILED_TASK:
        events.emit(event)
    events.emit(Handled(TASK, 0.5))
    events.emit(Completed(TASK, 0.01))
    events.emit(Tick(3))
    events.emit(Tick(0, idle=True))
    assert metrics.calls == [
        ("waited", "books.local", 0.25),
        ("fetched", "detail", 503, 0.1, 0),
        ("failed", "detail", ErrorKind.HTTP_5XX, "retry"),
        ("handled", "detail", 0.5),
        ("completed", "detail", 0.01),
        ("sample", 3, False),
        ("sample", 0, True),
    ]
    assert traces.calls == [
        ("begin", 7, 1.0),
        ("stage", 7, Stage.POLITENESS_WAIT),
        ("stage", 7, Stage.FETCH),
        ("failed", 7, ErrorKind.HTTP_5XX, FailOutcome.RETRY),
        ("end", 7, Outcome.COMPLETED),
    ]  # a tick is the metrics' sample; task spans go to the SDK as each task ends
    # Stages and waits are not the stats'; the fetch's cost is (a fetch that failed costs as much).
    assert stats == WorkerStats(
        errors=Counter(http_5xx=1), costs={("detail", "Travel", "http"): PageCost(fetches=1, fetch_s=0.1)}
    )


def test_the_stats_keep_what_only_the_worker_knows() -> None:
    events, stats, _metrics, traces = _subscribed()
    events.emit(Claimed(4, 0.01234))
    events.emit(Claimed(0, 0.0123))
    events.emit(LeaseGone(TASK))
    events.emit(IntervalSet("books.local", 0.8))
    events.emit(IntervalSet("books.local", 0.3))
    events.emit(Released(2))
    events.emit(Adaptive(TASK, rendered=True, plain=True, checked=True, disagreed=True))
    events.emit(Adaptive(TASK, plain=True))
    events.emit(FetchEnded(TASK, 200, 0.2, 5000, browser=True))
    events.emit(Parsed(TASK, cpu_s=0.004))  # the parse of the page the browser fetched
    events.emit(_stopped())
    assert stats.claim_ms == {12.0: 2} and stats.lost_leases == 1 and stats.max_interval_s == 0.8
    assert stats.released == 2 and stats.concurrency == [2, 4] and stats.fetcher == {"requests": 5}
    assert (stats.browsers, stats.elapsed_s, stats.cpu_s, stats.peak_rss_mb) == (1, 3.0, 1.5, 80)
    assert stats.child_cpu_s == 0.75
    assert stats.costs == {
        ("detail", "Travel", "browser"): PageCost(fetches=1, bytes=5000, fetch_s=0.2, parse_cpu_s=0.004)
    }
    assert (stats.rendered, stats.plain, stats.checked, stats.disagreements) == (1, 2, 1, 1)
    assert traces.calls == [("flush",)]  # a stopped worker's spans go out
