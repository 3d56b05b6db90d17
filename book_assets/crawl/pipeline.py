"""One crawl, composed once: the functions the CLI and the Dagster steps call, in the same order.

A run begins (:func:`begin`: its politeness and weights stored where every worker sees them, its crawl
opened, the start page seeded) and is from then on one value, :class:`CrawlRun`, handed to each step after
beside the database's URL (the run holds no credentials).
It works (W worker processes drain the queue, discovery and details interleaved by the queue's scheduler)
and finishes (:func:`finish`: the archive indexed, the fields judged for drift, the figures read from the
database, the removals settled, the finished tasks pruned, the crawl's trace closed). A budgeted crawl
(``deep_budget``) discovers first, then splits the budget across the discovered categories by weight and hands
each category exactly its quota through the queue's per-group budgets (:func:`split_before_details`).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

from book_assets.archive import ArchiveSummary, index_days
from book_assets.crawl.adaptive import Decision, forget_decisions, list_decisions
from book_assets.crawl.config import CrawlConfig, make_queue
from book_assets.crawl.discovery import start_tasks
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
from book_assets.sites.site import Role, Site, default_kind, kinds_of
from book_assets.store.drift import CONTRACT_FAILURES, FieldJudgement, Rejudgement, judge, rejudge
from book_assets.store.lifecycle import OpenCrawl, close_undecided, open_crawl
from book_assets.store.pages import revalidated_since
from book_assets.store.removals import Removals, books_listed_since, chains_cut_since, settle


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
    def read(cls, db: Database, queue: TaskQueue, since: datetime, site: Site) -> RunFigures:
        activity = queue.activity_since(since)
        new, changed = site.versions_since(db, since)
        detail = default_kind(site, Role.DETAIL)
        details = activity.total(detail)
        return cls(
            pages=activity.total(),
            listing_pages=sum(activity.total(kind) for kind in kinds_of(site, Role.LISTING)),
            books_new=new,
            books_changed=changed,
            books_unchanged=max(0, details - new - changed),
            retries=activity.retries,
            failed=sum(activity.failed.values()),
            new_detail_tasks=activity.created.get(detail, 0),
            books_found=books_listed_since(db, since),
            by_category=dict(activity.completed.get(detail, {})),
            not_modified=revalidated_since(db, since),
            detail_pages=details,
            failed_details=activity.failed.get(detail, 0),
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
    #: The tasks this run claimed that are now failed for good, by error kind (``run.failed`` in all).
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
    #: The crawl the run opened (or settles); None: a drain-only run or a retry of the failures.
    crawl_id: int | None = None
    #: The crawl's fields judged against the last good crawl's (:mod:`book_assets.store.drift`); None: not judged.
    fields: FieldJudgement | None = None
    #: Listing chains this run cut at ``max_pages``, their next page not followed.
    chains_cut: int = 0
    #: The error of the start page when it yielded nothing: the run opened a crawl and completed no listing page.
    start_failure: str | None = None

    @property
    def failure(self) -> str | None:
        """Why this run failed though it ran to its end, or None: its start page yielded nothing, every task it
        worked on failed, or every detail page did (a site that answers only errors, or a start page that is a
        maintenance page, must end as a failed run, never pass as a crawl)."""
        run, record = self.run, self.config.site.record
        if self.start_failure is not None:
            return f"the start page {self.config.base_url} yielded nothing: {self.start_failure}"
        if run.failed and not run.pages:
            return f"every task this run worked on failed ({run.failed}): nothing was stored"
        if run.failed_details and not run.detail_pages:
            return f"every {record} page this run worked on failed ({run.failed_details}): no {record} was stored"
        return None

    @property
    def drift(self) -> tuple[str, ...]:
        """The fields that drifted in this crawl (the books keep their last good values): empty when none did."""
        return self.fields.drifted_fields if self.fields is not None else ()

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
        c, run, record = self.counts, self.run, self.config.site.record
        lines = [
            f"{record}s: total {c['total']} / unique URLs {c['unique_urls']} / with raw HTML {c['with_html']}",
            f"this run: {run.pages} pages in {self.elapsed_s:.1f}s ({self.pages_per_s:.1f} pages/s), "
            f"{run.listing_pages} listing pages, {run.books_new} new, "
            f"{run.books_changed} changed, {run.books_unchanged} unchanged {record}s"
            + (f"; {run.not_modified} pages not modified (304)" if run.not_modified else ""),
            f"retries: {run.retries}; failed tasks: {sum(self.failed_by_reason.values())}",
        ]
        lines += [
            f"  failed {n:>5}  {reason}" for reason, n in sorted(self.failed_by_reason.items(), key=lambda x: -x[1])
        ]
        if self.chains_cut:
            lines.append(f"listing chains cut at max_pages ({self.config.max_pages}): {self.chains_cut}")
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
        if self.fields is not None:
            lines += self.fields.lines()
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
    queue.set_group_weights(config.detail_kind, config.weights_by_category(), default_weight=config.weights.default)
    queue.clear_group_budgets(config.detail_kind)
    if config.fetch.mode == "adaptive":
        forget_decisions(db, sorted(config.allowed_domains))


def seed(db: Database, config: CrawlConfig) -> bool:
    """Enqueue the start pages (:func:`~book_assets.crawl.discovery.start_tasks`); False when the first (the
    base URL) is already pending or in progress."""
    return make_queue(db, config).enqueue_many(start_tasks(config))[0].created


def drain(
    database_url: str,
    config: CrawlConfig,
    *,
    task_types: tuple[str, ...] | None = None,
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


@dataclass(frozen=True)
class CrawlRun:
    """One run of a crawl, built once when it begins and handed to every step after (in this process, in
    another, on another host): the resolved configuration and what the beginning did.

    A step that learns something (the deep budget's quotas) derives a new value (``dataclasses.replace``);
    nothing re-resolves the configuration after the run began, so every step of a run crawls alike whatever
    the environment of the process it runs in. Picklable: Dagster hands it from step to step, and keeps it,
    pickled, as the step's output. So it holds no credentials: where the queue is (the database's URL, its
    password in it) is handed beside it by whoever connects, the CLI from its settings and each Dagster step
    from its database resource.
    """

    config: CrawlConfig
    #: The run's start on the database's clock: its figures count what the queue did from here, and its
    #: elapsed time is read by the same clock, whichever step or host reports.
    since: datetime
    #: The crawl this run opened, or one its report was told to settle; the only one its report settles and
    #: whose trace it closes. None: a drain-only run or a retry of the failures.
    opened: OpenCrawl | None = None
    seeded: bool = False
    #: A retry of the failures (:func:`begin_retry`): its report decides no removals.
    retrying: bool = False
    #: Failed tasks moved back to pending before the drain.
    requeued: int = 0
    #: The deep budget's quota per category, set once discovery has finished (:func:`split_before_details`).
    quotas: Mapping[str, int] = field(default_factory=dict)
    #: The orchestrator's run that began it (Dagster's run id), on the crawl's root span; None: the CLI.
    run_id: str | None = None

    @property
    def started_on(self) -> date:
        """The day (UTC) the run started: the first whose archive its report indexes."""
        return self.since.astimezone(UTC).date()


def begin(database_url: str, config: CrawlConfig, *, run_id: str | None = None) -> CrawlRun:
    """Store the crawl's policies, open the crawl and its queue epoch (each URL enqueued once in the crawl) and
    seed the start page: the run, which starts when its crawl opens (on the database's clock). ``seeded`` is
    False when the start page was already queued; ``run_id``: the orchestrator's run (Dagster's run id), or None."""
    warm_up(config.workers, config.metrics_port)
    with Database(database_url) as db:
        prepare(db, config)
        opened = open_crawl(db, config.site.name)
        make_queue(db, config).begin_epoch()
        seeded = seed(db, config)
    return CrawlRun(config, since=opened.started_at, opened=opened, seeded=seeded, run_id=run_id)


def begin_retry(database_url: str, config: CrawlConfig, *, include_permanent: bool = False) -> CrawlRun:
    """A retry of the failures: the failed pages that can succeed moved back to pending (no new seed).

    Those are the pages of the crawl's site (its task types) failing now whose error kind can change and whose
    requeue is due (:attr:`CrawlConfig.requeue_policy`); ``include_permanent`` moves every failed task of its
    task types back instead (an operator's choice: a 404 that a site fixed). Another catalogue's failures stay
    for its own retry. The crawl's policies are stored first, as :func:`begin`
    does: the retry follows this run's politeness. It opens no queue epoch: a listing page it retries enqueues
    only what the last crawl has not.
    """
    with Database(database_url) as db:
        prepare(db, config)
        queue = make_queue(db, config)
        since = queue.now()
        if include_permanent:
            requeued = sum(queue.requeue(task_type=kind) for kind in config.task_types)
        else:
            requeued = requeue_due(db, config.requeue_policy, config.task_types)
    return CrawlRun(config, since=since, retrying=True, requeued=requeued)


def join(database_url: str, config: CrawlConfig) -> CrawlRun:
    """A run that drains what is pending and opens no crawl (a crawl's run elsewhere settles its own)."""
    with Database(database_url) as db:
        since = make_queue(db, config).now()
    return CrawlRun(config, since=since)


def split_before_details(
    database_url: str, run: CrawlRun, task_types: tuple[str, ...], *, workers: int | None, progress: bool = False
) -> tuple[CrawlRun, WorkerStats, tuple[str, ...]]:
    """The deep budget's rule: what must be done before the detail pages are drained; the run (with its
    quotas), what that did and the types left to drain.

    A budget is split across the categories discovery found, so a budgeted crawl drains its listing pages
    first (with ``workers`` workers), then splits the budget, and only then are detail pages drained.
    Otherwise nothing comes first and every type is left, listing and detail pages interleaved by the queue.
    """
    stats = WorkerStats(worker_id="all")
    detail = run.config.detail_kind
    if run.config.deep_budget is None or detail not in task_types:
        return run, stats, task_types
    listings = tuple(kind for kind in task_types if kind in run.config.listing_kinds)
    if listings:
        stats.merge(drain(database_url, run.config, task_types=listings, workers=workers, progress=progress))
    with Database(database_url) as db:
        quotas = apply_budget(db, run.config)
    return replace(run, quotas=quotas), stats, (detail,)


def work(
    database_url: str,
    run: CrawlRun,
    *,
    task_types: tuple[str, ...] | None = None,
    workers: int | None = None,
    progress: bool = False,
) -> tuple[CrawlRun, WorkerStats]:
    """Drain the queue's ``task_types`` (None: every page kind of the site) with this process's workers
    (:func:`split_before_details` first)."""
    task_types = run.config.task_types if task_types is None else task_types
    run, stats, left = split_before_details(database_url, run, task_types, workers=workers, progress=progress)
    stats.merge(drain(database_url, run.config, task_types=left, workers=workers, progress=progress))
    return run, stats


# --------------------------------------------------------------------------- the crawl's end, step by step


def finish(database_url: str, run: CrawlRun, stats: WorkerStats) -> CrawlReport:
    """The crawl's end, in this order for the CLI and Dagster alike: the days' archive indexed, the fields
    judged, the figures read, the removals settled, the finished tasks pruned, the crawl's trace closed; what
    the run did."""
    archive = index_archive(run)
    with Database(database_url) as db:
        queue = make_queue(db, run.config)
        fields = judge_fields(db, queue, run)
        report = replace(read_report(db, queue, run, stats, archive), fields=fields)
        report = replace(
            report, removals=settle_removals(db, queue, run), tasks_pruned=prune_finished(queue, run.config)
        )
    close_trace(run, report)
    return report


def index_archive(run: CrawlRun) -> list[ArchiveSummary]:
    """Index the WARC archive of each day the run may have written (none with ``warc`` off)."""
    if not run.config.archive_dir:
        return []
    return index_days(run.config.archive_dir, crawl_days(run.started_on))


def judge_fields(db: Database, queue: TaskQueue, run: CrawlRun) -> FieldJudgement | None:
    """Judge each field of the run's crawl (fill rate, value shape) against the last good crawl's, and write the
    held values of the fields that did not drift (:func:`book_assets.store.drift.judge`); before the figures are
    read, so they count the versions that recorded them. Only the run that opened (or settles) a crawl judges
    it; a retry of the failures sees only the pages it retried and judges nothing."""
    if run.opened is None or run.retrying or not run.config.site.drift_and_removals:
        return None
    failures = queue.failures_since(run.opened.started_at, run.config.detail_kind, CONTRACT_FAILURES)
    config = run.config
    return judge(db, run.opened.id, run.opened.started_at, failures, limits=config.drift_limits)


def judge_again(db: Database, queue: TaskQueue, config: CrawlConfig, *, by: str = "reextract") -> list[Rejudgement]:
    """Judge every crawl whose drift no one accepted again from what is stored (after ``reextract`` rebuilt its
    pages with a fixed parser), as :func:`judge_fields` judged it: its book pages and its contract failures
    between its start and its end (:func:`book_assets.store.drift.rejudge`)."""

    def failures_of(since: datetime, until: datetime | None) -> list[tuple[str, str]]:
        return queue.failures_since(since, config.detail_kind, CONTRACT_FAILURES, until=until)

    return rejudge(db, failures_of, limits=config.drift_limits, by=by)


def read_report(
    db: Database, queue: TaskQueue, run: CrawlRun, stats: WorkerStats, archive: list[ArchiveSummary]
) -> CrawlReport:
    """What the run did, every count read from the database (removals and pruning are the steps after)."""
    config = run.config
    figures = RunFigures.read(db, queue, run.since, config.site)
    return CrawlReport(
        config=config,
        stats=stats,
        counts=config.site.record_counts(db),
        run=figures,
        failed_by_reason=queue.failed_kinds_since(run.since),
        seeded=run.seeded,
        requeued=run.requeued,
        quotas=dict(run.quotas),
        budgets=queue.budget_report(config.detail_kind) if run.quotas else [],
        elapsed_s=(queue.now() - run.since).total_seconds(),
        decisions=list_decisions(db) if config.fetch.mode == "adaptive" else [],
        archive=archive,
        robots=list_robots(db, sorted(config.allowed_domains), config.crawl_delay_max_s),
        politeness=[p for d in politeness_domains(config) if (p := queue.domain_policy(d))],
        crawl_id=run.opened.id if run.opened is not None else None,
        chains_cut=chains_cut_since(db, run.since, config.max_pages),
        start_failure=start_failure(queue, run, figures),
    )


def start_failure(queue: TaskQueue, run: CrawlRun, figures: RunFigures) -> str | None:
    """The start page's error when it yielded nothing, else None.

    A run that opened a crawl and completed no listing page did not get past its start page (nothing else is
    queued before it completes), so its listing failures are the start page's: fetched and refused (a
    maintenance page, a start page that links nothing to follow) or never fetched (its retries ran out).
    """
    if run.opened is None or run.retrying or figures.listing_pages:
        return None
    kinds = [str(kind) for kind in ErrorKind]
    errors = [e for listing in run.config.listing_kinds for e in queue.failures_since(run.since, listing, kinds)]
    return errors[0][1] if errors else None


def settle_removals(db: Database, queue: TaskQueue, run: CrawlRun) -> Removals:
    """Decide removals from what the run's crawl's listing pages showed (:mod:`book_assets.store.removals`).

    Only the crawl the run opened or was handed, and only once its queue holds no listing page a worker
    could still process: a drain-only run (its crawl's own run perhaps still at work on another host)
    and a report that comes early leave the crawl open, for its run to settle.
    """
    if run.retrying:
        return settle(db, None, undecided="a retry of the failures sees only the pages it retried")
    if run.opened is None:
        return Removals(decided=False, reason="this run opened no crawl; the run that opened it settles it")
    left = queue.outstanding(run.config.listing_kinds)
    if left:
        return Removals(decided=False, reason=f"{left} listing pages still queued; the crawl stays open")
    site = run.config.site
    if not site.drift_and_removals:
        return Removals(decided=False, reason=close_undecided(db, run.opened, f"site {site.name} keeps no removals"))
    return settle(db, run.opened, categories=run.config.categories)


def prune_finished(queue: TaskQueue, config: CrawlConfig) -> int:
    """Delete the finished tasks older than the retention (none when it is 0), in short batches; the books,
    their versions, the pages and the archive are data and stay."""
    days = config.task_retention_days
    return queue.prune(days * 86400) if days > 0 else 0


def close_trace(run: CrawlRun, report: CrawlReport) -> None:
    """Record the crawl's root span, by the run that opened (or settles) it; a retry of the failures records
    none (its crawl's trace was closed by its own run)."""
    if run.opened is not None and not run.retrying:
        record_crawl(run.opened, report.span_attributes(), report.failure, run.run_id)


def crawl_days(first: date) -> list[date]:
    """The days (UTC) from ``first`` to today: those a crawl that started on ``first`` may have archived."""
    today = datetime.now(UTC).date()
    return [first + timedelta(days=n) for n in range((today - first).days + 1)]


def crawl(database_url: str, config: CrawlConfig, *, progress: bool = False) -> CrawlReport:
    """A whole crawl: begin, work until drained, finish."""
    return finish(database_url, *work(database_url, begin(database_url, config), progress=progress))


def retry_failed(database_url: str, config: CrawlConfig, *, include_permanent: bool = False) -> CrawlReport:
    """A retry of the failures (:func:`begin_retry`), worked until drained, finished."""
    run = begin_retry(database_url, config, include_permanent=include_permanent)
    return finish(database_url, *work(database_url, run))


def apply_budget(db: Database, config: CrawlConfig) -> dict[str, int]:
    """Split ``deep_budget`` across the pending detail tasks' categories by weight; set the queue budgets."""
    from book_assets.scheduling.quotas import split_budget

    assert config.deep_budget is not None
    queue = make_queue(db, config)
    quotas = split_budget(config.deep_budget, config.weights, queue.pending_by_group(config.detail_kind))
    queue.set_group_budgets(config.detail_kind, quotas)
    return quotas
