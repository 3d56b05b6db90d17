"""A crawl worker: one process, one browser (or HTTP client), C pages in flight, one DB connection.

Each task goes claim → politeness slot → fetch → handle → complete. The fetch is the fetch mode's strategy
(:mod:`book_assets.crawl.fetch_modes`: http, browser, adaptive). Plain fetches of pages fetched before are
conditional (``conditional_requests``, :mod:`book_assets.store.pages`): a 304 keeps a record as stored and parses
a listing page's stored copy again. Browser fetches are not. What a page is, how it parses and where its records
go is the site's (``config.site``, :mod:`book_assets.sites.site`): the worker knows each page kind's role only.

The loop claims as many tasks as it has free page slots (fairly scheduled by the queue) once half of them are
free (:func:`refill_batch`), sleeps until each task's politeness slot, fetches, validates, stores, and
finishes the task. A task waiting for its slot holds no page slot (:func:`claim_room`), so a worker keeps
claiming other domains' ready tasks while it waits. Pages that finish while a completion commits share the
next transaction (:class:`~book_assets.queue.GroupCommit`). Every database call runs on a single dedicated
thread so the process's one connection is never shared between threads, while the event
loop keeps the browser busy. On SIGTERM/SIGINT it stops claiming, lets in-flight pages finish for a grace
period, and hands back (releases) whatever is left — nothing stays in progress without a live lease.

What happens on the way is emitted once into the worker's :attr:`Worker.events` (:mod:`book_assets.crawl.events`),
which its stats, metrics and task spans subscribe to; what it stores is counted by the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import resource
import signal
import socket
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from datetime import datetime
from typing import Any, TypeVar

from book_assets.archive.writer import ArchiveWriter
from book_assets.crawl.autoscale import Autoscaler, LoadMonitor
from book_assets.crawl.config import CrawlConfig, make_queue
from book_assets.crawl.discovery import (
    ListingTrap,
    check_listing,
    follow_chain,
    listing_record,
    listing_tasks,
    refused_links,
)
from book_assets.crawl.events import (
    Claimed,
    Claiming,
    Completed,
    Ended,
    Events,
    Failed,
    FetchEnded,
    Handled,
    IntervalSet,
    LeaseGone,
    Parsed,
    Released,
    StageEntered,
    Started,
    Stopped,
    Tick,
    WaitedForSlot,
    subscribe_worker,
)
from book_assets.crawl.fetch_modes import Fetched, fetch_strategy
from book_assets.crawl.health import HealthFile
from book_assets.crawl.robots import RobotsGate, Verdict
from book_assets.crawl.stats import WorkerStats
from book_assets.db.connection import Database, Refused
from book_assets.observe.metrics import worker_metrics
from book_assets.observe.tracing import Outcome, Stage, task_traces
from book_assets.queue import ClaimResult, GroupCommit, LeaseLost, Task
from book_assets.scraper.errors import ErrorKind, FetchError, ParseError, refusal_kind, url_too_long
from book_assets.scraper.fetching import FetchResult, Validators
from book_assets.scraper.softblock import soft_block, soft_block_retry_s
from book_assets.sites.site import Listing, Role, Site, Stored, kind_named
from book_assets.store.held import HELD_KINDS
from book_assets.store.pages import StaleCopy, forget_page, page_validators, stored_copy, write_page
from book_assets.store.removals import record_listing
from book_assets.urls import canonical_url

log = logging.getLogger(__name__)
T = TypeVar("T")
#: Responses by which a server asks for fewer requests: AutoThrottle backs off on them.
THROTTLED_STATUSES = frozenset({429, 503})


def refuse_soft_block(site: Site, task: Task, page: FetchResult) -> None:
    """Raise a ``soft_block`` :class:`FetchError` when ``page`` is a 200 that is not the page of ``site`` that
    ``task`` asked for (a challenge, a login wall, an empty body: :func:`~book_assets.scraper.softblock.soft_block`)."""
    if page.not_modified:
        return
    reason = soft_block(page.status, page.headers, page.body, kind_named(site, task.task_type).markers)
    if reason is not None:
        raise FetchError(ErrorKind.SOFT_BLOCK, reason, url=page.final_url, status=page.status)


def refuse_too_long(page: FetchResult, max_url_length: int) -> None:
    """Raise a ``url_too_long`` :class:`FetchError` when ``page`` was served from a URL longer than
    ``max_url_length``: a redirect the browser followed itself (the HTTP fetcher follows none that long)."""
    if len(page.final_url) > max_url_length:
        error = url_too_long("redirected to a URL", page.final_url, max_url_length)
        raise FetchError(ErrorKind.URL_TOO_LONG, error, url=page.final_url)


def refill_batch(capacity: int) -> int:
    """Free page slots the loop waits for before it claims again: half of them, at least one.

    A claim is the queue's dearest statement and costs nearly as much for one task as for many
    (``benchmarks/queue_bench.py``), so refilling each slot as its page finishes would make claims most of
    the database's work per page; claiming for half the slots at once spends a third less of the
    database's CPU per page of an http crawl; the autoscaler adds slots where waiting for half costs
    throughput (a slow site, CPU to spare).
    """
    return max(1, capacity // 2)


#: Tasks a worker may hold waiting for their politeness slots, per page slot (see :func:`claim_room`).
SLOT_WAITERS_PER_PAGE = 8
#: How long a finished page may wait for the next ones to share its transaction (:meth:`Worker._commit_linger_s`).
COMMIT_LINGER_S = 0.1


def claim_room(capacity: int, held: int, waiting: int) -> int:
    """How many more tasks a worker of ``capacity`` page slots may claim, holding ``held`` tasks of which
    ``waiting`` wait for their politeness slot.

    A task waiting for its slot costs a lease and a timer, not a page: it takes a page slot only when its slot
    comes. If waits held page slots, a worker of C pages would serve at most C politely limited domains per
    interval however many had work ready (a claim hands a domain's next slot out as soon as the previous one
    passes, so a task waits up to an interval): 20 sites at a 2 s interval ran at half their politeness bound
    with 16 pages in flight (``docs/growth.md``). Waiting tasks are capped at ``SLOT_WAITERS_PER_PAGE`` per
    page slot, which bounds the leases a worker holds, and the page slots cap the tasks that are not waiting.
    A slot that comes while every page slot is busy is still taken (its domain's spacing is kept only if the
    request starts on it); the worker claims nothing until it is back under its capacity.
    """
    busy = held - waiting
    return max(0, min(capacity - busy, capacity * (1 + SLOT_WAITERS_PER_PAGE) - held))


class _HandedBack(Exception):
    """The task went back to the queue unattempted (:meth:`Worker._obey_robots`)."""


class Worker:
    """Drain the queue with up to ``config.fetch.concurrency`` pages in flight (autoscaled from
    ``config.min_concurrency``, see :mod:`book_assets.crawl.autoscale`)."""

    def __init__(
        self,
        database_url: str,
        config: CrawlConfig,
        *,
        worker_id: str | None = None,
        until_drained: bool = True,
        task_types: tuple[str, ...] | None = None,
        max_tasks: int | None = None,
        grace_s: float = 10.0,
    ) -> None:
        self.config = config
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}"
        self.until_drained = until_drained
        self.site = config.site
        self.task_types = config.task_types if task_types is None else task_types
        self.max_tasks = max_tasks
        self.grace_s = grace_s
        self.db = Database(database_url, application_name=f"book-pipeline worker {self.worker_id}")
        self.queue = make_queue(self.db, config)
        self.stats = WorkerStats(worker_id=self.worker_id, worker_ids=[self.worker_id])
        self._db_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="db")
        # Pages finished while a completion commits go together in the next transaction.
        self._commits = GroupCommit(self.queue, self._db, linger=self._commit_linger_s)
        self._stopping = asyncio.Event()
        self._in_flight: dict[int, Task] = {}
        #: No claim before this ``time.monotonic()`` reading: the last claim left work that waits for politeness
        #: slots, and the queue said when a claim would find it (``ClaimResult.retry_in_s``). Claiming at each
        #: page's end instead would hand out one domain's slot a claim, and a claim is the queue's dearest
        #: statement; waiting, one claim takes every domain whose slot came within reach meanwhile.
        self._claim_after = 0.0
        #: Tasks waiting for their domain's robots.txt, which takes a politeness slot of its own: like a task
        #: waiting for its slot, one holds no page slot (:func:`claim_room`).
        self._at_robots: set[int] = set()
        self._jobs: dict[int, asyncio.Task[None]] = {}
        self._claimed = 0
        self._claimed_at: dict[int, float] = {}  # task id -> time.monotonic() when its claim was sent
        # task id -> the validators its conditional fetch sends, read with its claim (one query per batch)
        self._claimed_validators: dict[int, Validators] = {}
        #: Where the worker (and its fetch strategy) reports what happens; its stats, metrics and task spans
        #: (OpenTelemetry; hooks that do nothing when off) subscribe, in that order. Subscribe more before :meth:`run`.
        self.events = Events()
        self._emit = self.events.emit
        self._strategy = fetch_strategy(config, self._emit, db=self.db, run=self._db, database_url=database_url)
        self._archive: ArchiveWriter | None = None  # the WARC files of this process (warc on)
        self._scaler = Autoscaler(min(config.min_concurrency, config.fetch.concurrency), config.fetch.concurrency)
        self._robots = RobotsGate(config, self.queue, self.worker_id, self._db) if config.obey_robots else None
        subscribe_worker(self.events, self.stats, worker_metrics(config.fetch.mode), task_traces(), self._strategy)
        if config.health_file is not None:
            HealthFile(config.health_file).subscribe(self.events)

    async def _db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._db_thread, lambda: fn(*args, **kwargs))

    def stop(self) -> None:
        """Stop claiming; in-flight pages finish (or are released after the grace period)."""
        self._stopping.set()

    async def run(self) -> WorkerStats:
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
                loop.add_signal_handler(sig, self.stop)
        running: set[asyncio.Task[None]] = set()
        history: list[int] = []
        try:
            self.stats.started_at = await self._db(self.queue.now)  # what the database's figures count from
            async with AsyncExitStack() as stack:
                if self.config.archive_dir is not None:
                    self._archive = stack.enter_context(ArchiveWriter(self.config.archive_dir))
                await self._strategy.open(stack)
                if self._robots is not None:
                    stack.push_async_callback(self._robots.close)
                monitor = LoadMonitor(self._scaler, busy=lambda: len(running) - self._waiting_for_slot())
                monitor.start()
                try:
                    await self._loop(running)
                finally:
                    await monitor.stop()
                    history = monitor.history
                    await self._shutdown(running)
                    self._emit(Tick(0, idle=True))  # done with pages: what it recorded goes out
        finally:
            self._db_thread.shutdown(wait=True)
            self.db.close()
            usage = resource.getrusage(resource.RUSAGE_SELF)
            # The browsers are closed by now: their processes ended, waited for by Playwright's driver, which the
            # worker waited for in turn, so their CPU is among the worker's children's.
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            self._emit(
                Stopped(
                    concurrency=history,
                    fetcher=self._strategy.fetcher_stats(),
                    browsers=self._strategy.browsers,
                    elapsed_s=time.monotonic() - started,
                    cpu_s=usage.ru_utime + usage.ru_stime,
                    children_cpu_s=children.ru_utime + children.ru_stime,
                    peak_rss_mb=usage.ru_maxrss / 1024,
                )
            )
        return self.stats

    async def _loop(self, running: set[asyncio.Task[None]]) -> None:
        heartbeat_every = max(1.0, self.config.lease_s / 3)
        last_heartbeat = time.monotonic()
        while not self._stopping.is_set():
            wait_s, retry_in_s = 0.5, None
            capacity = self._scaler.desired
            free = claim_room(capacity, len(running), self._holding_no_page())
            remaining = None if self.max_tasks is None else self.max_tasks - self._claimed
            if remaining is not None:
                free = min(free, remaining)
            held_back_s = self._claim_after - time.monotonic()
            if held_back_s > 0:
                wait_s, retry_in_s = min(held_back_s, 1.0), held_back_s
            elif free > 0 and (free >= refill_batch(capacity) or not running or free == remaining):
                claim_sent = time.monotonic()
                result, validators = await self._db(self._claim_with_validators, free)
                self._claimed_validators.update(validators)
                for task in result.tasks:
                    self._claimed += 1
                    self._claimed_at[task.id] = claim_sent
                    self._in_flight[task.id] = task
                    job = asyncio.create_task(self._process(task))
                    self._jobs[task.id] = job
                    running.add(job)
                if result.retry_in_s is not None:
                    retry_in_s = result.retry_in_s
                    wait_s = min(max(result.retry_in_s, 0.01), 1.0)
                    if len(result.tasks) < free:
                        # The rest of the claimable work waits for politeness slots: a claim before the queue's
                        # moment would find one domain at a time, a claim per page (_claim_after).
                        self._claim_after = time.monotonic() + result.retry_in_s
                if result.tasks and claim_room(capacity, len(running), self._holding_no_page()) > 0:
                    continue  # there may be more claimable right now
            if not running:
                if self.max_tasks is not None and self._claimed >= self.max_tasks:
                    return
                if self.until_drained and await self._db(self._drained):
                    return
                self._emit(Tick(0, idle=True))  # what the worker recorded is out before it waits
                await self._wait_for_work(retry_in_s)
                continue
            done, _ = await asyncio.wait(running, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
            running.difference_update(done)
            self._emit(Tick(len(running)))
            if time.monotonic() - last_heartbeat > heartbeat_every and self._in_flight:
                lost = await self._db(self._heartbeat, list(self._in_flight.values()))
                self._drop(lost)
                last_heartbeat = time.monotonic()

    def _waiting_for_slot(self) -> int:
        """Tasks held whose politeness slot, or whose domain's robots.txt, has not come yet (they hold no page
        slot, :func:`claim_room`). A task whose domain's robots.txt another task is fetching waits for that fetch,
        which may wait for its own slot: holding a page slot meanwhile, a crawl's start would reach its domains a
        few at a time."""
        now = time.monotonic()
        return sum(
            1 for task in self._in_flight.values() if task.id in self._at_robots or task.seconds_until_slot(now) > 0
        )

    def _holding_no_page(self) -> int:
        """Tasks held that take no page slot (:func:`claim_room`): waiting for their politeness slot or robots.txt
        (:meth:`_waiting_for_slot`), or finished and waiting for others to share their commit (``GroupCommit``'s
        linger), which holds back no claim."""
        return self._waiting_for_slot() + self._commits.lingering

    def _commit_linger_s(self) -> float:
        """How long a finished page waits for others to commit with it: ``COMMIT_LINGER_S`` in a worker bound by
        politeness, with other tasks in flight to share it; else none.

        Such a worker holds tasks waiting for their slots and finishes its pages tens of milliseconds apart, so
        each would take a transaction of its own (BEGIN, the completion, COMMIT and its WAL flush). A waiting page
        holds no page slot, so the wait holds back no claim; it costs the page's commit that much latency. A worker
        with nothing waiting for a slot is bound by its page slots: it commits at once, and batches what piles up
        meanwhile."""
        others = len(self._in_flight) - self._commits.pending
        return COMMIT_LINGER_S if others and self._waiting_for_slot() else 0.0

    def _role(self, task_type: str) -> Role:
        return kind_named(self.site, task_type).role

    def _claim(self, n: int) -> ClaimResult:
        """Details by weighted round-robin over categories; with every type, listings and details interleaved
        by the ratio."""
        roles = {kind: self._role(kind) for kind in self.task_types}
        if set(self.task_types) == set(self.config.task_types) and len(set(roles.values())) > 1:
            weights = {kind: 1 if role is Role.LISTING else self.config.interleave for kind, role in roles.items()}
            return self.queue.claim(self.worker_id, n, scheduled=True, type_weights=weights)
        details_only = set(roles.values()) == {Role.DETAIL}
        return self.queue.claim(self.worker_id, n, task_types=self.task_types, scheduled=details_only)

    def _claim_with_validators(self, n: int) -> tuple[ClaimResult, dict[int, Validators]]:
        """:meth:`_claim`, and the stored validators of the claimed pages when their fetches may be
        conditional (plain fetches with ``conditional_requests`` on), by task id: one query for the batch."""
        sent = time.monotonic()
        self._emit(Claiming(self.db))
        result = self._claim(n)
        self._emit(Claimed(len(result.tasks), time.monotonic() - sent))
        if not result.tasks or not self.config.conditional_requests or not self._strategy.conditional:
            return result, {}
        found = page_validators(self.db, sorted({str(t.payload["url"]) for t in result.tasks}))
        by_task = {t.id: found[str(t.payload["url"])] for t in result.tasks if str(t.payload["url"]) in found}
        return result, by_task

    def _drained(self) -> bool:
        return self.queue.drained(self.task_types)

    def _heartbeat(self, tasks: list[Task]) -> list[int]:
        """Extend every in-flight lease (one statement); returns the tasks whose lease is gone."""
        return sorted(self.queue.heartbeat_all(tasks))

    def _drop(self, task_ids: list[int]) -> None:
        """Abandon tasks whose lease is gone: another worker owns them now, so this one stops working on them."""
        for task_id in task_ids:
            job, task = self._jobs.get(task_id), self._in_flight.pop(task_id, None)
            if job is not None and not job.done():
                job.cancel()
                if task is not None:  # a job not done is in flight
                    self._emit(LeaseGone(task))

    async def _wait_for_work(self, retry_in_s: float | None) -> None:
        """Idle: sleep until work is enqueued (NOTIFY) or comes due, at most the queue's idle timeout, or a stop."""
        timeout_s = await self._db(self.queue.idle_wait_s, self.task_types, retry_in_s)
        await self.queue.wait_for_work_async(timeout_s, run=self._db, stop=self._stopping)

    async def _shutdown(self, running: set[asyncio.Task[None]]) -> None:
        """Let in-flight pages finish for ``grace_s``, then release the rest to the queue."""
        pending: set[asyncio.Task[None]] = set()
        if running:
            _done, pending = await asyncio.wait(running, timeout=self.grace_s)
        # Taken before cancelling: a cancelled job leaves the in-flight set on its way out.
        leftover = [self._in_flight[i] for i, job in self._jobs.items() if job in pending and i in self._in_flight]
        for job in pending:
            job.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if leftover:
            released = await self._db(self.queue.release, leftover)
            self._emit(Released(int(released)))
            self._in_flight.clear()

    async def _process(self, task: Task) -> None:
        """Fetch, validate, store and finish one task; whatever happens, it leaves the in-flight set."""
        self._emit(Started(task, self._claimed_at.get(task.id)))
        # How it ends, unless a failure was recorded: abandoned when cancelled (or its failure could not be).
        outcome = Outcome.ABANDONED
        try:
            await self._attempt(task)
            outcome = Outcome.COMPLETED
        except asyncio.CancelledError:
            raise
        except _HandedBack:
            outcome = Outcome.HANDED_BACK
        except LeaseLost:  # another worker owns the task now; it will finish it
            self._emit(LeaseGone(task))
            outcome = Outcome.LEASE_LOST
        except Refused as exc:  # the database refused what the page would store: that page fails for good
            kind = refusal_kind(exc.sqlstate)
            with contextlib.suppress(Exception):
                await self._fail(self._in_flight.get(task.id, task), kind, f"{kind}: {exc}")
        except Exception as exc:  # a bug or an outage: record it on the task, keep the worker alive
            log.exception("task %s (%s) failed unexpectedly", task.id, task.payload.get("url"))
            with contextlib.suppress(Exception):
                current = self._in_flight.get(task.id, task)
                await self._fail(current, ErrorKind.INTERNAL, f"{type(exc).__name__}: {exc}")
        finally:
            self._emit(Ended(task, outcome))
            self._in_flight.pop(task.id, None)
            self._jobs.pop(task.id, None)
            self._claimed_at.pop(task.id, None)
            self._claimed_validators.pop(task.id, None)

    async def _attempt(self, task: Task) -> None:
        """Claimed → politeness slot → fetch → handle → complete (or fail)."""
        obeyed = await self._obey_robots(task)
        if obeyed is None:
            return
        validators = self._claimed_validators.pop(task.id, None)
        self._emit(StageEntered(task, Stage.POLITENESS_WAIT))
        await self._strategy.prepare(obeyed)
        waited = time.monotonic()
        task = await self.queue.wait_for_slot_async(obeyed, run=self._db)
        sent = time.monotonic()
        self._emit(WaitedForSlot(task, sent - waited))
        try:
            self._emit(StageEntered(task, Stage.FETCH))
            fetched = await self._fetch_paced(task, validators)
        except FetchError as exc:
            self._emit(FetchEnded(task, exc.status, time.monotonic() - sent, kind=exc.kind))
            retry_after_s = exc.retry_after
            if exc.kind is ErrorKind.SOFT_BLOCK:
                await self._back_off(task)
                cap_s = self.config.autothrottle_max_interval_s
                retry_after_s = soft_block_retry_s(task.attempt, task.max_attempts, cap_s)
            await self._fail(task, exc.kind, str(exc), retry_after_s=retry_after_s)
            return
        page = fetched.page
        self._emit(FetchEnded(task, page.status, page.elapsed_s, len(page.body), browser=fetched.browser))
        if fetched.page.not_modified and validators is not None:
            if self._archive is not None:
                await self._archive.write(fetched.page)
            await self._handle_not_modified(task, fetched.page, validators)
            return
        try:
            await self._handle_or_render(task, fetched)
        except FetchError as exc:
            await self._fail(task, exc.kind, str(exc), retry_after_s=exc.retry_after)
        except ParseError as exc:
            kind = ErrorKind.NOT_A_LISTING_PAGE if self._role(task.task_type) is Role.LISTING else exc.kind
            await self._fail(task, kind, f"{kind}: {exc}", kept=fetched.page if kind in HELD_KINDS else None)

    async def _handle_or_render(self, task: Task, fetched: Fetched) -> None:
        """Handle the page; served HTML that does not parse but may once rendered is rendered before it fails,
        and a render that parses tells the strategy that this page type needs rendering."""
        try:
            await self._handle(task, fetched.page)
        except ParseError:
            if not fetched.renderable:
                raise
            self._emit(StageEntered(task, Stage.RENDER))
            await self._handle(task, await self._strategy.render(task))
            self._strategy.rendering_needed(task)

    async def _obey_robots(self, task: Task) -> Task | None:
        """The task to fetch once robots.txt is consulted; None when it was failed instead, unrequested."""
        if self._robots is None:
            return task
        self._emit(StageEntered(task, Stage.ROBOTS))
        url = str(task.payload["url"])
        if self.queue.slot_wait_s(task) is None:
            # Too late to start on its slot (a claim that waited on a lock, a busy worker): a fresh one, as the fetch
            # would take, which a robots.txt fetch may go out on. Left to robots.txt, it would take the domain's
            # next slot, an interval on, and the task the one after.
            task = await self._db(self.queue.reslot, task)
        self._at_robots.add(task.id)
        try:
            check = await self._robots.check(url, claimed_at=self._claimed_at.get(task.id, 0.0), slot_due=task.slot_due)
        finally:
            self._at_robots.discard(task.id)
        if check.verdict is Verdict.DISALLOWED:
            kind = ErrorKind.ROBOTS_DISALLOWED
            await self._fail(task, kind, f"{kind}: {check.reason}")
            return None
        if check.verdict is Verdict.UNREACHABLE:
            kind = ErrorKind.ROBOTS_UNREACHABLE
            await self._fail(task, kind, f"{kind}: {check.reason}", retry_after_s=check.retry_in_s)
            return None
        if check.took_slot:
            # Its slot went to robots.txt: it goes back to the queue, which hands it out on one of its domain's next
            # slots. Held for that slot (an interval), each of a crawl's new domains would keep a task out of the
            # worker's room for an interval, and a crawl of many sites would reach them a few at a time.
            await self._db(self.queue.release, [task])
            raise _HandedBack
        return await self._db(self.queue.reslot, task) if check.reslot else task

    async def _fetch_paced(self, task: Task, validators: Validators | None) -> Fetched:
        """The strategy's fetch, refused as a soft block when its 200 is not the page (:func:`soft_block`),
        reporting each response's latency to the domain's AutoThrottle when it is on.

        Only responses are reported (a timeout or a reset says nothing about the server's pace): a 2xx or a
        304 as ok, a 429 or 503 as throttled, any other status (and a soft block) as not ok: it may raise the
        interval, not lower it. A soft block backs its domain off in :meth:`_attempt`, throttled or not.
        """
        started = time.monotonic()
        try:
            fetched = await self._strategy.fetch(task, validators)
            refuse_soft_block(self.site, task, fetched.page)
            refuse_too_long(fetched.page, self.config.max_url_length)
        except FetchError as exc:
            if self.config.autothrottle and exc.status is not None:
                throttled = exc.status in THROTTLED_STATUSES
                await self._observe(task, time.monotonic() - started, throttled=throttled, ok=False)
            raise
        if self.config.autothrottle:
            await self._observe(task, fetched.page.elapsed_s, throttled=False, ok=True)
        return fetched

    async def _back_off(self, task: Task) -> None:
        """A soft block from ``task``'s domain: its interval widens for every worker (:meth:`TaskQueue.back_off`)."""
        interval = await self._db(
            self.queue.back_off, task.domain, max_interval_s=self.config.autothrottle_max_interval_s
        )
        if interval is not None:
            self._emit(IntervalSet(task.domain, interval))

    async def _observe(self, task: Task, latency_s: float, *, throttled: bool, ok: bool) -> None:
        interval = await self._db(self.queue.observe, task.domain, latency_s, throttled=throttled, ok=ok)
        if interval is not None:
            self._emit(IntervalSet(task.domain, interval))

    async def _handle(self, task: Task, fetched: FetchResult) -> None:
        started = time.monotonic()
        if self._archive is not None:  # archived before parsing: every page used, parsable or not
            await self._archive.write(fetched)
        if self._role(task.task_type) is Role.LISTING:
            await self._handle_listing(task, fetched)
        else:
            await self._handle_detail(task, fetched)
        self._emit(Handled(task, time.monotonic() - started))

    async def _fail(
        self,
        task: Task,
        kind: ErrorKind,
        error: str,
        *,
        retry_after_s: float | None = None,
        kept: FetchResult | None = None,
        validated_at: datetime | None = None,
    ) -> None:
        """Fail ``task`` as ``kind``: retried later when the kind is retryable, failed for good otherwise.

        ``kept`` is the response that failed, stored with its body as the task's page in the failure's
        transaction (under its lease), for ``reextract`` to parse again once the parser is fixed; confirmed at
        ``validated_at`` when a 304 answered for it.
        """
        url = str(task.payload["url"])
        keep = (
            None
            if kept is None
            else functools.partial(write_page, url=url, fetched=kept, keep_body=True, validated_at=validated_at)
        )
        outcome = await self._db(
            self.queue.fail,
            task,
            error[:2000],
            kind=kind,
            retryable=kind.retryable,
            retry_after_s=retry_after_s,
            work=keep,
        )
        self._emit(Failed(task, kind, outcome))

    async def _complete(self, task: Task, store: Callable[[Any], T]) -> T:
        """Complete ``task`` under its current lease in the transaction that runs ``store`` (shared with the pages
        finishing meanwhile, :class:`~book_assets.queue.GroupCommit`); returns what ``store`` returned."""
        started = time.monotonic()
        result = await self._commits.complete_with(self._in_flight.get(task.id, task), store)
        self._emit(Completed(task, time.monotonic() - started))
        return result

    @contextlib.contextmanager
    def _parsing(self, task: Task) -> Iterator[None]:
        """Report the CPU the parse in the block took on this thread (a parse that raises too): the parse runs
        between two awaits, so no other task's work is in it."""
        cpu = time.thread_time()
        try:
            yield
        finally:
            self._emit(Parsed(task, time.thread_time() - cpu))

    async def _handle_listing(self, task: Task, fetched: FetchResult, validated_at: datetime | None = None) -> None:
        """Enqueue what the listing page links to; store the page (its copy answers a later 304) and the records
        it carries, and complete the task in one transaction, under the task's lease."""
        self._emit(StageEntered(task, Stage.PARSE))
        with self._parsing(task):
            page = self._parse_listing(fetched)
        outcome = listing_tasks(task.payload, page, self.config)
        check_listing(task.payload, page, outcome, self.config)
        self._emit(StageEntered(task, Stage.STORE))
        created = await self._db(self.queue.enqueue_many, outcome.tasks) if outcome.tasks else []
        url = str(task.payload["url"])
        if outcome.too_long:  # each a failure of its own; the rest of the page goes on
            refused = refused_links(outcome, task.id, url, self.config.max_url_length)
            await self._db(self.queue.record_failed, refused, kind=ErrorKind.URL_TOO_LONG)
        new_records = sum(
            r.created for t, r in zip(outcome.tasks, created, strict=True) if self._role(t.task_type) is Role.DETAIL
        )
        step = follow_chain(task.payload, outcome, new_records, self.config)
        if isinstance(step, ListingTrap):
            await self._fail(task, ErrorKind.LISTING_TRAP, f"{ErrorKind.LISTING_TRAP}: {step.reason}")
            return
        if step is not None:
            await self._db(self.queue.enqueue_many, [step])
        record = listing_record(task.payload, page, outcome, drop_query_params=self.config.drop_query_params)

        def _store(cur: Any) -> None:
            write_page(cur, url, fetched, keep_body=True, validated_at=validated_at)
            if page.records:
                self.site.write_listing(cur, page, fetched)
            if record is not None:  # what the page listed, for the crawl's removals
                record_listing(cur, record)

        await self._complete(task, _store)

    def _parse_listing(self, fetched: FetchResult) -> Listing:
        """The listing the served HTML shows, or, when it is no listing and the page was rendered, the one the
        rendered DOM shows (quotes' ``/js/``, whose quotes only its script writes): as a detail page, the served
        HTML is preferred whenever it is a complete page."""
        try:
            return self.site.parse_listing(fetched.html, fetched.final_url)
        except ParseError:
            rendered = fetched.rendered_html
            if rendered is None or rendered == fetched.html:
                raise
            return self.site.parse_listing(rendered, fetched.final_url)

    async def _handle_detail(self, task: Task, fetched: FetchResult) -> None:
        """Store the record and complete its task in one transaction, under the task's lease.

        A worker that stalled past its lease (a GC pause, a long reconnect, SIGSTOP) while another worker
        took the task over gets :class:`LeaseLost` and writes nothing, so an older fetch can never be
        stored over a newer one. The record is keyed by the canonical URL of the page served.
        """
        self._emit(StageEntered(task, Stage.PARSE))
        with self._parsing(task):
            detail = self.site.parse_detail(fetched.html, fetched.rendered_html, canonical_url(fetched.final_url))
        requested = str(task.payload["url"])
        self._emit(StageEntered(task, Stage.STORE))

        def _store(cur: Any) -> Stored:
            stored = self.site.write_detail(cur, detail, fetched, requested_url=requested)
            write_page(cur, requested, fetched, keep_body=False)  # the record's row keeps the body
            return stored

        await self._complete(task, _store)

    # ------------------------------------------------------------------ conditional re-crawls

    async def _handle_not_modified(self, task: Task, response: FetchResult, validators: Validators) -> None:
        """A 304: the stored copy the validators describe stands (a record as stored; a listing, or a detail page
        held at the door, parsed again).

        When that copy changed or vanished meanwhile, the page is forgotten and the task retried, so the
        next attempt downloads it; a 304 never passes for a page that is not stored.
        """
        url = str(task.payload["url"])
        try:
            if self._role(task.task_type) is Role.LISTING:
                stored = await self._db(stored_copy, self.db, url, validators)
                try:
                    await self._handle_listing(task, stored, validated_at=response.fetched_at)
                except ParseError as exc:
                    await self._fail(task, ErrorKind.NOT_A_LISTING_PAGE, f"stored copy: {exc}")
                return

            def _revalidate(cur: Any) -> Stored:
                return self.site.revalidate_detail(cur, url, validators, response)

            self._emit(StageEntered(task, Stage.STORE))
            try:
                await self._complete(task, _revalidate)
                return
            except StaleCopy:  # no record holds this copy: it may be a page held at the door, kept whole
                held = await self._db(stored_copy, self.db, url, validators)
        except StaleCopy as exc:
            await self._db(forget_page, self.db, url)
            await self._fail(task, exc.kind, str(exc))
            return
        await self._handle_held(task, held, response.fetched_at)

    async def _handle_held(self, task: Task, held: FetchResult, confirmed_at: datetime) -> None:
        """A 304 for a detail page held at the door (its contract broken): the kept copy is what the site still
        serves, so it is parsed again as a 200 of it would be; it is stored if the parser now reads it, else
        failed again as before, without downloading the page a second time, the copy confirmed at
        ``confirmed_at`` (the crawl that confirmed it holds it: ``reextract`` stores it with that time)."""
        try:
            await self._handle_detail(task, held)
        except ParseError as exc:
            kept = held if exc.kind in HELD_KINDS else None
            await self._fail(task, exc.kind, f"{exc.kind}: {exc}", kept=kept, validated_at=confirmed_at)
