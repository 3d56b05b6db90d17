"""A real crawl's events, against the sandbox with faults: a subscriber added to the worker's dispatcher sees
every event once, each failure reaches the stats, the metrics and the traces once, and the crawl's numbers are
the database's.

The metrics and traces sinks here record the calls the worker's recorders make (as a user's own sink would);
that the Prometheus endpoint's figures of such a crawl equal the database's is held by
``book_assets_tests/observe/test_metrics_prometheus.py``, in an interpreter of its own (prometheus_client's
multiprocess folder is fixed when it is imported)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, get_args

from book_assets.crawl.config import DETAIL, make_queue
from book_assets.crawl.events import Completed, Ended, Event, Failed, MetricsRecorder, Started, TraceRecorder
from book_assets.crawl.pipeline import begin, finish
from book_assets.crawl.stats import WorkerFigures, WorkerStats
from book_assets.crawl.worker import Worker
from book_assets.db.connection import Database
from book_assets.observe.metrics import WorkerMetrics
from book_assets.observe.tracing import Outcome, TaskTraces
from book_assets.queue import FailOutcome, Task
from book_assets.sandbox import Faults
from book_assets.sandbox.catalogue import Catalogue
from book_assets.sandbox.testing import SandboxFactory
from book_assets.scraper.errors import ErrorKind
from book_assets_tests.crawl.conftest import sandbox_config

TRAVEL = sorted(p for p, b in Catalogue(seed=0, day=0).ground_truth().items() if b.category == "Travel")
#: Two Travel books missing for good, two answering 503 twice before they are served.
SCRIPT: dict[str, list[int | str]] = {**{p: [404] for p in TRAVEL[:2]}, **{p: [503, 503] for p in TRAVEL[2:4]}}


class Everything:
    """A subscriber to every event the worker emits."""

    def __init__(self) -> None:
        self.seen: list[Event] = []

    def subscribe(self, worker: Worker) -> None:
        for kind in get_args(Event):
            worker.events.connect(kind, self.seen.append)

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.seen if type(e) is kind]


class RecordedTraces(TaskTraces):
    """Task-span hooks that note the failures and ends they are given."""

    def __init__(self) -> None:
        self.failures: list[tuple[int, ErrorKind, FailOutcome]] = []
        self.ends: list[tuple[int, Outcome]] = []

    def failed(self, task: Task, kind: ErrorKind, outcome: FailOutcome) -> None:
        self.failures.append((task.id, kind, outcome))

    def end(self, task: Task, outcome: Outcome) -> None:
        self.ends.append((task.id, outcome))


class RecordedMetrics(WorkerMetrics):
    """Metrics hooks that count the failures and completions they are given, by series."""

    def __init__(self) -> None:
        self.failures: Counter[tuple[str, str, str]] = Counter()
        self.completions = 0

    def failed(self, task_type: str, kind: str, outcome: str) -> None:
        self.failures[(str(kind), str(outcome), task_type)] += 1

    def completed(self, task_type: str, store_s: float) -> None:
        self.completions += 1


class NoFetchers:
    """Fetchers that count nothing (what the recorder samples; these hooks record no samples)."""

    def fetcher_stats(self) -> dict[str, int]:
        return {}

    @property
    def browsers(self) -> int:
        return 0


def test_every_event_of_a_crawl_under_faults_is_seen_once_and_its_numbers_are_the_databases(
    db: Database, database_url: str, sandbox_factory: SandboxFactory
) -> None:
    site = sandbox_factory(faults=Faults(scripted=SCRIPT, retry_after_s=0))
    config = sandbox_config(site.url, categories=("Travel",), concurrency=4, max_attempts=3)
    run = begin(database_url, config)
    assert run.seeded
    worker, everything, traces = Worker(database_url, config), Everything(), RecordedTraces()
    everything.subscribe(worker)
    TraceRecorder(traces).subscribe(worker.events)
    recorded = RecordedMetrics()
    MetricsRecorder(recorded, WorkerStats(), NoFetchers()).subscribe(worker.events)
    stats = asyncio.run(worker.run())
    report = finish(database_url, run, stats)

    completed = everything.of(Completed)
    failed: list[Failed] = everything.of(Failed)
    dead = Counter(str(f.kind) for f in failed if f.outcome is FailOutcome.DEAD)
    retried = Counter(str(f.kind) for f in failed if f.outcome is FailOutcome.RETRY)
    assert dead == {"http_404": 2} and retried == {"http_5xx": 4}
    # The crawl's numbers, read from the database, are the events': each completion and failure once.
    assert report.run.pages == len(completed) == 1 + 1 + len(TRAVEL) - 2  # the start page, Travel's listing
    assert report.run.retries == sum(retried.values()) and report.failed_by_reason == dead
    assert report.run.books_found == len(TRAVEL) and report.run.books_stored == len(TRAVEL) - 2
    assert WorkerFigures.read(make_queue(db, config), stats) == WorkerFigures(
        pages=len(completed), books=len([c for c in completed if c.task.task_type == DETAIL])
    )
    # Each task attempt starts once and ends once.
    started, ended = everything.of(Started), everything.of(Ended)
    assert len(started) == len(ended) == len(completed) + len(failed)
    assert sorted(e.task.id for e in ended) == sorted(s.task.id for s in started)

    # Each failure reached each subscriber once: the stats, the traces and the metrics.
    assert stats.errors == dead + retried
    assert traces.failures == [(f.task.id, f.kind, f.outcome) for f in failed]
    assert traces.ends == [(e.task.id, e.outcome) for e in ended]
    by_series = Counter((str(f.kind), str(f.outcome), f.task.task_type) for f in failed)
    assert recorded.failures == by_series and recorded.completions == len(completed)
