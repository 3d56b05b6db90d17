"""What a worker process counts: the figures only a process knows, summed across workers by the pipeline."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class WorkerStats:
    """What one worker did; summed across workers by the pipeline (Scrapy-style stats)."""

    worker_id: str = ""
    pages: int = 0
    listing_pages: int = 0
    books_found: int = 0
    new_detail_tasks: int = 0
    books_new: int = 0
    books_changed: int = 0
    books_unchanged: int = 0
    #: Pages answered 304 Not Modified to a conditional request (books among them count as unchanged).
    not_modified: int = 0
    retried: int = 0
    failed: int = 0
    released: int = 0
    lost_leases: int = 0
    #: AutoThrottle: the highest interval this worker's observations set (seconds).
    max_interval_s: float = 0.0
    #: Adaptive mode: pages fetched in the browser / over plain HTTP / both ways and compared, and
    #: comparisons (or plain pages that only parsed once rendered) where the records differed.
    rendered: int = 0
    plain: int = 0
    checked: int = 0
    disagreements: int = 0
    #: Workers that started a browser (adaptive: the hosts' renderers, and workers that had to render).
    browsers: int = 0
    #: The autoscaled pages in flight: where this worker started and every value it moved to.
    concurrency: list[int] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    by_category: Counter[str] = field(default_factory=Counter)
    fetcher: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0
    #: Worker processes that died without handing back their stats (their pages are missing above).
    lost_workers: list[str] = field(default_factory=list)

    def merge(self, other: WorkerStats) -> None:
        for name in (
            "pages",
            "listing_pages",
            "books_found",
            "new_detail_tasks",
            "books_new",
            "books_changed",
            "books_unchanged",
            "not_modified",
            "retried",
            "failed",
            "released",
            "lost_leases",
            "rendered",
            "plain",
            "checked",
            "disagreements",
            "browsers",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.errors.update(other.errors)
        self.by_category.update(other.by_category)
        for key, value in other.fetcher.items():
            self.fetcher[key] = self.fetcher.get(key, 0) + value
        self.elapsed_s = max(self.elapsed_s, other.elapsed_s)
        self.max_interval_s = max(self.max_interval_s, other.max_interval_s)
        self.concurrency = self.concurrency or other.concurrency
        self.lost_workers += other.lost_workers

    @property
    def books_stored(self) -> int:
        return self.books_new + self.books_changed + self.books_unchanged
