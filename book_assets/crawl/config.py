"""One crawl's configuration, resolved from the settings: what every worker process is given."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from book_assets.queue import LEASE_EXPIRED, Backoff, TaskQueue
from book_assets.queue.failures import RequeuePolicy
from book_assets.scheduling.weights import CategoryWeights
from book_assets.scraper.errors import ErrorKind
from book_assets.scraper.fetching import FetchSettings
from book_assets.scraper.targets import with_start_port
from book_assets.settings import (
    BROWSER_MIN_CONCURRENCY,
    BROWSER_WORKERS,
    WORKERS,
    ConfigError,
    Settings,
    default,
    load_settings,
)
from book_assets.sites.registry import site_named
from book_assets.sites.site import Categories, Role, Site, default_kind, kinds_of

if TYPE_CHECKING:
    from book_assets.db.connection import Database
    from book_assets.store.drift import DriftLimits

#: The task types of the default site's (books') page kinds, one per role (:class:`~book_assets.sites.site.Role`):
#: what the crawl's figures, weights and budgets count, and what a queue that only reads is built with.
LISTING = "listing"
DETAIL = "detail"
TASK_TYPES = (LISTING, DETAIL)
#: Listing pages are discovery: ahead of details inside their own class, interleaved across classes.
LISTING_PRIORITY = 10
DETAIL_PRIORITY = 5


def weights_by_category_name(
    weights: CategoryWeights | Mapping[str, float], categories: Categories | None = None
) -> dict[str, float]:
    """Explicit weights keyed by category name (keys of known categories translated), unknown names warned.

    Detail tasks are grouped by the category name the site shows, so a weight given by its key
    ("sequential-art") must reach the queue as "Sequential Art" to apply. ``categories``: the site's (None: the
    default site's).
    """
    from book_assets.scheduling.weights import warn_unknown

    categories = categories or site_named(default("site")).categories
    if not isinstance(weights, CategoryWeights):
        weights = CategoryWeights({k: v for k, v in weights.items() if k != "*"})
    if categories.known:  # a site that knows no categories in advance (quotes' tags) has none to misspell
        warn_unknown(weights, categories.known)
    return {categories.known_name(key): float(value) for key, value in weights.weights.items()}


#: Start hosts that are this machine: your own replica, where politeness toward other people's sites
#: does not apply, so the interval between requests is 0 unless ``min_interval_s`` is set.
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass(frozen=True)
class CrawlConfig:
    """One crawl's resolved configuration: the settings a worker needs and the values derived from them.

    Every field named like a setting holds that setting's value; nothing here has a default of its own
    (they are declared once, in :class:`~book_assets.settings.Settings`). Picklable: worker processes get it.
    """

    #: The site definition (:mod:`book_assets.sites`): everything site-specific the crawl reaches.
    site: Site
    base_url: str
    allowed_domains: frozenset[str]
    fetch: FetchSettings
    weights: CategoryWeights
    workers: int
    max_pages: int
    listing_trap_pages: int
    categories: tuple[str, ...]
    #: Query parameter patterns discovery drops from links (:func:`book_assets.urls.without_query_params`).
    drop_query_params: tuple[str, ...]
    min_interval_s: float
    max_in_flight_per_domain: int | None
    obey_robots: bool
    crawl_delay_max_s: float
    max_url_length: int
    autothrottle: bool
    autothrottle_target_concurrency: float
    autothrottle_max_interval_s: float
    lease_s: float
    max_attempts: int
    backoff_base_s: float
    backoff_max_s: float
    deep_budget: int | None
    interleave: int
    chromium_path: str | None
    adaptive_probe_pages: int
    adaptive_sample_rate: float
    #: Pages in flight per worker autoscale between this and ``fetch.concurrency``; equal: pinned.
    min_concurrency: int
    #: Re-crawls send the stored validators (http mode and adaptive mode's plain fetches).
    conditional_requests: bool
    #: Where workers archive what they fetch (WARC, :mod:`book_assets.archive`); None: the ``warc`` setting is off.
    archive_dir: Path | None
    requeue_max: int
    requeue_backoff_s: float
    task_retention_days: float
    drift_threshold: float
    drift_min_pages: int
    drift_length_ratio: float
    drift_top_share: float
    #: The workers' /metrics endpoint (:mod:`book_assets.observe.metrics`); None: off.
    metrics_port: int | None
    metrics_host: str
    metrics_final_scrape_s: float
    #: The worker's health signal (:mod:`book_assets.crawl.health`); None: none.
    health_file: Path | None

    @property
    def drift_limits(self) -> DriftLimits:
        """How far a field's figures may move before it drifts (:mod:`book_assets.store.drift`)."""
        from book_assets.store.drift import DriftLimits

        return DriftLimits(self.drift_threshold, self.drift_min_pages, self.drift_length_ratio, self.drift_top_share)

    @property
    def requeue_policy(self) -> RequeuePolicy:
        """Which failed pages a requeue moves back (:func:`requeue_policy`)."""
        return requeue_policy(self.requeue_max, self.requeue_backoff_s)

    @classmethod
    def from_settings(cls, settings: Settings) -> CrawlConfig:
        """The crawl ``settings`` describe, validated (a bad value raises ``ConfigError`` naming the setting)."""
        from book_assets.scheduling.weights import resolve_weights

        site = site_named(settings.site)
        base_url = settings.base_url if "base_url" in settings.model_fields_set else site.default_base_url
        host = (urlsplit(base_url).hostname or "").lower()
        domains = frozenset(d.lower() for d in (settings.allowed_domains or (host,)))
        if host not in domains:
            raise ConfigError(f"invalid setting allowed_domains: the start URL's host {host} is not allowed")
        try:
            fetch = _fetch_settings(settings, domains, base_url)
        except ValueError as exc:  # the message names the setting (block_url_patterns, ...)
            raise ConfigError(f"invalid setting {exc}") from None
        interval = settings.min_interval_s
        if "min_interval_s" not in settings.model_fields_set and host in LOOPBACK_HOSTS:
            interval = 0.0
        copied = {f.name: getattr(settings, f.name) for f in fields(cls) if f.name in type(settings).model_fields}
        return cls(
            **{
                **copied,
                "site": site,
                "base_url": base_url,
                "allowed_domains": domains,
                "fetch": fetch,
                "weights": resolve_weights(settings),
                "min_interval_s": interval,
                "workers": _workers(settings),
                "min_concurrency": settings.concurrency
                or min(_starting_concurrency(settings), settings.max_concurrency),
                "archive_dir": settings.archive_dir if settings.warc else None,
            }
        )

    @classmethod
    def resolve(cls, **overrides: object) -> CrawlConfig:
        """The crawl of the environment's settings with ``overrides`` (setting names; None means not given)."""
        return cls.from_settings(load_settings(**overrides))

    def weights_by_category(self) -> dict[str, float]:
        """Explicit weights keyed by the category names detail tasks are grouped by."""
        return weights_by_category_name(self.weights, self.site.categories)

    @property
    def task_types(self) -> tuple[str, ...]:
        """The site's page kinds: the queue's task types."""
        return tuple(kind.name for kind in self.site.page_kinds)

    @property
    def listing_kinds(self) -> tuple[str, ...]:
        """The site's listing kinds: discovery, drained first by a budgeted crawl, read for its removals."""
        return kinds_of(self.site, Role.LISTING)

    @property
    def detail_kind(self) -> str:
        """The site's detail kind: its records, grouped by category for weights and budgets."""
        return default_kind(self.site, Role.DETAIL)

    def as_dict(self) -> dict[str, Any]:
        """The resolved configuration as JSON-ready values: printed by ``--show-config``, Dagster metadata."""
        skip = ("site", "fetch", "weights")
        out = {f.name: _json_ready(getattr(self, f.name)) for f in fields(self) if f.name not in skip}
        out["site"] = self.site.name
        out["fetch"] = {name: _json_ready(getattr(self.fetch, name)) for name in self.fetch.__slots__}
        out["weights"] = self.weights.as_dict()
        return out


def _json_ready(value: object) -> object:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, frozenset | set):
        return sorted(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def _workers(settings: Settings) -> int:
    """Worker processes the crawl runs (see ``WORKERS``)."""
    if settings.workers is not None:
        return settings.workers
    return BROWSER_WORKERS if settings.fetch_mode == "browser" else WORKERS


def _starting_concurrency(settings: Settings) -> int:
    """Pages in flight per worker an autoscaled crawl starts at (see ``BROWSER_MIN_CONCURRENCY``)."""
    if settings.min_concurrency is not None:
        return settings.min_concurrency
    return settings.max_concurrency if settings.fetch_mode == "http" else BROWSER_MIN_CONCURRENCY


def _fetch_settings(settings: Settings, domains: frozenset[str], base_url: str) -> FetchSettings:
    """The fetchers' share of ``settings``: every field of the same name, and the three derived ones."""
    derived = ("mode", "concurrency", "allowed_domains")
    names = [n for n in FetchSettings.__slots__ if n in type(settings).model_fields and n not in derived]
    return FetchSettings(
        **{name: getattr(settings, name) for name in names},
        mode=settings.fetch_mode,
        concurrency=settings.concurrency or settings.max_concurrency,
        # The fetchers compare ports too: the start host only at the start URL's port.
        allowed_domains=with_start_port(domains, base_url),
    )


def requeue_policy(requeue_max: int, requeue_backoff_s: float) -> RequeuePolicy:
    """The failed pages a requeue moves back: those whose error kind can change (``ErrorKind.retryable``, and a
    lost worker's expired lease), at most ``requeue_max`` times each, the n-th ``requeue_backoff_s * 4 ** n``
    after the page's last attempt. A 404, a robots.txt refusal or a page that is not a book page never."""
    kinds = {kind.value for kind in ErrorKind if kind.retryable} | {LEASE_EXPIRED}
    return RequeuePolicy.of(kinds, requeue_max, requeue_backoff_s)


def make_queue(db: Database, config: CrawlConfig | None = None, *, site: Site | None = None) -> TaskQueue:
    """The crawl's queue: its task types and, given the crawl's ``config``, its lease, retry policy,
    politeness defaults and epoch scope (the site: a crawl of one catalogue keeps its own epochs), which a
    worker needs; what only reads or requeues (stats, checks, sensors) passes none, or only the ``site`` whose
    task types it reads (the default site's when none)."""
    if config is None:
        return TaskQueue(db, task_types=TASK_TYPES if site is None else tuple(k.name for k in site.page_kinds))
    return TaskQueue(
        db,
        task_types=config.task_types,
        lease_s=config.lease_s,
        max_attempts=config.max_attempts,
        backoff=Backoff(base_s=config.backoff_base_s, max_s=config.backoff_max_s),
        default_interval_s=config.min_interval_s,
        epoch_scope=config.site.name,
    )
