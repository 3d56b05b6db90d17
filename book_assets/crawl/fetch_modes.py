"""One strategy per fetch mode, behind one interface: how a worker gets a page (as Crawlee has one crawler
class per way of fetching).

- :class:`HttpStrategy` (``http``): plain HTTP; pages fetched before are fetched conditionally.
- :class:`BrowserStrategy` (``browser``): Chromium; with ``javascript=auto`` scripts stay off until a page
  type's served HTML turns out not to parse while its render does, learnt per worker.
- :class:`AdaptiveStrategy` (``adaptive``): plain HTTP for the page types where it gives the browser's
  records, decided in PostgreSQL for every worker (:mod:`book_assets.crawl.adaptive`).

The worker asks a strategy for a page (:meth:`FetchStrategy.fetch`); when the page's served HTML does not
parse and the strategy marked it :attr:`Fetched.renderable`, the worker asks for a render
(:meth:`FetchStrategy.render`) and, when that parses, tells the strategy (:meth:`FetchStrategy.rendering_needed`).
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar
from urllib.parse import urlsplit

from book_assets.crawl.adaptive import AdaptiveState, Mode, RendererRole, sampled
from book_assets.crawl.config import CrawlConfig
from book_assets.crawl.dbthread import DbRunner
from book_assets.crawl.events import Adaptive, Event
from book_assets.db.connection import Database
from book_assets.queue import Task
from book_assets.scraper.errors import FetchError
from book_assets.scraper.fetch_http import HttpFetcher
from book_assets.scraper.fetching import FetchResult, Validators

if TYPE_CHECKING:  # imported when a browser is needed: Playwright costs ~0.4 s per http-mode worker start
    from book_assets.scraper.fetch_browser import BrowserFetcher

log = logging.getLogger(__name__)
#: Where a strategy reports what it did (the worker's :meth:`~book_assets.crawl.events.Events.emit`).
Emit = Callable[[Event], None]


@dataclass(frozen=True, slots=True)
class Fetched:
    """A fetched page, and whether its served HTML may parse only once rendered (fetched plain, or in the
    browser with scripts off): then a page that does not parse is rendered before it fails. ``browser``: the
    browser fetched it (alone, or beside the plain fetch it was compared with), which is what it cost."""

    page: FetchResult
    renderable: bool = False
    browser: bool = False


def page_key(task: Task) -> tuple[str, str]:
    """The (domain, page type) a fetch mode decides for."""
    return urlsplit(str(task.payload["url"])).hostname or "", task.task_type


class FetchStrategy:
    """How one worker fetches its pages. Subclasses implement :meth:`open` and :meth:`fetch`."""

    #: Whether pages fetched before may be fetched conditionally (plain fetches only: the browser sends none).
    conditional: ClassVar[bool] = False

    def __init__(self, config: CrawlConfig, emit: Emit) -> None:
        self.config = config
        self._emit = emit
        self._http: HttpFetcher | None = None
        self._browser: BrowserFetcher | None = None
        self._stack: AsyncExitStack | None = None  # where a browser started late is closed

    async def open(self, stack: AsyncExitStack) -> None:
        """Start what the mode needs at once; everything started is closed by ``stack``."""
        raise NotImplementedError

    async def prepare(self, task: Task) -> None:
        """Database work before the task's politeness slot, so nothing waits on it between the slot and the send."""

    async def fetch(self, task: Task, validators: Validators | None) -> Fetched:
        """The page; ``validators`` make a plain fetch conditional."""
        raise NotImplementedError

    async def render(self, task: Task) -> FetchResult:
        """The page rendered with scripts on (unless ``javascript=off``), after its served HTML did not parse."""
        return await self._browser_fetcher().fetch(str(task.payload["url"]), javascript=self._render_js)

    def rendering_needed(self, task: Task) -> None:
        """A page parsed only once rendered (called after :meth:`render`)."""

    def fetcher_stats(self) -> Counter[str]:
        """The fetchers' counters, summed."""
        total: Counter[str] = Counter()
        for fetcher in (self._http, self._browser):
            if fetcher is not None:
                total.update(fetcher.stats())
        return total

    @property
    def browsers(self) -> int:
        """Browsers this worker started (0 or 1)."""
        return int(self._browser is not None)

    @property
    def _render_js(self) -> bool:
        """Scripts on for a render that is meant to see what JavaScript builds (unless javascript=off)."""
        return self.config.fetch.javascript != "off"

    async def _open_http(self, stack: AsyncExitStack) -> HttpFetcher:
        self._http = await stack.enter_async_context(HttpFetcher(self.config.fetch))
        return self._http

    def _browser_fetcher(self) -> BrowserFetcher:
        """This worker's browser, made on first use (Playwright is imported then; it starts on its first fetch)."""
        if self._browser is None:
            from book_assets.scraper.fetch_browser import BrowserFetcher

            assert self._stack is not None
            self._browser = BrowserFetcher(self.config.fetch, executable_path=self.config.chromium_path)
            self._stack.push_async_callback(self._browser.close)
        return self._browser


class HttpStrategy(FetchStrategy):
    """``http``: every page over plain HTTP, conditionally when it was fetched before."""

    conditional = True

    async def open(self, stack: AsyncExitStack) -> None:
        self._stack = stack
        await self._open_http(stack)

    async def fetch(self, task: Task, validators: Validators | None) -> Fetched:
        assert self._http is not None
        return Fetched(await self._http.fetch(str(task.payload["url"]), validators))


class BrowserStrategy(FetchStrategy):
    """``browser``: every page in Chromium; with ``javascript=auto``, scripts on only for the (domain, page
    type)s whose served HTML did not parse while their render did, in this worker."""

    def __init__(self, config: CrawlConfig, emit: Emit) -> None:
        super().__init__(config, emit)
        self._needs_js: set[tuple[str, str]] = set()

    async def open(self, stack: AsyncExitStack) -> None:
        self._stack = stack
        await self._browser_fetcher().start()

    async def fetch(self, task: Task, validators: Validators | None) -> Fetched:
        setting = self.config.fetch.javascript
        javascript = setting == "on" or (setting == "auto" and page_key(task) in self._needs_js)
        page = await self._browser_fetcher().fetch(str(task.payload["url"]), javascript=javascript)
        return Fetched(page, renderable=setting == "auto" and not javascript, browser=True)

    def rendering_needed(self, task: Task) -> None:
        key = page_key(task)
        if key not in self._needs_js:
            log.info("%s %s pages need JavaScript: rendering them from now on", *key)
        self._needs_js.add(key)


class AdaptiveStrategy(FetchStrategy):
    """``adaptive``: the page type's shared mode decides; probes and the sample are fetched both ways, by
    the host's renderer only (see :mod:`book_assets.crawl.adaptive`)."""

    conditional = True

    def __init__(self, config: CrawlConfig, emit: Emit, db: Database, run: DbRunner, database_url: str) -> None:
        super().__init__(config, emit)
        self._run = run
        self._state = AdaptiveState(db, probe_pages=config.adaptive_probe_pages)
        # whether this worker renders its host's probes and re-checks (one browser per host)
        self._renderer = RendererRole(database_url)
        self._probing: Counter[tuple[str, str]] = Counter()  # probes in flight here, by page type

    async def open(self, stack: AsyncExitStack) -> None:
        self._stack = stack
        stack.callback(self._renderer.release)
        await self._open_http(stack)
        stack.push_async_callback(self._flush)

    async def _flush(self) -> None:
        """Write this worker's pending counts; a lost database loses only counts, never a decision."""
        with contextlib.suppress(Exception):
            await self._run(self._state.flush)

    async def prepare(self, task: Task) -> None:
        """Bring this page type's shared mode up to date (flushing this worker's counts)."""
        key = page_key(task)
        if self._state.cached(*key) is None:
            await self._run(self._state.sync, *key)

    async def fetch(self, task: Task, validators: Validators | None) -> Fetched:
        assert self._http is not None
        url, key = str(task.payload["url"]), page_key(task)
        mode = self._state.known(*key) or await self._run(self._state.sync, *key)
        if mode == Mode.BROWSER:
            self._emit(Adaptive(task, rendered=True))
            self._state.count(*key, rendered=1)
            return Fetched(await self._browser_fetcher().fetch(url, javascript=self._render_js), browser=True)
        # Probes in flight per page type: as many as the agreements a decision needs, all in the host's renderer,
        # so one round of renders can decide (one at a time per worker, a 62-book crawl could end undecided);
        # the others go plain, which is safe because a page whose served HTML does not parse is rendered anyway.
        # A page to be compared with its render is downloaded in full (a 304 would leave nothing to compare);
        # the others are conditional, their stored copy standing as it would for a plain page in http mode.
        # The renderer samples its own share of the host's pages at the rate times the crawl's workers.
        sample_rate = min(1.0, self.config.adaptive_sample_rate * self.config.workers)
        probe = mode == Mode.PROBE and self._probing[key] < self.config.adaptive_probe_pages
        check = self._renderer.held and (probe or sampled(url, sample_rate))
        if check:
            self._probing[key] += 1
        try:
            plain = await self._http.fetch(url, None if check else validators)
            if not check or plain.not_modified:
                self._emit(Adaptive(task, plain=True))
                self._state.count(*key, plain=1)
                return Fetched(plain, renderable=not plain.not_modified)
            # A page type decided http showed in its probes that scripts change nothing: re-checks of it run
            # none unless javascript=on (browser mode's auto does the same for pages that parse).
            javascript = self._render_js if mode == Mode.PROBE else self.config.fetch.javascript == "on"
            try:
                rendered = await self._browser_fetcher().fetch(url, javascript=javascript)
            except FetchError:
                self._emit(Adaptive(task, plain=True))
                self._state.count(*key, plain=1)  # no evidence either way; the plain page still counts
                return Fetched(plain, renderable=True)
        finally:
            if check:
                self._probing[key] -= 1
        return await self._compared(task, key, plain, rendered)

    async def _compared(self, task: Task, key: tuple[str, str], plain: FetchResult, rendered: FetchResult) -> Fetched:
        """The plain page when its records equal the render's, else the render; the evidence is shared at once."""
        rendered_html = rendered.rendered_html or rendered.html
        agreed = self.config.site.records_agree(key[1], plain.html, rendered_html, plain.final_url)
        self._emit(Adaptive(task, rendered=True, plain=True, checked=True, disagreed=not agreed))
        self._state.count(*key, rendered=1, plain=1, agreed=agreed)
        await self._run(self._state.sync, *key)  # a check can change the shared decision: write it now
        return Fetched(plain if agreed else rendered, browser=True)

    def rendering_needed(self, task: Task) -> None:
        """A plain page that parsed only once rendered: a disagreement, shared with every worker."""
        self._emit(Adaptive(task, rendered=True, disagreed=True))
        self._state.count(*page_key(task), rendered=1, agreed=False)


def fetch_strategy(config: CrawlConfig, emit: Emit, *, db: Database, run: DbRunner, database_url: str) -> FetchStrategy:
    """The strategy for ``config.fetch.mode``; what it does is reported through ``emit``."""
    if config.fetch.mode == "adaptive":
        return AdaptiveStrategy(config, emit, db, run, database_url)
    if config.fetch.mode == "browser":
        return BrowserStrategy(config, emit)
    return HttpStrategy(config, emit)
