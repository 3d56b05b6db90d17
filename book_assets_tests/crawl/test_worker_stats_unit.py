"""Merging two workers' stats, and what the stats leave to the database (pure)."""

from __future__ import annotations

from collections import Counter
from dataclasses import fields
from datetime import UTC, datetime, timedelta

from book_assets.crawl.stats import PageCost, WorkerStats


def test_merging_sums_every_counter_without_a_list_of_fields() -> None:
    counters = [f.name for f in fields(WorkerStats) if f.type in ("int", int)]
    one, two = WorkerStats(worker_id="a"), WorkerStats(worker_id="b")
    for name in counters:
        setattr(one, name, 1)
        setattr(two, name, 2)
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


def test_merging_adds_the_costs_of_each_page_type_category_and_fetch_mode_and_leaves_the_parts_alone() -> None:
    one, two = WorkerStats(), WorkerStats()
    one.cost_of("detail", "Travel", browser=False).fetches = 2
    two.cost_of("detail", "Travel", browser=False).fetches = 3
    two.cost_of("detail", "Travel", browser=True).bytes = 100
    two.cost_of("listing", None, browser=False).fetch_s = 1.5
    total = WorkerStats()
    total.merge(one)
    total.merge(two)
    assert total.costs == {
        ("detail", "Travel", "http"): PageCost(fetches=5),
        ("detail", "Travel", "browser"): PageCost(bytes=100),
        ("listing", "", "http"): PageCost(fetch_s=1.5),
    }
    assert one.costs == {("detail", "Travel", "http"): PageCost(fetches=2)}  # a worker's own stats unchanged


def test_merged_stats_name_every_worker_and_the_first_start_the_database_is_read_from() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    total = WorkerStats(worker_id="all")
    for worker, started_at in (("h:2", start + timedelta(seconds=1)), ("h:1", start), ("h:3", None)):
        total.merge(WorkerStats(worker_id=worker, worker_ids=[worker], started_at=started_at))
    assert total.worker_ids == ["h:2", "h:1", "h:3"] and total.started_at == start


def test_the_stats_hold_no_figure_the_database_counts() -> None:
    """Pages, books and their outcomes, categories, 304s, retries: RunFigures and WorkerFigures read them."""
    held = {f.name for f in fields(WorkerStats)}
    counted_by_the_database = {
        "pages",
        "books_found",
        "books_new",
        "books_changed",
        "books_unchanged",
        "not_modified",
        "by_category",
        "retried",
    }
    assert held.isdisjoint(counted_by_the_database)
