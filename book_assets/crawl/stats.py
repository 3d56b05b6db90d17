"""What only a worker process knows: its fetchers', adaptive mode's and autoscaling's counters.

What the database knows (pages completed, listing pages, books found new or changed, tasks failed for good)
is read from it for a run (:class:`book_assets.crawl.pipeline.RunFigures`); these are the rest.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

#: A field's metadata key: how two workers' values of it combine (summed when absent).
MERGE = "merge"


def _first(mine: Any, theirs: Any) -> Any:
    return mine or theirs


def _ours(mine: Any, _theirs: Any) -> Any:
    return mine


def _combined(rule: Callable[[Any, Any], Any]) -> dict[str, Callable[[Any, Any], Any]]:
    return {MERGE: rule}


@dataclass
class WorkerStats:
    """What one worker did; summed across workers by the pipeline (Scrapy-style stats).

    Every field declares how two workers' values combine (``metadata[MERGE]``; numbers, counters and lists are
    added when it says nothing), so :meth:`merge` lists no fields and a new counter needs no merge code.
    """

    worker_id: str = field(default="", metadata=_combined(_ours))
    pages: int = 0
    books_found: int = 0
    books_new: int = 0
    books_changed: int = 0
    books_unchanged: int = 0
    #: Pages answered 304 Not Modified to a conditional request (books among them count as unchanged).
    not_modified: int = 0
    retried: int = 0
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
    errors: Counter[str] = field(default_factory=Counter)
    by_category: Counter[str] = field(default_factory=Counter)
    #: The fetchers' own counters (requests, bytes, browser restarts, ...).
    fetcher: Counter[str] = field(default_factory=Counter)
    elapsed_s: float = field(default=0.0, metadata=_combined(max))
    #: Worker processes that died without handing back their stats (their pages are missing above).
    lost_workers: list[str] = field(default_factory=list)
    #: How long claims took, from the worker's call to its answer, as a histogram: milliseconds rounded to two
    #: significant digits -> claims. Bounded (a few hundred keys), so the stats a worker sends its supervisor
    #: stay small however long it runs (a list of every claim passed a pipe's buffer at 100,000 books).
    claim_ms: Counter[float] = field(default_factory=Counter)
    #: The worker process's CPU seconds and peak resident memory when it ended (a crawl's workers are processes
    #: of their own, forked from a server its parent cannot see the usage of).
    cpu_s: float = 0.0
    peak_rss_mb: float = field(default=0.0, metadata=_combined(max))

    def merge(self, other: WorkerStats) -> None:
        """Add ``other``'s figures to these, each field by its own rule."""
        for f in fields(self):
            rule = f.metadata.get(MERGE, operator.add)
            setattr(self, f.name, rule(getattr(self, f.name), getattr(other, f.name)))

    @property
    def books_stored(self) -> int:
        return self.books_new + self.books_changed + self.books_unchanged
