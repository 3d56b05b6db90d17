"""Merging two workers' stats (pure)."""

from __future__ import annotations

from collections import Counter
from dataclasses import fields
from typing import Any

from book_assets.crawl.stats import WorkerStats


def test_merging_sums_every_counter_without_a_list_of_fields() -> None:
    counters = [f.name for f in fields(WorkerStats) if f.type in ("int", int)]
    ones: dict[str, Any] = dict.fromkeys(counters, 1)
    twos: dict[str, Any] = dict.fromkeys(counters, 2)
    one = WorkerStats(worker_id="a", **ones)
    two = WorkerStats(worker_id="b", **twos)
    one.merge(two)
    assert counters and all(getattr(one, name) == 3 for name in counters)
    assert one.worker_id == "a"


def test_merging_adds_counts_keeps_maxima_and_the_first_concurrency_history() -> None:
    one = WorkerStats(errors=Counter(timeout=1), fetcher=Counter(requests=3), max_interval_s=0.5, elapsed_s=2.0)
    two = WorkerStats(
        errors=Counter(timeout=2, http_404=1),
        fetcher=Counter(requests=4),
        max_interval_s=0.2,
        elapsed_s=3.0,
        concurrency=[4, 5],
        lost_workers=["w2"],
    )
    one.merge(two)
    assert one.errors == {"timeout": 3, "http_404": 1} and one.fetcher == {"requests": 7}
    assert one.max_interval_s == 0.5 and one.elapsed_s == 3.0
    assert one.concurrency == [4, 5] and one.lost_workers == ["w2"]
