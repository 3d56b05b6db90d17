"""One crawl, composed once: :class:`Crawl` is what the CLI, the Dagster assets and the Dagster ops call.

A crawl starts (its politeness and weights stored where every worker sees them, the start page seeded),
works (W worker processes drain the queue, discovery and details interleaved by the queue's scheduler) and
reports from the database. A budgeted crawl (``deep_budget``) discovers first, then splits the budget
across the discovered categories by weight and hands each category exactly its quota through the queue's
per-group budgets.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from book_assets.archive import ArchiveSummary, index_days, load_indexer_meanwhile
from book_assets.crawl.adaptive import Decision, forget_decisions, list_decisions
from book_assets.crawl.config import DETAIL, LISTING, TASK_TYPES, CrawlConfig, make_queue
from book_assets.crawl.discovery import start_task
from book_assets.crawl.drain import drain as run_drain
from book_assets.crawl.drain import warm_up
from book_assets.crawl.robots import RobotsRecord, forget_robots, list_robots
from book_assets.crawl.stats import WorkerStats
from book_assets.db.connection import Database
from book_assets.db.migrations import migrate
from book_assets.observe.tracing import record_crawl
from book_assets.queue import AutoThrottle, GroupBudget, TaskQueue, domain_of
from book_assets.queue.failures import requeue_due
from book_assets.scraper.errors import ErrorKind
from book_assets.store.books import book_counts, versions_since
from book_assets.store.lifecycle import OpenCrawl, open_crawl
from book_assets.store.pages import revalidated_since
from book_assets.store.removals import Removals, books_listed_since, settle


@dataclass(frozen=True)
class RunFigures:
    """What this run did, read from the database: every worker's pages on every host, a lost worker's too.

    ``pages`` are tasks completed since the run started (a page that was fetched but failed for good is a
    failed task, counted apart); a completed book task stored its book as new, changed or unchanged, so
    unchanged is what is left once the versions recorded since the start are counted.
    """

    pages: int = 0
    listing_pages: int = 0
    books_new: int = 0
    books_changed: int = 0
    books_unchanged: int = 0
    retries: int = 0
    #: Tasks claimed this run that are now failed for good.
    failed: int = 0
    #: Book tasks enqueued this run (books discovered that were not already queued).
    new_detail_tasks: int = 0
    #: Books the listing pages processed this run showed, each once (queued before or not).
    books_found: int = 0
    #: Book pages completed this run, per category (the queue's fairness group of a book task).
    by_category: dict[str, int] = field(default_factory=dict)
    #: Pages a 304 confirmed this run (their stored copy stands; books among them count as unchanged).
    not_modified: int = 0
    #: Book pages completed this run, and book tasks claimed this run that are now failed for good.
    detail_pages: int = 0
    failed_details: int = 0

    @classmethod
    def read(cls, db: Database, queue: TaskQueue, since: datetime) -> RunFigures:
        activity = queue.activity_since(since)
        new, changed = versions_since(db, since)
        details = activity.total(DETAIL)
        return cls(
            pages=activity.total(),
            listing_pages=activity.total(LISTING),
            books_new=new,
            books_changed=changed,
            books_unchanged=max(0, details - new - changed),
            retries=activity.retries,
            failed=sum(activity.failed.values()),
            new_detail_tasks=activity.created.get(DETAIL, 0),
            books_found=books_listed_since(db, since),
            by_category=dict(activity.completed.get(DETAIL, {})),
            not_modified=revalidated_since(db, since),
            detail_pages=details,
            failed_details=activity.failed.get(DETAIL, 0),
        )

    @property
    def books_stored(self) -> int:
        return self.books_new + self.books_changed + self.books_unchanged


@dataclass
class CrawlReport:
    """What a crawl did, for the CLI summary and Dagster metadata."""

    config: CrawlConfig
    #: What the workers that reported saw (fetchers, adaptive mode, concurrency); the run's figures are ``run``.
    stats: WorkerStats
    counts: dict[str, int]
    run: RunFigures
    failed_by_reason: dict[str, int]
    seeded: bool = False
    #: Failed tasks moved back to pending before the drain (a retry of the failures).
    requeued: int = 0
    quotas: dict[str, int] = field(default_factory=dict)
    budgets: list[GroupBudget] = field(default_factory=list)
    elapsed_s: float = 0.0
    #: Adaptive mode: the shared decision per (domain, page type) at the end of the crawl.
    decisions: list[Decision] = field(default_factory=list)
    #: The WARC archive of each day the crawl ran on (warc on), indexed when it ended.
    archive: list[ArchiveSummary] = field(default_factory=list)
    #: Books marked removed or back at the crawl's end (or why removals were not decided).
    removals: Removals | None = None
    #: obey_robots: each allowed host's robots.txt outcome.
    robots: list[RobotsRecord] = field(default_factory=list)
    #: Each allowed domain's stored politeness at the end (its autothrottled interval among it).
    politeness: list[dict[str, Any]] = field(default_factory=list)
    #: Finished tasks older than ``task_retention_days`` deleted when the crawl reported.
    tasks_pruned: int = 0

    @property
    def failure(self) -> str | None:
        """Why this run failed though it ran to its end, or None: every task it worked on failed, or every book
        page did (a site that answers only errors must end as a failed run, never pass as a crawl)."""
        run = self.run
        if run.failed and not run.pages:
            return f"every task this run worked on failed ({run.failed}): nothing was stored"
        if run.failed_details and not run.detail_pages:
            return f"every book page this run worked on failed ({run.failed_details}): no book was stored"
        return None

    def span_attributes(self) -> dict[str, str | int | float | bool]:
        """The crawl span's attributes (:func:`~book_assets.observe.tracing.record_crawl`): its settings and figures."""
        run, c = self.run, self.config
        return {
            "book_pipeline.crawl.base_url": c.base_url,
            "book_pipeline.crawl.fetch_mode": c.fetch.mode,
            "book_pipeline.crawl.workers": c.workers,
            "book_pipeline.crawl.pages": run.pages,
            "book_pipeline.crawl.failed": run.failed,
            "book_pipeline.crawl.retries": run.retries,
            "book_pipeline.crawl.books_new": run.books_new,
            "book_pipeline.crawl.books_changed": run.books_changed,
            "book_pipeline.crawl.books_unchanged": run.books_unchanged,
        }

    @property
    def pages_per_s(self) -> float:
        return self.run.pages / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def summary_lines(self, *, show_config: bool = False) -> list[str]:
        c, run = self.counts, self.run
        lines = [
            f"books: total {c['total']} / unique URLs {c['unique_urls']} / with raw HTML {c['with_html']}",
            f"this run: {run.pages} pages in {self.elapsed_s:.1f}s ({self.pages_per_s:.1f} pages/s), "
            f"{run.listing_pages} listing pages, {run.books_new} new, "
            f"{run.books_changed} changed, {run.books_unchanged} unchanged books"
            + (f"; {run.not_modified} pages not modified (304)" if run.not_modified else ""),
            f"retries: {run.retries}; failed tasks: {sum(self.failed_by_reason.values())}",
        ]
        lines += [
            f"  failed {n:>5}  {reason}" for reason, n in sorted(self.failed_by_reason.items(), key=lambda x: -x[1])
        ]
        if self.stats.lost_workers:
            lines.append(
                f"workers lost: {len(self.stats.lost_workers)} ({'; '.join(self.stats.lost_workers)}); "
                "their tasks were taken over and are counted above; their fetcher and adaptive counters are missing"
            )
        if self.removals is not None:
            lines.append(self.removals.line())
        if self.budgets:
            lines.append(budget_line(self.budgets))
            lines.append("deep budget quotas: " + ", ".join(f"{k} {v}" for k, v in sorted(self.quotas.items()) if v))
        if self.decisions:
            lines.append(
                f"adaptive: {self.stats.rendered} pages rendered, {self.stats.plain} fetched plain, "
                f"{self.stats.checked} compared, {self.stats.disagreements} disagreements; "
                f"{self.stats.browsers} browser(s) started"
            )
            lines += [f"  {decision.line()}" for decision in self.decisions]
        lines += [summary.line() for summary in self.archive]
        lines += self.politeness_lines()
        if self.tasks_pruned:
            lines.append(
                f"queue: {self.tasks_pruned} finished tasks older than {self.config.task_retention_days:g} days pruned"
            )
        if self.failure:
            lines.append(f"RUN FAILED: {self.failure}")
        if show_config:
            lines.append("config: " + json.dumps(self.config.as_dict(), sort_keys=True, default=str))
        return lines

    def politeness_lines(self) -> list[str]:
        """What robots.txt did (obey_robots) and where AutoThrottle left each domain's interval (autothrottle)."""
        lines: list[str] = []
        if self.config.obey_robots:
            disallowed = self.failed_by_reason.get(ErrorKind.ROBOTS_DISALLOWED, 0)
            lines.append(f"robots.txt obeyed: {disallowed} URLs disallowed, never fetched")
            lines += [f"  {record.line()}" for record in self.robots]
        if self.config.autothrottle:
            for policy in self.politeness:
                if policy.get("max_interval_s") is None:
                    continue
                latency = policy.get("latency_s")
                lines.append(
                    f"autothrottle {policy['domain']}: interval {policy['min_interval_s']:.3f} s at the end "
                    f"(floor {policy['floor_interval_s'] or 0:.3f} s, max {policy['max_interval_s']:.3f} s, "
                    f"highest {self.stats.max_interval_s:.3f} s, last latency "
                    f"{'-' if latency is None else f'{latency:.3f} s'})"
                )
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


def politeness_domains(config: CrawlConfig) -> list[str]:
    """The queue domains a crawl's politeness is stored for: the allowed hosts, and the start URL's own
    (with its port, as its tasks name it)."""
    return sorted(config.allowed_domains | {domain_of(config.base_url)})


def prepare(db: Database, config: CrawlConfig) -> None:
    """Migrate, and store this crawl's politeness and category weights where every worker sees them."""
    migrate(db)
    queue = make_queue(db, config)
    throttle = (
        AutoThrottle(config.autothrottle_target_concurrency, config.autothrottle_max_interval_s)
        if config.autothrottle
        else None
    )
    for domain in politeness_domains(config):
        queue.set_domain_policy(
            domain,
            min_interval_s=config.min_interval_s,
            max_in_flight=config.max_in_flight_per_domain,
            throttle=throttle,
        )
    forget_robots(db, sorted(config.allowed_domains))
    queue.set_group_weights(DETAIL, config.weights_by_category(), default_weight=config.weights.default)
    queue.clear_group_budgets(DETAIL)
    if config.fetch.mode == "adaptive":
        forget_decisions(db, sorted(config.allowed_domains))


def seed(db: Database, config: CrawlConfig) -> bool:
    """Enqueue the start page; False when it is already pending or in progress."""
    queue = make_queue(db, config)
    task = start_task(config)
    return queue.enqueue(task.task_type, task.payload, priority=task.priority).created


def drain(
    database_url: str,
    config: CrawlConfig,
    *,
    task_types: tuple[str, ...] = TASK_TYPES,
    workers: int | None = None,
    progress: bool = False,
) -> WorkerStats:
    """Run workers until nothing claimable is left (see :mod:`book_assets.crawl.drain`); summed stats."""
    if not progress:
        return run_drain(database_url, config, task_types=task_types, workers=workers)
    with ProgressBar(database_url, config) as bar:
        return run_drain(database_url, config, task_types=task_types, workers=workers, on_tick=bar.update)


class ProgressBar:
    """A progress bar fed by the queue's own counters (every worker's pages, not only this process's)."""

    def __init__(self, database_url: str, config: CrawlConfig) -> None:
        self.db = Database(database_url, application_name="book-pipeline progress")
        self.queue = make_queue(self.db, config)
        self.started = time.monotonic()
        self.done = 0

    def __enter__(self) -> ProgressBar:
        from tqdm import tqdm

        self.bar = tqdm(unit="page", file=sys.stderr, dynamic_ncols=True, mininterval=0.5)
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.close()
        self.db.close()

    def update(self) -> None:
        stats = self.queue.stats()
        done = stats.total("completed")
        self.bar.update(max(0, done - self.done))
        self.done = done
        elapsed = time.monotonic() - self.started
        self.bar.set_postfix(
            pending=stats.total("pending"),
            in_flight=stats.total("in_progress"),
            failed=stats.total("failed"),
            rate=f"{done / elapsed:.1f}/s" if elapsed else "-",
            refresh=False,
        )


class Crawl:
    """One crawl of ``config`` through the queue at ``database_url``."""

    def __init__(
        self,
        database_url: str,
        config: CrawlConfig,
        *,
        since: datetime | None = None,
        opened: OpenCrawl | None = None,
    ) -> None:
        """``since``: the run's start on the database's clock, when an earlier step of the same run began it
        in another process or on another host (:attr:`since` there); figures and time count from it.
        ``opened``: the crawl that earlier step opened (:attr:`opened` there), or one a report names; the
        report settles it. A run that neither opened nor names a crawl settles none."""
        self.database_url = database_url
        self.config = config
        self.quotas: dict[str, int] = {}
        self.seeded = False
        self.requeued = 0
        #: The crawl this run opened (:meth:`start`) or was handed; the only one its report settles.
        self.opened: OpenCrawl | None = opened
        #: A retry of the failures (:meth:`requeue_failed`): its report decides no removals.
        self.retrying = False
        self._started = time.monotonic()
        self._since = since
        self._resumed = since is not None
        self._started_on = (since or datetime.now(UTC)).astimezone(UTC).date()

    @property
    def since(self) -> datetime | None:
        """When the run started on the database's clock (None until it starts)."""
        return self._since

    def _mark_start(self, db: Database) -> None:
        """The run starts now on the database's clock; its figures count what the queue did from here."""
        if self._since is None:
            self._since = make_queue(db, self.config).now()

    def start(self) -> bool:
        """Store the crawl's policies and seed the start page; False when it was already queued."""
        warm_up(self.config.workers, self.config.metrics_port)
        with Database(self.database_url) as db:
            prepare(db, self.config)
            self.opened = open_crawl(db)
            if self._since is None:  # the run starts when its crawl opens, on the database's clock
                self._since = self.opened.started_at
            self.seeded = seed(db, self.config)
        return self.seeded

    def work(
        self, *, task_types: tuple[str, ...] = TASK_TYPES, workers: int | None = None, progress: bool = False
    ) -> WorkerStats:
        """Drain the queue's ``task_types``; with a deep budget, details only after discovery has finished."""
        if self.config.archive_dir:  # the report that follows indexes the day's archive
            load_indexer_meanwhile()
        if self._since is None:
            with Database(self.database_url) as db:
                self._mark_start(db)
        if self.config.deep_budget is None or DETAIL not in task_types:
            return drain(self.database_url, self.config, task_types=task_types, workers=workers, progress=progress)
        stats = WorkerStats(worker_id="all")
        if LISTING in task_types:
            stats.merge(
                drain(self.database_url, self.config, task_types=(LISTING,), workers=workers, progress=progress)
            )
        with Database(self.database_url) as db:
            self.quotas = apply_budget(db, self.config)
        stats.merge(drain(self.database_url, self.config, task_types=(DETAIL,), workers=workers, progress=progress))
        return stats

    def before_sharing(self, task_types: tuple[str, ...] = TASK_TYPES) -> tuple[WorkerStats, tuple[str, ...]]:
        """What must be done before separate workers share ``task_types``, done here; the types left to share.

        For workers that are not this crawl's own processes (one Dagster step each): a budgeted crawl splits
        its budget only once discovery has finished (see :meth:`work`), so its listing pages are drained here
        by one worker and the budget is set, and the workers share the detail pages. Otherwise nothing comes
        first and the workers share every type, interleaved.
        """
        with Database(self.database_url) as db:
            self._mark_start(db)
        stats = WorkerStats(worker_id="all")
        if self.config.deep_budget is None or DETAIL not in task_types:
            return stats, task_types
        if LISTING in task_types:
            stats.merge(drain(self.database_url, self.config, task_types=(LISTING,), workers=1))
        with Database(self.database_url) as db:
            self.quotas = apply_budget(db, self.config)
        return stats, (DETAIL,)

    def report(self, stats: WorkerStats) -> CrawlReport:
        """What the crawl did, with every count read from the database; the days' archive indexed."""
        archive = index_days(self.config.archive_dir, crawl_days(self._started_on)) if self.config.archive_dir else []
        with Database(self.database_url) as db:
            queue = make_queue(db, self.config)
            self._mark_start(db)
            assert self._since is not None
            if self._resumed:  # begun elsewhere: only the database's clock spans the run's steps
                elapsed_s = (queue.now() - self._since).total_seconds()
            else:
                elapsed_s = time.monotonic() - self._started
            report = CrawlReport(
                config=self.config,
                stats=stats,
                counts=book_counts(db),
                run=RunFigures.read(db, queue, self._since),
                failed_by_reason=queue.stats().failed_kinds(),
                seeded=self.seeded,
                requeued=self.requeued,
                quotas=self.quotas,
                budgets=queue.budget_report(DETAIL) if self.quotas else [],
                elapsed_s=elapsed_s,
                decisions=list_decisions(db) if self.config.fetch.mode == "adaptive" else [],
                archive=archive,
                removals=self._settle(db, queue),
                robots=list_robots(db, sorted(self.config.allowed_domains)),
                politeness=[p for d in politeness_domains(self.config) if (p := queue.domain_policy(d))],
                tasks_pruned=self._prune(queue),
            )
        if self.opened is not None and not self.retrying:  # the crawl's root span, by the run that opened it
            record_crawl(self.opened, report.span_attributes(), report.failure)
        return report

    def _prune(self, queue: TaskQueue) -> int:
        """Delete the finished tasks older than the retention (none when it is 0), in short batches; the books,
        their versions, the pages and the archive are data and stay."""
        days = self.config.task_retention_days
        return queue.prune(days * 86400) if days > 0 else 0

    def _settle(self, db: Database, queue: TaskQueue) -> Removals:
        """Decide removals from what this run's crawl's listing pages showed (:mod:`book_assets.store.removals`).

        Only the crawl this run opened or was handed, and only once its queue holds no listing page a worker
        could still process: a drain-only run (its crawl's own run perhaps still at work on another host)
        and a report that comes early leave the crawl open, for its run to settle.
        """
        if self.retrying:
            return settle(db, None, undecided="a retry of the failures sees only the pages it retried")
        if self.opened is None:
            return Removals(decided=False, reason="this run opened no crawl; the run that opened it settles it")
        left = queue.outstanding((LISTING,))
        if left:
            return Removals(decided=False, reason=f"{left} listing pages still queued; the crawl stays open")
        return settle(db, self.opened)

    def run(self, *, progress: bool = False) -> CrawlReport:
        """Start, work until drained, report."""
        self.start()
        return self.report(self.work(progress=progress))

    def retry_failed(self, *, include_permanent: bool = False) -> CrawlReport:
        """Move the failed pages that can succeed back to pending (:meth:`requeue_failed`) and work until
        drained (no new seed), then report."""
        self.requeue_failed(include_permanent=include_permanent)
        return self.report(self.work())

    def requeue_failed(self, *, include_permanent: bool = False) -> int:
        """Move the failed pages that can succeed back to pending; how many moved.

        Those are the pages failing now whose error kind can change and whose requeue is due
        (:attr:`CrawlConfig.requeue_policy`); ``include_permanent`` moves every failed task back instead (an
        operator's choice: a 404 that a site fixed). The crawl's policies are stored first, as :meth:`start`
        does: the retry follows this run's politeness.
        """
        with Database(self.database_url) as db:
            prepare(db, self.config)
            self._mark_start(db)
            self.retrying = True
            if include_permanent:
                self.requeued = make_queue(db, self.config).requeue()
            else:
                self.requeued = requeue_due(db, self.config.requeue_policy)
        return self.requeued


def crawl_days(first: date) -> list[date]:
    """The days (UTC) from ``first`` to today: those a crawl that started on ``first`` may have archived."""
    today = datetime.now(UTC).date()
    return [first + timedelta(days=n) for n in range((today - first).days + 1)]


def crawl(database_url: str, config: CrawlConfig, *, progress: bool = False) -> CrawlReport:
    """A whole crawl (see :class:`Crawl`)."""
    return Crawl(database_url, config).run(progress=progress)


def apply_budget(db: Database, config: CrawlConfig) -> dict[str, int]:
    """Split ``deep_budget`` across the pending detail tasks' categories by weight; set the queue budgets."""
    from book_assets.scheduling.quotas import split_budget

    assert config.deep_budget is not None
    queue = make_queue(db, config)
    quotas = split_budget(config.deep_budget, config.weights, queue.pending_by_group(DETAIL))
    queue.set_group_budgets(DETAIL, quotas)
    return quotas
