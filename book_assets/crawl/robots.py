"""robots.txt, obeyed by every worker: fetched once per origin per crawl and shared through PostgreSQL.

The rules are Protego's (the parser Scrapy uses; Google's robots.txt specification, RFC 9309). The file
lives in the ``robots_txt`` table, one row per origin: the first worker that needs it
takes the fetch, the others wait for the row and parse the same bytes. The fetch is held step by step
(:func:`step_hold_s`: the next slot wait or retry pause, one request bounded by the fetch timeout, a margin),
so a worker that dies while fetching (SIGKILL) is replaced once its step's hold runs out; a worker that is
stopped or cancelled, or whose fetch fails, releases the hold on its way out and the next worker takes the
fetch at once. A crawl's start forgets its hosts' files, so each crawl
reads them once; a stored file is trusted for at most 24 hours (RFC 9309 2.4) by workers that join later.

What a fetch outcome means (RFC 9309 2.3.1, the rules Google and Bing follow):

* **2xx** ``fetched``: the file's rules apply. Its ``Crawl-delay`` for our user agent raises the domain's
  interval (``TaskQueue.set_domain_policy``) to at least that many seconds, for every worker, and pushes its
  next slot that far past the robots.txt request itself. A delay past ``crawl_delay_max_s`` is applied as
  that cap (a site asking for a day between requests would stall a crawl for a day per page); the stored
  file keeps what the site declared, and the crawl's summary says it was capped.
* **4xx** (404 on the live site, which has none) and other permanent failures (a redirect off the allowed
  hosts) ``unavailable``: there are no rules, everything is allowed. A file of any size is read: its first
  :data:`MAX_BYTES` count, the rest is never downloaded (``max_body_bytes`` is for pages).
* **5xx, 429, timeouts, connection errors** ``unreachable``: the site may be overloaded or its rules
  unknown, so nothing is fetched. The fetch is tried ``FETCH_ATTEMPTS`` times first (a single bad moment
  must not stop a crawl); then every task of the origin fails as *retryable* ``robots_unreachable`` with a
  ``Retry-After`` of ``backoff_max_s``, when the next worker fetches the file again. RFC 9309 says to
  assume complete disallow while a file is unreachable; ending tasks for good would turn one outage into a
  lost crawl, so they wait and retry like any other server error and are dead-lettered only after
  ``max_attempts``.

A disallowed URL's task fails for good as ``robots_disallowed`` before any request is made for it.
robots.txt itself takes one of the domain's politeness slots (``TaskQueue.take_slot``), as Scrapy sends it
through its downloader: one request per origin per crawl, but never closer to a page request than the
interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from protego import Protego

from book_assets.crawl.config import CrawlConfig
from book_assets.crawl.dbthread import DbRunner
from book_assets.db.connection import Database
from book_assets.queue import TaskQueue, domain_of
from book_assets.scraper.errors import FetchError
from book_assets.scraper.fetching import FetchResult, host_allowed
from book_assets.sql import load_queries

if TYPE_CHECKING:
    from book_assets.scraper.fetch_http import HttpFetcher

log = logging.getLogger(__name__)
Q = load_queries("robots")

#: RFC 9309 2.4: a cached robots.txt SHOULD NOT be used for more than 24 hours.
MAX_AGE_S: Final = 24 * 3600.0
#: RFC 9309 2.5: crawlers parse at least the first 500 KiB; the rest is ignored.
MAX_BYTES: Final = 500 * 1024
#: Tries of one robots.txt fetch before the file counts as unreachable, and the pause before each retry.
FETCH_ATTEMPTS: Final = 3
RETRY_PAUSE_S: Final = 0.5
#: How long a worker trusts its copy before reading the shared row again (a new crawl may have forgotten it).
REFRESH_S: Final = 60.0
#: How often a worker waiting for another's fetch looks at the row.
POLL_S: Final = 0.05
#: Slack on each held step for what the fetch timeout does not bound: the database round trips between
#: the hold's extension and the outcome's store, a busy event loop. A holder that overruns it costs one
#: more fetch, never a wrong file: a holder that lost its hold stores nothing.
HOLD_MARGIN_S: Final = 5.0


def step_hold_s(timeout_s: float, wait_s: float = 0.0) -> float:
    """How long a held fetch's next step may take: ``wait_s`` (its politeness slot, its retry pause), one
    request bounded by the fetch timeout ``timeout_s``, and :data:`HOLD_MARGIN_S` (pure).

    The longest a dead holder keeps the other workers waiting; the holder extends its hold before each step.
    """
    return max(0.0, wait_s) + timeout_s + HOLD_MARGIN_S


class _HoldLost(Exception):
    """The fetch's hold ran out and another worker took the fetch over."""


async def _finish_shielded(awaitable: Awaitable[object], what: str) -> None:
    """Run ``awaitable`` to its end even if the caller is cancelled meanwhile: a clean-up that must not be cut
    short. Its own failure is logged, never raised over the error being handled."""
    job = asyncio.ensure_future(awaitable)
    while not job.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(job)
    if not job.cancelled() and job.exception() is not None:
        log.warning("%s failed: %s", what, job.exception())


class RobotsState(StrEnum):
    """Where an origin's robots.txt stands (RFC 9309's words)."""

    FETCHING = "fetching"
    FETCHED = "fetched"
    UNAVAILABLE = "unavailable"
    UNREACHABLE = "unreachable"


class Verdict(StrEnum):
    """What robots.txt says about one URL."""

    ALLOWED = "allowed"
    DISALLOWED = "disallowed"
    UNREACHABLE = "unreachable"


@dataclass(frozen=True)
class RobotsCheck:
    """The verdict on one URL, and what the worker does about its task.

    Attributes:
        verdict: allowed, disallowed (fail for good) or unreachable (fail, retry after ``retry_in_s``).
        reslot: the task was claimed before this worker knew the Crawl-delay, so its politeness slot may be
            too early: take a fresh one (``TaskQueue.reslot``) before fetching.
        took_slot: the robots.txt request went out on the task's politeness slot (``slot_due``): the task has
            none left, and goes back to the queue for one of its domain's next.
        reason: one line for the task's error.
    """

    verdict: Verdict
    reslot: bool = False
    took_slot: bool = False
    retry_in_s: float | None = None
    reason: str = ""


@dataclass(frozen=True)
class RobotsFile:
    """One origin's robots.txt outcome, parsed once per worker."""

    origin: str
    state: RobotsState
    http_status: int | None = None
    crawl_delay_s: float | None = None
    error: str | None = None
    retry_in_s: float | None = None
    rules: Protego | None = None
    #: The file's text as parsed (fetched only), shared with the other workers.
    body: str | None = None

    def verdict(self, url: str, user_agent: str) -> Verdict:
        if self.state is RobotsState.UNREACHABLE:
            return Verdict.UNREACHABLE
        if self.rules is None or self.rules.can_fetch(url, user_agent):
            return Verdict.ALLOWED
        return Verdict.DISALLOWED


@dataclass(frozen=True)
class RobotsRecord:
    """A stored outcome, for the crawl summary and Dagster metadata."""

    origin: str
    state: str
    http_status: int | None
    crawl_delay_s: float | None
    error: str | None
    fetched_at: datetime | None
    #: The crawl's cap on a Crawl-delay (None: uncapped).
    crawl_delay_max_s: float | None = None

    def line(self) -> str:
        status = f"HTTP {self.http_status}" if self.http_status is not None else "no response"
        if self.state == RobotsState.FETCHED:
            delay = f", Crawl-delay {self.crawl_delay_s:g} s applied" if self.crawl_delay_s is not None else ""
            cap = self.crawl_delay_max_s
            if self.crawl_delay_s is not None and cap is not None and self.crawl_delay_s > cap:
                delay = f", Crawl-delay {self.crawl_delay_s:g} s capped to {cap:g} s (crawl_delay_max_s)"
            return f"robots.txt {self.origin}: {status}, rules obeyed{delay}"
        if self.state == RobotsState.UNAVAILABLE:
            return f"robots.txt {self.origin}: {status}, none (everything allowed)"
        return f"robots.txt {self.origin}: {self.state} ({status}{'; ' + self.error if self.error else ''})"


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, lower-cased: the origin whose /robots.txt governs it."""
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower().rpartition('@')[2]}"


def parse_file(origin: str, body: bytes | str, user_agent: str) -> RobotsFile:
    """A fetched robots.txt, parsed: its rules and our Crawl-delay (pure).

    Only the first :data:`MAX_BYTES` count (RFC 9309 2.5), up to the last line they end: a rule cut in the
    middle (``Disallow: /pri`` of ``/private/``) would be another rule. A NUL byte becomes U+FFFD, as in
    pages (:func:`~book_assets.scraper.charset.decode_html`): PostgreSQL text cannot hold it, and no URL
    path holds one, so no rule changes what it matches.
    """
    raw = body.encode("utf-8") if isinstance(body, str) else body
    if len(raw) > MAX_BYTES:
        raw = raw[:MAX_BYTES]
        raw = raw[: max(raw.rfind(b"\n"), raw.rfind(b"\r")) + 1]
    text = raw.decode("utf-8", errors="replace").replace("\x00", "\ufffd")
    rules = Protego.parse(text)
    delay = rules.crawl_delay(user_agent)
    return RobotsFile(
        origin,
        RobotsState.FETCHED,
        http_status=200,
        crawl_delay_s=float(delay) if delay is not None and float(delay) > 0 else None,
        rules=rules,
        body=text,
    )


def fetch_outcome(origin: str, result: FetchResult | None, error: FetchError | None, user_agent: str) -> RobotsFile:
    """What one fetch of robots.txt means (pure; see the module's docstring)."""
    if result is not None:
        return replace(parse_file(origin, result.body, user_agent), http_status=result.status)
    assert error is not None
    state = RobotsState.UNREACHABLE if error.retryable else RobotsState.UNAVAILABLE
    return RobotsFile(origin, state, http_status=error.status, error=str(error)[:500])


def _from_row(row: dict[str, Any], user_agent: str) -> RobotsFile:
    state = RobotsState(row["state"])
    if state is RobotsState.FETCHED:
        return replace(parse_file(row["origin"], row["body"] or "", user_agent), http_status=row["http_status"])
    return RobotsFile(
        row["origin"],
        state,
        http_status=row["http_status"],
        error=row["error"],
        retry_in_s=float(row["retry_in_s"]) if row["retry_in_s"] is not None else None,
    )


@dataclass
class _SlotOffer:
    """The politeness slot of the task whose check fetches robots.txt, which its first request may take."""

    due: float  # time.monotonic() when it comes
    taken: bool = False


class RobotsGate:
    """One worker's robots.txt checks: a copy of each origin's file, loaded from (or fetched into) PostgreSQL.

    Args:
        config: the crawl (user agent, fetch settings, the interval a Crawl-delay is compared with).
        queue: the crawl's queue, to raise a domain's interval to its Crawl-delay.
        holder: this worker's id, recorded on a fetch it holds.
        run: runs a blocking database call on the worker's database thread.
    """

    def __init__(
        self,
        config: CrawlConfig,
        queue: TaskQueue,
        holder: str,
        run: DbRunner,
    ) -> None:
        self.config = config
        self.queue = queue
        self.db: Database = queue.db
        self.holder = holder
        self._run = run
        self._user_agent = config.fetch.user_agent
        self._files: dict[str, tuple[RobotsFile, float]] = {}
        self._learnt_at: dict[str, float] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._http: HttpFetcher | None = None

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()

    async def check(self, url: str, *, claimed_at: float, slot_due: float | None = None) -> RobotsCheck:
        """The verdict on ``url`` for a task claimed at ``claimed_at`` (``time.monotonic()``).

        ``slot_due``: when the task's politeness slot comes (``time.monotonic()``). When this check fetches the
        file, its request goes out on that slot rather than the domain's next one (``took_slot``): the task's
        slot is its domain's permission for one request, and the robots.txt request comes first. Taking the next
        slot instead would leave the task's unused and hold the task for two intervals.
        """
        if not host_allowed(url, self.config.fetch.allowed_domains):
            return RobotsCheck(Verdict.ALLOWED)  # never fetched: the fetcher refuses it with its own error
        origin = origin_of(url)
        offer = None if slot_due is None else _SlotOffer(slot_due)
        file = await self._file(origin, offer)
        took_slot = offer is not None and offer.taken
        verdict = file.verdict(url, self._user_agent)
        if verdict is Verdict.UNREACHABLE:
            reason = f"robots.txt of {origin} unreachable: {file.error}"
            return RobotsCheck(verdict, retry_in_s=file.retry_in_s, took_slot=took_slot, reason=reason)
        if verdict is Verdict.DISALLOWED:
            return RobotsCheck(verdict, took_slot=took_slot, reason=f"robots.txt of {origin} disallows {url}")
        delay = self._applied_delay(file)
        reslot = delay is not None and delay > self.config.min_interval_s and claimed_at < self._learnt_at[origin]
        return RobotsCheck(verdict, reslot=reslot, took_slot=took_slot)

    async def _file(self, origin: str, offer: _SlotOffer | None = None) -> RobotsFile:
        known = self._files.get(origin)
        if known is not None and time.monotonic() < known[1]:
            return known[0]
        async with self._locks.setdefault(origin, asyncio.Lock()):
            known = self._files.get(origin)
            if known is not None and time.monotonic() < known[1]:
                return known[0]
            file = await self._load(origin, offer)
            now = time.monotonic()
            trust_s = (file.retry_in_s or 0.0) if file.state is RobotsState.UNREACHABLE else REFRESH_S
            self._files[origin] = (file, now + trust_s)
            self._learnt_at.setdefault(origin, now)
            return file

    async def _load(self, origin: str, offer: _SlotOffer | None) -> RobotsFile:
        """The shared file: fetched by this worker if nobody else holds the fetch, else read when stored."""
        while True:
            taken, row = await self._run(functools.partial(self._read_or_take, origin))
            if taken:
                file = await self._fetch_holding(origin, offer)
                if file is not None:
                    return file
                continue  # the hold ran out and another worker fetches it: read its outcome when stored
            if row is not None and row["state"] != RobotsState.FETCHING:
                return _from_row(row, self._user_agent)
            await asyncio.sleep(POLL_S)

    def _read_or_take(self, origin: str) -> tuple[bool, dict[str, Any] | None]:
        """The origin's row when it stands (a stored outcome, or a fetch another worker holds); else this worker
        takes the fetch: ``(True, None)``. A read comes first, as most looks find the row standing: the take is an
        upsert, which locks the row even when its condition fails. ``(False, None)``: another worker took the
        fetch between the two."""
        rows = self.db.query(Q["read_robots"], {"origin": origin, "max_age_s": MAX_AGE_S})
        if rows and not rows[0]["open"]:
            return False, rows[0]
        params = {
            "origin": origin,
            "host": urlsplit(origin).hostname or "",
            "holder": self.holder,
            "hold_s": step_hold_s(self.config.fetch.timeout_s),
            "max_age_s": MAX_AGE_S,
        }
        return bool(self.db.query(Q["take_robots_fetch"], params)), None

    async def _fetch_holding(self, origin: str, offer: _SlotOffer | None) -> RobotsFile | None:
        """Fetch and share the file while holding its fetch; None when the hold was lost to another worker.

        A fetch that ends without an outcome (cancelled by a stop, a lost lease or the run's end; or failed)
        releases its hold before the error goes on, the release shielded from the cancellation: otherwise
        every other worker would wait for the hold to run out.
        """
        try:
            return await self._fetch_and_share(origin, offer)
        except _HoldLost:
            return None
        except BaseException:
            release = self._run(functools.partial(self._release, origin))
            await _finish_shielded(release, f"releasing the robots.txt fetch of {origin}")
            raise

    def _extend(self, origin: str, hold_s: float) -> None:
        """This worker's hold lasts ``hold_s`` from now; :class:`_HoldLost` when another worker took it over."""
        if not self.db.query(Q["extend_robots_fetch"], {"origin": origin, "holder": self.holder, "hold_s": hold_s}):
            raise _HoldLost(origin)

    def _release(self, origin: str) -> None:
        self.db.query(Q["release_robots_fetch"], {"origin": origin, "holder": self.holder})

    async def _fetch_and_share(self, origin: str, offer: _SlotOffer | None) -> RobotsFile:
        file = await self._fetch(origin, offer)
        delay = self._applied_delay(file)
        if delay is not None and delay != file.crawl_delay_s:
            log.warning(
                "robots.txt of %s: Crawl-delay %g s capped to %g s (crawl_delay_max_s)",
                origin,
                file.crawl_delay_s,
                delay,
            )
        if delay is not None and delay > self.config.min_interval_s:
            # Before the file is shared: whoever reads it finds the domain's interval already raised.
            await self._run(functools.partial(self._apply_crawl_delay, origin, delay))
        await self._run(functools.partial(self._store, file))
        if file.state is RobotsState.UNREACHABLE:
            file = replace(file, retry_in_s=self.config.backoff_max_s)
        log.info("robots.txt of %s: %s (HTTP %s)", origin, file.state, file.http_status)
        return file

    async def _fetch(self, origin: str, offer: _SlotOffer | None) -> RobotsFile:
        if self._http is None:  # opened, so its first request starts on its slot (the client is warm)
            # Imported here: the crawl's own process reads and forgets stored files, only a worker fetches
            # them, so that process does without the HTTP client's modules (aiohttp, about 6 MB).
            from book_assets.scraper.fetch_http import HttpFetcher

            self._http = await HttpFetcher(replace(self.config.fetch, mode="http", concurrency=1)).__aenter__()
        url = origin + "/robots.txt"
        error: FetchError | None = None
        for attempt in range(FETCH_ATTEMPTS):
            pause_s = RETRY_PAUSE_S * 2 ** (attempt - 1) if attempt else 0.0
            due: float | None
            if offer is not None and not offer.taken:
                offer.taken, due = True, offer.due
            else:
                due = await self._run(functools.partial(self.queue.take_slot, domain_of(url)))
            start = max(time.monotonic() + pause_s, due if due is not None else 0.0)
            # The hold covers this step: its wait, then one request of at most the fetch timeout.
            hold_s = step_hold_s(self.config.fetch.timeout_s, start - time.monotonic())
            await self._run(functools.partial(self._extend, origin, hold_s))
            await asyncio.sleep(max(0.0, start - time.monotonic()))
            try:
                result = await self._http.fetch(url, first_bytes=MAX_BYTES + 1)  # one more: was it cut?
                return fetch_outcome(origin, result, None, self._user_agent)
            except FetchError as exc:
                error = exc
                if not exc.retryable:
                    break
        return fetch_outcome(origin, None, error, self._user_agent)

    def _applied_delay(self, file: RobotsFile) -> float | None:
        """The file's Crawl-delay as this crawl applies it: at most ``crawl_delay_max_s``."""
        return None if file.crawl_delay_s is None else min(file.crawl_delay_s, self.config.crawl_delay_max_s)

    def _apply_crawl_delay(self, origin: str, delay_s: float) -> None:
        domain = domain_of(origin + "/")
        self.queue.set_domain_policy(domain, min_interval_s=max(self.config.min_interval_s, delay_s))
        self.queue.push_domain(domain, delay_s)

    def _store(self, file: RobotsFile) -> None:
        params = {
            "origin": file.origin,
            "holder": self.holder,
            "state": str(file.state),
            "http_status": file.http_status,
            "body": file.body,
            "crawl_delay_s": file.crawl_delay_s,
            "error": file.error,
            "retry_s": self.config.backoff_max_s,
        }
        self.db.query(Q["store_robots"], params)


def forget_robots(db: Database, hosts: list[str]) -> None:
    """Read these hosts' robots.txt afresh (a crawl's start)."""
    db.query(Q["forget_robots"], {"hosts": hosts})


def list_robots(db: Database, hosts: list[str], crawl_delay_max_s: float | None = None) -> list[RobotsRecord]:
    """The stored robots.txt outcomes of ``hosts``, their Crawl-delay judged against ``crawl_delay_max_s``."""
    rows = db.query(Q["list_robots"], {"hosts": hosts})
    return [RobotsRecord(**row, crawl_delay_max_s=crawl_delay_max_s) for row in rows]
