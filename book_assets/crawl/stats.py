"""What only a worker process knows (its fetchers', adaptive mode's and autoscaling's counters, its claims'
latency, the leases it lost, its CPU and memory), and what the database says a set of workers did.

A worker records the first into :class:`WorkerStats` through its events
(:class:`~book_assets.crawl.events.StatsRecorder`). What the database records in the transactions the workers
run (pages completed, books stored, tasks retried or failed for good) is not counted again: it is read from
it, for a run (:class:`book_assets.crawl.pipeline.RunFigures`) or for the workers whose stats these are
(:class:`WorkerFigures`).
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from book_assets.crawl.config import DETAIL

if TYPE_CHECKING:
    from book_assets.queue import TaskQueue

#: A field's metadata key: how two workers' values of it combine (summed when absent).
MERGE = "merge"


def _first(mine: Any, theirs: Any) -> Any:
    return mine or theirs


def _ours(mine: Any, _theirs: Any) -> Any:
    return mine


def _earliest(mine: datetime | None, theirs: datetime | None) -> datetime | None:
    return min((t for t in (mine, theirs) if t is not None), default=None)


def _combined(rule: Callable[[Any, Any], Any]) -> dict[str, Callable[[Any, Any], Any]]:
    return {MERGE: rule}


@dataclass
class PageCost:
    """What a set of pages cost the workers that fetched them: only a worker knows it (the database keeps a page's body,
    not what its fetches took), so it is counted here, once, from the worker's events.

    Every fetch counts, retried and failed ones too (a page fetched three times cost three fetches), and a 304 counts
    with no bytes; a render the worker asks for after a page's served HTML did not parse (a page type's first pages,
    until its mode learns that it needs scripts) is not among them. ``parse_cpu_s`` is the CPU of parsing, measured on
    the worker's thread around each parse: the part of a worker's CPU that belongs to one page (the rest, its event
    loop, HTTP client and database calls, serve every page at once, and is the workers' ``cpu_s``; the browsers' CPU
    is their own processes', the workers' ``child_cpu_s``).
    """

    fetches: int = 0
    #: Body bytes received (after transfer decoding).
    bytes: int = 0
    #: Wall time of the fetches, summed (concurrent fetches overlap: the sum can exceed the run's elapsed time).
    fetch_s: float = 0.0
    parse_cpu_s: float = 0.0

    def add(self, other: PageCost) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


#: A cost row: the page type (listing, detail), the category (a detail task's fairness group, the category a
#: listing page lists; empty for the start page) and the fetch mode (``http`` or ``browser``).
CostKey = tuple[str, str, str]


def _add_costs(mine: dict[CostKey, PageCost], theirs: dict[CostKey, PageCost]) -> dict[CostKey, PageCost]:
    added = {key: PageCost(**vars(cost)) for key, cost in mine.items()}
    for key, cost in theirs.items():
        added.setdefault(key, PageCost()).add(cost)
    return added


@dataclass
class WorkerStats:
    """What only a worker knows of what it did; summed across workers by the pipeline (Scrapy-style stats).

    Every field declares how two workers' values combine (``metadata[MERGE]``; numbers, counters and lists are
    added when it says nothing), so :meth:`merge` lists no fields and a new counter needs no merge code.
    """

    worker_id: str = field(default="", metadata=_combined(_ours))
    #: The worker processes these stats are of, by id (a drain's lost workers among them: the database has
    #: their pages), and when the first of them started on the database's clock: what
    #: :class:`WorkerFigures` reads the database by.
    worker_ids: list[str] = field(default_factory=list)
    started_at: datetime | None = field(default=None, metadata=_combined(_earliest))
    #: Tasks handed back to the queue unfinished at shutdown: the database forgets a release (the task is
    #: pending again, its attempt uncounted), so only the worker knows.
    released: int = 0
    #: Tasks this worker abandoned because another worker took them over (its lease was gone): only the
    #: worker knows, the database sees the new holder.
    lost_leases: int = 0
    #: AutoThrottle: the highest interval this worker's observations set (seconds).
    max_interval_s: float = field(default=0.0, metadata=_combined(max))
    #: Adaptive mode: pages fetched in the browser / over plain HTTP / both ways and compared, and
    #: comparisons (or plain pages that only parsed once rendered) where the records differed.
    rendered: int = 0
    plain: int = 0
    checked: int = 0
    disagreements: int = 0
    #: Workers that started a browser (adaptive: the hosts' renderers, and workers that had to render).
    browsers: int = 0
    #: The autoscaled pages in flight: where the first worker started and every value it moved to.
    concurrency: list[int] = field(default_factory=list, metadata=_combined(_first))
    #: Every failure recorded, by error kind, retried ones included: the database keeps a task's last failure
    #: only (the kinds of those failed for good are the report's ``failed_by_reason``), so the kinds of the
    #: failures that were retried are known to the worker alone.
    errors: Counter[str] = field(default_factory=Counter)
    #: The fetchers' own counters (requests, bytes, browser restarts, ...).
    fetcher: Counter[str] = field(default_factory=Counter)
    elapsed_s: float = field(default=0.0, metadata=_combined(max))
    #: Worker processes that died without handing back their stats (their counters are missing above; the
    #: database has their pages).
    lost_workers: list[str] = field(default_factory=list)
    #: How long claims took, from the worker's call to its answer, as a histogram: milliseconds rounded to two
    #: significant digits -> claims. Bounded (a few hundred keys), so the stats a worker sends its supervisor
    #: stay small however long it runs (a list of every claim passed a pipe's buffer at 100,000 books).
    claim_ms: Counter[float] = field(default_factory=Counter)
    #: The worker process's CPU seconds and peak resident memory when it ended (a crawl's workers are processes
    #: of their own, forked from a server its parent cannot see the usage of).
    cpu_s: float = 0.0
    #: The CPU of the processes the workers started and saw end: in browser and adaptive mode the browsers
    #: (Chromium's processes and Playwright's driver); a worker that ran in its drain's process counts that
    #: process's other children too.
    child_cpu_s: float = 0.0
    peak_rss_mb: float = field(default=0.0, metadata=_combined(max))
    #: What the fetches cost, per page type, category and fetch mode (:class:`PageCost`).
    costs: dict[CostKey, PageCost] = field(default_factory=dict, metadata=_combined(_add_costs))

    def merge(self, other: WorkerStats) -> None:
        """Add ``other``'s figures to these, each field by its own rule."""
        for f in fields(self):
            rule = f.metadata.get(MERGE, operator.add)
            setattr(self, f.name, rule(getattr(self, f.name), getattr(other, f.name)))

    def cost_of(self, task_type: str, group: str | None, *, browser: bool) -> PageCost:
        """The cost row of a task of ``task_type`` in fairness ``group`` (a book's category), fetched by the
        ``browser`` or over plain HTTP."""
        return self.costs.setdefault((task_type, group or "", "browser" if browser else "http"), PageCost())


@dataclass(frozen=True)
class WorkerFigures:
    """What the workers of a :class:`WorkerStats` completed, read from the database: a completed task keeps
    the id of the worker that completed it (``host:pid`` unless the worker is given one, so two workers of
    one process need ids of their own). A drain's lost workers count (their ids are in the stats); the
    workers of a drain killed outright, which hands back no stats, do not."""

    pages: int = 0
    #: Book pages completed: each stored its book (new, changed or unchanged).
    books: int = 0

    @classmethod
    def read(cls, queue: TaskQueue, stats: WorkerStats, detail_kind: str = DETAIL) -> WorkerFigures:
        """The figures of ``stats``' workers; ``books`` counts the pages of ``detail_kind`` (the crawl's site's)."""
        if stats.started_at is None or not stats.worker_ids:
            return cls()
        done = queue.completed_by(stats.worker_ids, stats.started_at)
        return cls(pages=sum(done.values()), books=done.get(detail_kind, 0))
