"""Seed, drain and summarize a crawl: the library calls that the CLI and the Dagster assets make.

``drain`` runs W worker processes (spawned, one browser each) until the queue has nothing left that they
may claim, showing a progress bar fed by the queue's own counters. Budgeted runs (``deep_budget``)
discover first, then split the budget across the discovered categories by weight and hand each category
exactly its quota through the queue's per-group budgets.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from book_assets.crawl.adaptive import Decision, forget_decisions, list_decisions
from book_assets.crawl.config import DETAIL, LISTING, TASK_TYPES, CrawlConfig, weights_by_category_name
from book_assets.crawl.discovery import start_task
from book_assets.crawl.storage import book_counts
from book_assets.crawl.worker import Worker, WorkerStats, make_queue
from book_assets.db.connection import Database
from book_assets.db.migrations import migrate
from book_assets.queue import GroupBudget


@dataclass
class CrawlReport:
    """What a crawl did, for the CLI summary and Dagster metadata."""

    stats: WorkerStats
    counts: dict[str, int]
    failed_by_reason: dict[str, int]
    quotas: dict[str, int] = field(default_factory=dict)
    budgets: list[GroupBudget] = field(default_factory=list)
    elapsed_s: float = 0.0
    #: Adaptive mode: the shared decision per (domain, page type) at the end of the crawl.
    decisions: list[Decision] = field(default_factory=list)

    @property
    def pages_per_s(self) -> float:
        return self.stats.pages / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def summary_lines(self) -> list[str]:
        c = self.counts
        lines = [
            f"books: total {c['total']} / unique URLs {c['unique_urls']} / with raw HTML {c['with_html']}",
            f"this run: {self.stats.pages} pages in {self.elapsed_s:.1f}s ({self.pages_per_s:.1f} pages/s), "
            f"{self.stats.listing_pages} listing pages, {self.stats.books_new} new, "
            f"{self.stats.books_changed} changed, {self.stats.books_unchanged} unchanged books",
            f"retries: {self.stats.retried}; failed tasks: {sum(self.failed_by_reason.values())}",
        ]
        lines += [
            f"  failed {n:>5}  {reason}" for reason, n in sorted(self.failed_by_reason.items(), key=lambda x: -x[1])
        ]
        if self.budgets:
            lines.append(budget_line(self.budgets))
        if self.decisions:
            lines.append(
                f"adaptive: {self.stats.rendered} pages rendered, {self.stats.plain} fetched plain, "
                f"{self.stats.checked} compared, {self.stats.disagreements} disagreements"
            )
            lines += [f"  {decision.line()}" for decision in self.decisions]
        return lines


def budget_line(budgets: list[GroupBudget]) -> str:
    """One line saying whether the deep budget was delivered, with the numbers when it was not."""
    budget = sum(b.budget for b in budgets)
    completed = sum(b.completed for b in budgets)
    failed = sum(b.failed for b in budgets)
    leased = sum(b.in_progress for b in budgets)
    if completed >= budget:
        return f"deep budget {budget}: met, {completed} detail pages stored"
    short = [f"{b.group} {b.completed}/{b.budget}" for b in budgets if not b.met]
    return (
        f"deep budget {budget}: NOT met, {completed} stored, {failed} failed for good, {leased} in flight "
        f"(short: {', '.join(short[:10])}{', ...' if len(short) > 10 else ''})"
    )


def prepare(db: Database, config: CrawlConfig) -> None:
    """Migrate, and store this crawl's politeness and category weights where every worker sees them."""
    migrate(db)
    queue = make_queue(db, config)
    for domain in sorted(config.allowed_domains):
        queue.set_domain_policy(domain, min_interval_s=config.rate, max_in_flight=config.max_in_flight_per_domain)
    queue.set_group_weights(DETAIL, weights_by_category_name(config.weights), default_weight=config.default_weight)
    queue.clear_group_budgets(DETAIL)
    if config.fetch.mode == "adaptive":
        forget_decisions(db, sorted(config.allowed_domains))


def decisions(db: Database, config: CrawlConfig) -> list[Decision]:
    """Adaptive mode: the stored decision per (domain, page type); other modes: none."""
    return list_decisions(db) if config.fetch.mode == "adaptive" else []


def seed(db: Database, config: CrawlConfig) -> bool:
    """Enqueue the start page; False when it is already pending or in progress."""
    queue = make_queue(db, config)
    task = start_task(config)
    return queue.enqueue(task.task_type, task.payload, priority=task.priority).created


def _run_worker(database_url: str, config: CrawlConfig, worker_id: str, task_types: tuple[str, ...]) -> WorkerStats:
    import asyncio

    worker = Worker(database_url, config, worker_id=worker_id, task_types=task_types)
    return asyncio.run(worker.run())


def drain(
    database_url: str,
    config: CrawlConfig,
    *,
    task_types: tuple[str, ...] = TASK_TYPES,
    workers: int | None = None,
    progress: bool = False,
) -> WorkerStats:
    """Run workers until nothing claimable is left; returns their summed stats."""
    n = workers or config.workers
    total = WorkerStats(worker_id="all")
    if n == 1 and not progress:
        total.merge(_run_worker(database_url, config, "w0", task_types))
        return total
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=n, mp_context=ctx) as pool:
        futures = [pool.submit(_run_worker, database_url, config, f"w{i}", task_types) for i in range(n)]
        if progress:
            _show_progress(database_url, config, futures)
        for future in futures:
            total.merge(future.result())
    return total


def _show_progress(database_url: str, config: CrawlConfig, futures: list[Any]) -> None:
    from tqdm import tqdm

    db = Database(database_url, application_name="book-pipeline progress")
    queue = make_queue(db, config)
    started = time.monotonic()
    try:
        with tqdm(unit="page", file=sys.stderr, dynamic_ncols=True, mininterval=0.5) as bar:
            done_before = 0
            while not all(f.done() for f in futures):
                stats = queue.stats()
                done = stats.total("completed")
                bar.update(max(0, done - done_before))
                done_before = done
                elapsed = time.monotonic() - started
                bar.set_postfix(
                    pending=stats.total("pending"),
                    in_flight=stats.total("in_progress"),
                    failed=stats.total("failed"),
                    rate=f"{done / elapsed:.1f}/s" if elapsed else "-",
                    refresh=False,
                )
                time.sleep(0.5)
    finally:
        db.close()


def crawl(database_url: str, config: CrawlConfig, *, progress: bool = False) -> CrawlReport:
    """Seed and drain a whole crawl (discovery and details interleaved), then summarize."""
    started = time.monotonic()
    db = Database(database_url)
    try:
        prepare(db, config)
        seed(db, config)
        quotas: dict[str, int] = {}
        if config.deep_budget is None:
            stats = drain(database_url, config, progress=progress)
        else:
            stats = drain(database_url, config, task_types=(LISTING,), progress=progress)
            quotas = apply_budget(db, config)
            stats.merge(drain(database_url, config, task_types=(DETAIL,), progress=progress))
        return CrawlReport(
            stats=stats,
            counts=book_counts(db),
            failed_by_reason=failed_by_reason(db, config),
            quotas=quotas,
            budgets=make_queue(db, config).budget_report(DETAIL) if quotas else [],
            elapsed_s=time.monotonic() - started,
            decisions=decisions(db, config),
        )
    finally:
        db.close()


def apply_budget(db: Database, config: CrawlConfig) -> dict[str, int]:
    """Split ``deep_budget`` across the pending detail tasks' categories by weight; set the queue budgets."""
    from book_assets.scheduling.quotas import split_budget
    from book_assets.scheduling.weights import weights_from_mapping

    assert config.deep_budget is not None
    queue = make_queue(db, config)
    available = queue.pending_by_group(DETAIL)
    weights = weights_from_mapping({**config.weights, "*": config.default_weight}, "crawl config")
    quotas = split_budget(config.deep_budget, weights, available)
    queue.set_group_budgets(DETAIL, quotas)
    return quotas


def failed_by_reason(db: Database, config: CrawlConfig) -> dict[str, int]:
    """Every failed (dead-lettered) task, counted by the error kind recorded when it failed."""
    return make_queue(db, config).stats().failed_kinds()
