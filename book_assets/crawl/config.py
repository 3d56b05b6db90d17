"""One crawl's configuration: settings plus per-run overrides, picklable for worker processes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from book_assets.categories import KNOWN_CATEGORIES, slugify
from book_assets.scraper.fetching import FetchSettings
from book_assets.scraper.targets import with_start_port
from book_assets.settings import ConfigError, Settings

if TYPE_CHECKING:
    from book_assets.scheduling.weights import CategoryWeights

LISTING = "listing"
DETAIL = "detail"
TASK_TYPES = (LISTING, DETAIL)
#: Listing pages are discovery: ahead of details inside their own class, interleaved across classes.
LISTING_PRIORITY = 10
DETAIL_PRIORITY = 5


def weights_by_category_name(weights: CategoryWeights | Mapping[str, float]) -> dict[str, float]:
    """Explicit weights keyed by category name (slugs of known categories translated), unknown names warned.

    Detail tasks are grouped by the category name the site shows, so a weight given by slug
    ("sequential-art") must reach the queue as "Sequential Art" to apply.
    """
    from book_assets.scheduling.weights import CategoryWeights, warn_unknown

    if not isinstance(weights, CategoryWeights):
        weights = CategoryWeights({k: v for k, v in weights.items() if k != "*"})
    warn_unknown(weights, KNOWN_CATEGORIES)
    by_slug = {slugify(name): name for name in KNOWN_CATEGORIES}
    return {by_slug.get(slugify(key), key): float(value) for key, value in weights.weights.items()}


@dataclass(frozen=True)
class CrawlConfig:
    """Everything a worker needs to crawl; built by :meth:`from_settings`."""

    base_url: str
    allowed_domains: frozenset[str]
    fetch: FetchSettings
    workers: int = 2
    max_pages: int | None = None
    categories: tuple[str, ...] | None = None
    rate: float = 1.0
    max_in_flight_per_domain: int | None = None
    lease_s: float = 60.0
    max_attempts: int = 5
    backoff_base_s: float = 1.0
    backoff_max_s: float = 300.0
    weights: dict[str, float] = field(default_factory=dict)
    default_weight: float = 1.0
    deep_budget: int | None = None
    interleave: int = 20
    chromium_path: str | None = None
    adaptive_probe_pages: int = 5
    #: Pages in flight per worker autoscale between this and ``fetch.concurrency``; equal: pinned.
    min_concurrency: int = 4
    adaptive_sample_rate: float = 0.02

    @classmethod
    def from_settings(
        cls, settings: Settings, *, inline_weights: Mapping[str, object] | str | None = None, **overrides: object
    ) -> CrawlConfig:
        """The config of ``settings``, with ``overrides`` of any field.

        Category weights come from the settings' weights file and inline weights, overridden by
        ``inline_weights`` (Dagster config, for example), unless ``weights`` is given outright.
        """
        if "weights" not in overrides:
            from book_assets.scheduling.weights import resolve_weights

            resolved = resolve_weights(settings, weights=inline_weights)
            overrides["weights"] = dict(resolved.weights)
            overrides.setdefault("default_weight", resolved.default)
        base_url = str(overrides.pop("base_url", None) or settings.base_url)
        host = (urlsplit(base_url).hostname or "").lower()
        if not host:
            raise ConfigError(f"invalid setting base_url: {base_url!r} has no host")
        domains = frozenset(d.lower() for d in (settings.allowed_domains or (host,)))
        if host not in domains:
            raise ConfigError(f"invalid setting allowed_domains: the start URL's host {host} is not allowed")
        try:
            fetch = _fetch_settings(settings, domains, base_url)
        except ValueError as exc:  # the message names the setting (block_url_patterns, ...)
            raise ConfigError(f"invalid setting {exc}") from None
        config = cls(
            base_url=base_url,
            allowed_domains=domains,
            fetch=fetch,
            workers=settings.workers,
            max_pages=settings.max_pages,
            rate=settings.rate,
            max_in_flight_per_domain=settings.max_in_flight_per_domain,
            lease_s=settings.lease_s,
            max_attempts=settings.max_attempts,
            backoff_base_s=settings.backoff_base_s,
            backoff_max_s=settings.backoff_max_s,
            deep_budget=settings.deep_budget,
            interleave=settings.interleave,
            chromium_path=settings.chromium_path,
            adaptive_probe_pages=settings.adaptive_probe_pages,
            adaptive_sample_rate=settings.adaptive_sample_rate,
            min_concurrency=settings.concurrency or min(settings.min_concurrency, settings.max_concurrency),
        )
        fetch_overrides = {
            k: overrides.pop(k) for k in ("mode", "concurrency", "timeout_s", "javascript") if k in overrides
        }
        if "concurrency" in fetch_overrides:  # a number pins it
            config = replace(config, min_concurrency=int(fetch_overrides["concurrency"]))  # type: ignore[call-overload]
        if fetch_overrides:
            try:
                config = replace(config, fetch=replace(config.fetch, **fetch_overrides))
            except ValueError as exc:
                raise ConfigError(f"invalid setting: {exc}") from None
        return replace(config, **overrides) if overrides else config


def _fetch_settings(settings: Settings, domains: frozenset[str], base_url: str) -> FetchSettings:
    """The fetchers' share of ``settings``."""
    return FetchSettings(
        mode=settings.fetch_mode,
        javascript=settings.javascript,
        concurrency=settings.concurrency or settings.max_concurrency,
        timeout_s=settings.timeout_s,
        block_resource_types=frozenset(settings.block_resource_types),
        block_url_patterns=tuple(settings.block_url_patterns),
        # The fetchers compare ports too: the start host only at the start URL's port.
        allowed_domains=with_start_port(domains, base_url),
        max_body_bytes=settings.max_body_bytes,
        relaunch_after_pages=settings.relaunch_after_pages,
        recycle_page_after=settings.recycle_page_after,
        user_agent=settings.user_agent,
        retry_after_max_s=settings.retry_after_max_s,
    )
