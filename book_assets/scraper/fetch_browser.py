"""Browser fetcher: one headless Chromium (Playwright, async) with a pool of reusable pages.

Why the design is as it is:

- One browser per fetcher and pages reused from an ``asyncio.Queue``: launching Chromium costs ~1 s and
  ~100 MB, opening a tab costs milliseconds. A page is reused only after a clean fetch; after any error it
  is closed and replaced, so a half-finished navigation never leaks into the next fetch.
- Off-domain targets are blocked twice, under one policy (:mod:`book_assets.scraper.targets`: host and
  port, IP literals, internal addresses). Chromium is launched with ``--host-resolver-rules`` that make
  every target outside ``allowed_domains`` unresolvable (IP literals and other ports too, see
  :func:`host_resolver_rules`), because Playwright's request routing is *not* consulted for redirect
  hops: a redirect to another host would otherwise be requested before we could object. The first URL is
  checked before navigating; the page's DevTools ``Network.requestWillBeSent`` events (one per request and
  per redirect hop) fail a fetch as soon as a disallowed hop appears (they only observe, they never pause
  a request), and the main frame's chain of hops is inspected to report "offsite_redirect".
- Images, stylesheets, fonts, media and analytics URLs are blocked inside Chromium (CDP
  ``Network.setBlockedURLs`` on each page, :mod:`book_assets.scraper.blocking`), not by Playwright request
  routing, which paused every request for a Python round trip: measured 8.6-11.9 pages/s with
  routing against 18.0 without on the same loop. There is no route handler at all.
- JavaScript per fetch: one browser context with scripts on, one with them off, each created when first
  needed (``fetch(url, javascript=False)``). With scripts off the rendered DOM equals the served HTML, so
  ``page.content()`` is not called and ``rendered_html`` is None.
- ``html`` is the served body (``response.body()`` of the main navigation, decoded), identical to what the
  HTTP fetcher returns; ``rendered_html`` is ``page.content()`` after load, which includes JS-built DOM.
- ``max_body_bytes`` holds on the decoded body as it arrives (``Network.dataReceived``), as the HTTP
  fetcher's streamed read does: a gzip bomb fails as "too_large" near the limit instead of being inflated
  and parsed until the load times out (and then retried), and Chromium's memory stays near a normal page's.
- A redirect Chromium will not follow is a permanent ``bad_redirect``: ``ERR_INVALID_REDIRECT`` (a Location
  that is no URL), and an ``ERR_ABORTED`` navigation whose last response was a redirect to a Location that
  is no http(s) URL (``javascript:``, read from ``Network.responseReceivedExtraInfo``, which can arrive after
  the failure: the fetch waits for it, up to the fetch timeout, before it classifies an abort).
- The browser is relaunched after ``relaunch_after_pages`` pages (bounding Chromium's memory growth) once
  in-flight fetches drain, and transparently after it crashes or is killed: fetches in flight at that
  moment fail with the retryable kind "browser_crashed", the next fetch gets a fresh browser.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Self

from playwright.async_api import (
    Browser,
    BrowserContext,
    Page,
    Playwright,
    Response,
    async_playwright,
)
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from book_assets.scraper.blocking import blocked_url_patterns
from book_assets.scraper.chromium import CHROMIUM_ARGS, browser_environment, find_chromium, sandbox_available
from book_assets.scraper.errors import ErrorKind, FetchError
from book_assets.scraper.fetching import (
    REDIRECT_STATUSES,
    FetchResult,
    FetchSettings,
    build_result,
    declared_length,
    error_for_status,
    fetch_error,
    host_allowed,
    meta_refresh_target,
    redirect_target,
    refuse_offsite,
    too_large_error,
    truncation_error,
    utc_now,
)
from book_assets.scraper.targets import DEFAULT_PORTS, parse_allowed

# Chromium net error names (as they appear in Playwright messages) -> our kinds.
_NET_ERROR_KINDS: tuple[tuple[str, ErrorKind], ...] = (
    ("ERR_CONTENT_LENGTH_MISMATCH", ErrorKind.TRUNCATED),
    ("ERR_INCOMPLETE_CHUNKED_ENCODING", ErrorKind.TRUNCATED),
    ("ERR_TOO_MANY_REDIRECTS", ErrorKind.REDIRECT_LOOP),
    ("ERR_TIMED_OUT", ErrorKind.TIMEOUT),
    ("ERR_CONNECTION_TIMED_OUT", ErrorKind.TIMEOUT),
    ("ERR_FILE_TOO_BIG", ErrorKind.TOO_LARGE),
    ("ERR_UNSAFE_REDIRECT", ErrorKind.OFFSITE_REDIRECT),
    ("ERR_INVALID_REDIRECT", ErrorKind.BAD_REDIRECT),
    ("ERR_INVALID_URL", ErrorKind.BAD_URL),
    ("ERR_BLOCKED_BY_CLIENT", ErrorKind.BAD_URL),  # the page's own URL matches block_resource_types/block_url_patterns
    ("ERR_ABORTED", ErrorKind.CONNECTION),
)
_CLOSED_MARKERS = ("Target page, context or browser has been closed", "Browser has been closed", "Target closed")


#: With no allowed entries: names are allowed, but the usual internal IPv4 ranges and localhost names are not.
_INTERNAL_PATTERNS = (
    "localhost", "*.localhost", "0.*", "10.*", "127.*", "169.254.*", "192.168.*",
    *(f"172.{n}.*" for n in range(16, 32)),
)  # fmt: skip


def host_resolver_rules(allowed_domains: frozenset[str]) -> str:
    """Chromium ``--host-resolver-rules`` that make every target outside ``allowed_domains`` unresolvable.

    The rules act in Chromium's network stack, on every request: redirect hops and meta refreshes included,
    which request routing does not see, and IP literals too (checked with Chromium 13x: ``127.0.0.2`` fails
    with ERR_NAME_NOT_RESOLVED under ``MAP * ~NOTFOUND``). Ports: a ``MAP`` pattern is tried against the
    host and then ``host:port``, and the first matching ``MAP`` wins, so a ``host:port`` entry becomes an
    identity ``MAP host:port host:port`` before ``MAP * ~NOTFOUND`` (a default port allows both 80 and
    443, as :mod:`book_assets.scraper.targets` does); a bare host becomes ``EXCLUDE host`` (any port).
    """
    entries = [e for e in (parse_allowed(a) for a in sorted(allowed_domains)) if e is not None]
    if not entries:
        return ", ".join(f"MAP {pattern} ~NOTFOUND" for pattern in _INTERNAL_PATTERNS)
    maps, excludes = [], []
    for entry in entries:
        host = f"[{entry.host}]" if ":" in entry.host else entry.host
        if entry.port is None:
            excludes.append(f"EXCLUDE {host}")
            continue
        ports = sorted(DEFAULT_PORTS.values()) if entry.port in DEFAULT_PORTS.values() else [entry.port]
        maps += [f"MAP {host}:{port} {host}:{port}" for port in ports]
    return ", ".join([*maps, "MAP * ~NOTFOUND", *excludes])


@dataclass
class _NavTrace:
    """What the page's event listeners saw during one fetch."""

    navigation_urls: list[str] = field(default_factory=list)
    #: DevTools request ids of the main frame's navigation (a redirect keeps its id across hops).
    request_ids: set[str] = field(default_factory=set)
    #: Decoded body bytes of the main navigation so far (``Network.dataReceived``'s ``dataLength``).
    received: int = 0
    failure: str | None = None
    #: The classified error when a listener already knows it (a body over the limit), else None.
    error: FetchError | None = None
    #: The Location of the main navigation's last response when it was a redirect, and that response's
    #: headers arriving (``Network.responseReceivedExtraInfo``: an aborted redirect's only trace).
    redirect_location: str | None = None
    responded: asyncio.Event = field(default_factory=asyncio.Event)
    # Set when the main navigation request fails. A body cut short after the response committed never
    # fires "load", so goto() would sit until its timeout; racing it against this event fails fast.
    failed: asyncio.Event = field(default_factory=asyncio.Event)

    def fail(self, failure: str, error: FetchError | None = None) -> None:
        """Record the first failure of the navigation and wake the fetch waiting on it."""
        if self.failure is None:
            self.failure = failure
            self.error = error
        self.failed.set()


@dataclass
class _Slot:
    """A pooled page, tagged with the browser generation it belongs to."""

    page: Page
    generation: int
    javascript: bool
    #: DevTools id of the page's main frame: navigation events of other frames are not the fetch's.
    main_frame: str = ""
    trace: _NavTrace = field(default_factory=_NavTrace)
    crashed: bool = False
    # True once a fetch on this page completed its navigation (even with a 404): safe to reuse.
    clean: bool = False
    uses: int = 0


class BrowserFetcher:
    """Fetch pages with headless Chromium; see ``fetching.Fetcher`` for the contract.

    Usage::

        async with BrowserFetcher(FetchSettings(concurrency=4)) as fetcher:
            result = await fetcher.fetch("https://example.com/")
            result.rendered_html  # DOM after scripts ran
    """

    def __init__(self, settings: FetchSettings | None = None, *, executable_path: str | None = None) -> None:
        self.settings = settings or FetchSettings(mode="browser")
        self._executable_path = executable_path
        # No allowed hosts: the resolver rules refuse internal IPv4 and localhost, these patterns IPv6 literals.
        self._blocked = blocked_url_patterns(
            self.settings.block_resource_types,
            self.settings.block_url_patterns,
            internal_ipv6=not self.settings.allowed_domains,
        )
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._contexts: dict[bool, BrowserContext] = {}
        self._generation = 0
        self._alive = False
        self._closed = False
        self._idle: dict[bool, asyncio.Queue[_Slot]] = {True: asyncio.Queue(), False: asyncio.Queue()}
        self._semaphore = asyncio.Semaphore(self.settings.concurrency)
        self._lock = asyncio.Lock()
        self._inflight = 0
        self._drained = asyncio.Event()
        self._drained.set()
        self._pages_since_launch = 0
        self._counters: dict[str, int] = {
            "pages_fetched": 0,
            "bytes_fetched": 0,
            "relaunches": 0,
            "crashes": 0,
            "blocked_requests": 0,
            "offsite_blocked": 0,
            "errors": 0,
        }

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def stats(self) -> dict[str, int]:
        """Counters since construction (a copy): pages_fetched, bytes_fetched, relaunches, crashes,
        blocked_requests (by resource type or URL pattern), offsite_blocked, errors."""
        return dict(self._counters)

    @property
    def executable_path(self) -> str | None:
        """The Chromium binary in use (known after ``start``)."""
        return self._executable_path

    async def start(self) -> None:
        """Start Playwright and launch the browser (``fetch`` also does this lazily)."""
        async with self._lock:
            if self._closed:
                raise RuntimeError("BrowserFetcher is closed")
            if not self._alive:
                await self._launch()

    async def close(self) -> None:
        """Close pages, browser and Playwright; safe to call twice."""
        async with self._lock:
            self._closed = True
            self._alive = False
            self._drain_idle()
            browser, self._browser = self._browser, None
            self._contexts = {}
            playwright, self._playwright = self._playwright, None
            if browser is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(browser.close(), 10)
            if playwright is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(playwright.stop(), 10)

    def _drain_idle(self) -> None:
        for idle in self._idle.values():
            while not idle.empty():
                idle.get_nowait()

    async def _launch(self) -> None:
        """(Re)launch Chromium and its context; caller holds ``_lock``."""
        relaunch = self._browser is not None
        old = self._browser
        self._alive = False
        self._drain_idle()
        self._browser = None
        self._contexts = {}
        if old is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(old.close(), 10)
        if self._playwright is None:
            self._playwright = await async_playwright().start()
        if self._executable_path is None:
            bundled: str | None
            try:
                bundled = self._playwright.chromium.executable_path
            except Exception:
                bundled = None
            self._executable_path = find_chromium(bundled)
        args = list(CHROMIUM_ARGS)
        args.append(f"--host-resolver-rules={host_resolver_rules(self.settings.allowed_domains)}")
        executable, sandbox = self._executable_path, await asyncio.to_thread(sandbox_available)  # cached: once
        env: dict[str, str | float | bool] = dict(browser_environment())

        async def launch(playwright: Playwright) -> Browser:
            # The browser gets no secret (browser_environment) and its sandbox where the platform allows it.
            return await playwright.chromium.launch(
                executable_path=executable, headless=True, args=args, env=env, chromium_sandbox=sandbox
            )

        try:
            browser = await launch(self._playwright)
        except PlaywrightError:
            # The driver itself may have died with the browser: restart it once.
            with contextlib.suppress(Exception):
                await self._playwright.stop()
            self._playwright = await async_playwright().start()
            browser = await launch(self._playwright)
        self._generation += 1
        generation = self._generation
        browser.on("disconnected", lambda _browser: self._on_disconnected(generation))
        self._browser = browser
        self._pages_since_launch = 0
        self._alive = True
        if relaunch:
            self._counters["relaunches"] += 1

    def _on_disconnected(self, generation: int) -> None:
        """The browser of ``generation`` is gone: the next checkout relaunches. Counted once per browser,
        whichever comes first: its disconnect event or a fetch that met it dead."""
        if generation == self._generation and not self._closed and self._alive:
            self._alive = False
            self._counters["crashes"] += 1

    async def _context_for(self, javascript: bool) -> BrowserContext:
        """The context whose pages run scripts (or not); created on first use; caller holds ``_lock``."""
        context = self._contexts.get(javascript)
        if context is None:
            assert self._browser is not None
            context = await self._browser.new_context(
                user_agent=self.settings.user_agent, service_workers="block", java_script_enabled=javascript
            )
            context.set_default_timeout(self.settings.timeout_s * 1000)
            context.set_default_navigation_timeout(self.settings.timeout_s * 1000)
            self._contexts[javascript] = context
        return context

    def _browser_gone(self, error_text: str) -> bool:
        """Whether a Playwright error means the browser is dead (known, disconnected, or said so by the error)."""
        browser = self._browser
        return (
            not self._alive
            or browser is None
            or not browser.is_connected()
            or any(marker in error_text for marker in _CLOSED_MARKERS)
        )

    # ------------------------------------------------------------------ page pool

    async def _open_slot(self, url: str, javascript: bool) -> _Slot:
        """``_checkout``, with a browser that died before its disconnect was seen failing as "browser_crashed".

        A kill is known only once the driver's event reaches this loop; until then opening a context or a
        tab is the first thing to meet the dead browser.
        """
        try:
            return await self._checkout(javascript)
        except PlaywrightError as exc:
            text = str(exc)
            dead = self._browser_gone(text)
            if dead:
                self._on_disconnected(self._generation)
            raise fetch_error(
                ErrorKind.BROWSER_CRASHED if dead else ErrorKind.BROWSER_ERROR,
                text.splitlines()[0] if text else "could not open a tab",
                url=url,
            ) from exc

    async def _checkout(self, javascript: bool) -> _Slot:
        """A page on a live browser; relaunches first when the browser died or has done its quota."""
        async with self._lock:
            if self._closed:
                raise RuntimeError("BrowserFetcher is closed")
            if self._alive and self._pages_since_launch >= self.settings.relaunch_after_pages:
                # Planned restart: let in-flight fetches finish on the old browser (new ones wait on the lock).
                await self._drained.wait()
                await self._launch()
            elif not self._alive:
                await self._launch()
            self._pages_since_launch += 1
            self._inflight += 1
            self._drained.clear()
            try:
                idle = self._idle[javascript]
                while not idle.empty():
                    slot = idle.get_nowait()
                    if slot.generation == self._generation and not slot.page.is_closed():
                        slot.trace = _NavTrace()
                        slot.clean = False
                        return slot
                return await self._new_slot(javascript)
            except BaseException:
                self._release_count()
                raise

    async def _new_slot(self, javascript: bool) -> _Slot:
        context = await self._context_for(javascript)
        page = await context.new_page()
        slot = _Slot(page=page, generation=self._generation, javascript=javascript)
        # The page's own DevTools session: blocking lives in its network agent (no request is paused for
        # Python), and its Network events, which reach Python anyway once the domain is enabled, feed the
        # off-domain guard. No Playwright request listener is registered: each would add three messages
        # per request (the Request object, "request", "requestfailed") on top of the same facts.
        cdp = await context.new_cdp_session(page)
        cdp.on("Network.requestWillBeSent", lambda event: self._on_request_sent(slot, event))
        cdp.on("Network.loadingFailed", lambda event: self._on_loading_failed(slot, event))
        cdp.on("Network.dataReceived", lambda event: self._on_data_received(slot, event))
        cdp.on("Network.responseReceivedExtraInfo", lambda event: self._on_response_headers(slot, event))
        tree = await cdp.send("Page.getFrameTree")
        slot.main_frame = str(tree["frameTree"]["frame"]["id"])
        await cdp.send("Network.enable")
        if self._blocked:
            await cdp.send("Network.setBlockedURLs", {"urls": self._blocked})

        def on_crash(_page: Page) -> None:
            slot.crashed = True

        page.on("crash", on_crash)
        return slot

    def _on_request_sent(self, slot: _Slot, event: dict[str, Any]) -> None:
        """Every request and redirect hop (``requestWillBeSent`` fires again for each hop, which request
        routing never sees). The resolver rules have already made a disallowed hop unresolvable; this fails
        the fetch at once and names the hop."""
        url = str(event.get("request", {}).get("url", ""))
        allowed = not url.startswith(("http://", "https://")) or host_allowed(url, self.settings.allowed_domains)
        if not allowed:
            self._counters["offsite_blocked"] += 1
        if event.get("type") == "Document" and event.get("frameId") == slot.main_frame:
            slot.trace.navigation_urls.append(url)
            slot.trace.request_ids.add(str(event.get("requestId")))
            if not allowed:
                slot.trace.fail(f"offsite hop {url}")

    def _on_loading_failed(self, slot: _Slot, event: dict[str, Any]) -> None:
        """Count requests Chromium refused by pattern; a failed main navigation fails the fetch at once."""
        if event.get("blockedReason"):
            self._counters["blocked_requests"] += 1
        if str(event.get("requestId")) in slot.trace.request_ids:
            slot.trace.fail(str(event.get("errorText") or "navigation request failed"))

    def _on_data_received(self, slot: _Slot, event: dict[str, Any]) -> None:
        """Count the main navigation's decoded bytes as they arrive; past ``max_body_bytes`` fail the fetch.

        The limit is on the bytes the crawler would store, so it is the decoded ``dataLength`` that counts,
        not ``encodedDataLength``: a gzip body of 1 MB that inflates to 1 GiB fails near the limit, whatever
        ``Content-Length`` said, instead of being inflated and parsed until the load times out. The fetch
        then closes the page, which stops the download.
        """
        trace = slot.trace
        if str(event.get("requestId")) not in trace.request_ids or trace.error is not None:
            return
        trace.received += int(event.get("dataLength") or 0)
        limit = self.settings.max_body_bytes
        if trace.received > limit:
            url = trace.navigation_urls[0] if trace.navigation_urls else ""
            error = too_large_error(url, trace.received, limit)
            trace.fail(str(error), error)

    def _on_response_headers(self, slot: _Slot, event: dict[str, Any]) -> None:
        """The raw headers of a response of the main navigation: a redirect's Location is kept."""
        trace = slot.trace
        if str(event.get("requestId")) not in trace.request_ids:
            return
        headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
        redirect = int(event.get("statusCode") or 0) in REDIRECT_STATUSES
        trace.redirect_location = headers.get("location") if redirect else None
        trace.responded.set()

    def _release_count(self) -> None:
        self._inflight -= 1
        if self._inflight == 0:
            self._drained.set()

    async def _checkin(self, slot: _Slot, reusable: bool) -> None:
        self._release_count()
        slot.uses += 1
        current = self._alive and slot.generation == self._generation
        # A renderer that navigated many times holds on to garbage (V8 collects lazily): one
        # page's renderer grows from ~60 MB to ~500 MB over 300 book pages. A fresh page every
        # ``recycle_page_after`` fetches (``recycle_scripted_page_after`` for a tab whose scripts run, their heap
        # grows faster) keeps each renderer small for the cost of a new tab (milliseconds).
        limit = self.settings.recycle_scripted_page_after if slot.javascript else self.settings.recycle_page_after
        worn_out = slot.uses >= limit
        if reusable and current and not worn_out and not slot.crashed and not slot.page.is_closed():
            self._idle[slot.javascript].put_nowait(slot)
            return
        if slot.generation == self._generation and self._alive:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(slot.page.close(), 5)

    # ------------------------------------------------------------------ fetching

    async def fetch(self, url: str, *, javascript: bool | None = None) -> FetchResult:
        """Navigate to ``url`` and return the served body plus (with scripts on) the rendered DOM.

        Args:
            javascript: Run the page's scripts; None follows the ``javascript`` setting ("off" is off,
                "on" and "auto" are on: only the caller knows whether a page type needs scripts).

        Raises:
            FetchError: classified as in ``fetching`` plus "browser_crashed" (retryable).
        """
        try:
            refuse_offsite(url, self.settings.allowed_domains, self._counters)
            async with self._semaphore:
                slot = await self._open_slot(
                    url, self.settings.javascript != "off" if javascript is None else javascript
                )
                try:
                    result = await self._fetch_on(slot, url)
                finally:
                    await self._checkin(slot, slot.clean)
        except FetchError:
            self._counters["errors"] += 1
            raise
        self._counters["pages_fetched"] += 1
        self._counters["bytes_fetched"] += len(result.body)
        return result

    async def _fetch_on(self, slot: _Slot, url: str) -> FetchResult:
        """Fetch on one page; marks ``slot.clean`` when the navigation completed normally."""
        started, fetched_at = time.monotonic(), utc_now()
        page = slot.page
        limit = self.settings.max_body_bytes
        try:
            # Playwright's own navigation timeout fires first; this bounds body()/content() as well.
            async with asyncio.timeout(self.settings.timeout_s * 2):
                response = await self._goto(page, url, slot.trace)
                self._check_chain(url, slot.trace)
                if response is None:
                    raise fetch_error(ErrorKind.CONNECTION, "navigation produced no response", url=url)
                final_url = response.url
                if not host_allowed(final_url, self.settings.allowed_domains):
                    raise fetch_error(ErrorKind.OFFSITE_REDIRECT, f"ended on {final_url}", url=url)
                # The headers of the response event, without the extra round trip of all_headers() (which
                # adds only security and cookie headers, none of which a fetch decision reads).
                headers = dict(response.headers)
                sent = dict(response.request.headers)
                status = response.status
                error = error_for_status(final_url, status, headers, retry_after_max_s=self.settings.retry_after_max_s)
                if error is not None:
                    slot.clean = True
                    raise error
                declared = declared_length(headers)
                if declared is not None and declared > limit:
                    raise too_large_error(url, declared, limit)
                body = await response.body()
                if len(body) > limit:
                    raise too_large_error(url, len(body), limit)
                truncated = truncation_error(url, headers, len(body))
                if truncated is not None:
                    raise truncated
                refresh = meta_refresh_target(body, final_url)
                if refresh is not None and not host_allowed(refresh, self.settings.allowed_domains):
                    self._counters["offsite_blocked"] += 1
                    raise fetch_error(ErrorKind.OFFSITE_REDIRECT, f"meta refresh to {refresh}", url=url)
                rendered = await page.content() if slot.javascript else None
                slot.clean = True
        except FetchError:
            raise
        except PlaywrightTimeoutError as exc:
            raise fetch_error(ErrorKind.TIMEOUT, f"no load in {self.settings.timeout_s}s", url=url) from exc
        except TimeoutError as exc:
            raise fetch_error(ErrorKind.TIMEOUT, f"fetch exceeded {self.settings.timeout_s * 2}s", url=url) from exc
        except PlaywrightError as exc:
            await self._await_aborted_response(str(exc), slot.trace)
            raise self._classify(url, str(exc), slot) from exc
        result = build_result(
            url=url,
            final_url=final_url,
            status=status,
            headers=headers,
            body=body,
            fetched_at=fetched_at,
            elapsed_s=time.monotonic() - started,
            rendered_html=rendered,
            request_headers=sent,
        )
        return result

    def _check_chain(self, url: str, trace: _NavTrace) -> None:
        """Fail on a redirect chain that left the allowed hosts or was longer than allowed."""
        for hop in trace.navigation_urls:
            if not host_allowed(hop, self.settings.allowed_domains):
                raise fetch_error(ErrorKind.OFFSITE_REDIRECT, f"redirect to {hop} outside allowed_domains", url=url)
        if len(trace.navigation_urls) - 1 > self.settings.max_redirects:
            raise fetch_error(ErrorKind.REDIRECT_LOOP, f"more than {self.settings.max_redirects} redirects", url=url)

    async def _goto(self, page: Page, url: str, trace: _NavTrace) -> Response | None:
        """``page.goto`` that also returns early when the main navigation request fails."""
        goto = asyncio.ensure_future(page.goto(url, wait_until="load", timeout=self.settings.timeout_s * 1000))
        failed = asyncio.ensure_future(trace.failed.wait())
        try:
            await asyncio.wait({goto, failed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            failed.cancel()
            if not goto.done():
                goto.cancel()
                with contextlib.suppress(BaseException):
                    await goto
        if trace.error is not None:
            raise trace.error
        if goto.cancelled():
            raise PlaywrightError(trace.failure or "navigation failed")
        return goto.result()

    async def _await_aborted_response(self, text: str, trace: _NavTrace) -> None:
        """After an ``ERR_ABORTED`` navigation, wait (up to the fetch timeout) for its response's headers,
        which may arrive after the failure: they tell a redirect Chromium would not follow from an abort."""
        if "ERR_ABORTED" in f"{trace.failure or ''} {text}" and not trace.responded.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(trace.responded.wait(), self.settings.timeout_s)

    def _classify(self, url: str, text: str, slot: _Slot) -> FetchError:
        """Map a Playwright error message (and what the page's listeners saw) to a FetchError kind."""
        message = text.splitlines()[0] if text else "unknown browser error"
        if slot.crashed or self._browser_gone(text):
            return fetch_error(ErrorKind.BROWSER_CRASHED, message, url=url)
        try:
            self._check_chain(url, slot.trace)
        except FetchError as offsite:
            return offsite
        evidence = f"{slot.trace.failure or ''} {text}"
        if "ERR_ABORTED" in evidence and slot.trace.redirect_location is not None:
            last_hop = slot.trace.navigation_urls[-1] if slot.trace.navigation_urls else url
            try:
                redirect_target(url, last_hop, slot.trace.redirect_location, self.settings.allowed_domains)
            except FetchError as refused:
                return refused
        for marker, kind in _NET_ERROR_KINDS:
            if marker in evidence:
                return fetch_error(kind, message, url=url)
        if "Download is starting" in evidence:
            return fetch_error(ErrorKind.DOWNLOAD, "response is a download, not a page", url=url)
        if "ERR_" in evidence:
            return fetch_error(ErrorKind.CONNECTION, message, url=url)
        return fetch_error(ErrorKind.BROWSER_ERROR, message, url=url)
