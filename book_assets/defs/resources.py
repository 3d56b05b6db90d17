"""Dagster resources: the database, the fetcher, the target site and the scheduling knobs.

A field left unset (``None``) takes the value of the setting of the same name in
:class:`book_assets.settings.Settings` when the step runs, so ``BOOK_PIPELINE_*`` variables and ``.env`` keep
working; a field set in Dagster (launchpad config, ``dg.materialize(resources=...)``) overrides the setting for
that run. :func:`crawl_config` turns the three crawl resources into the :class:`CrawlConfig` the crawl library
takes, validated by the same code as the CLI's (a bad value fails with the setting's name).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dagster as dg
from pydantic import Field

from book_assets.crawl.config import CrawlConfig
from book_assets.db.connection import Database, mask_url, resolve_database_url
from book_assets.scheduling.weights import CategoryWeights, resolve_weights
from book_assets.settings import Settings, load_settings


def _set(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


class DatabaseResource(dg.ConfigurableResource):
    """The project's PostgreSQL: queue, books and snapshot tables."""

    url: str | None = Field(
        default=None,
        description="postgresql:// URL (from DATABASE_URL). Unset: the embedded server, started on demand.",
    )

    def resolved_url(self) -> str:
        """The URL to connect to (starting the embedded server when no URL is configured)."""
        return self.url or resolve_database_url(load_settings())

    def masked_url(self) -> str:
        """The URL with its password hidden: the only form that goes into logs and metadata."""
        return mask_url(self.resolved_url())

    @contextmanager
    def open(self, application_name: str = "book-pipeline dagster") -> Iterator[Database]:
        """A :class:`Database` for the duration of a step, closed afterwards."""
        db = Database(self.resolved_url(), application_name=application_name)
        try:
            yield db
        finally:
            db.close()


class FetcherResource(dg.ConfigurableResource):
    """How pages are fetched: Playwright Chromium or plain HTTP, and how many at once."""

    mode: str | None = Field(
        default=None, description="browser (Playwright Chromium), http (httpx) or adaptive (http where it suffices)."
    )
    javascript: str | None = Field(default=None, description="Browser JavaScript: on, off or auto (where needed).")
    workers: int | None = Field(default=None, description="Worker processes of a drain (one per core).")
    concurrency: int | None = Field(default=None, description="Pages in flight per worker process.")
    timeout_s: float | None = Field(default=None, description="Navigation / request timeout in seconds.")
    block_resource_types: list[str] | None = Field(
        default=None, description="Resource types the browser never loads (image, stylesheet, font, media)."
    )
    block_url_patterns: list[str] | None = Field(
        default=None, description="Regular expressions of URLs the browser never loads (analytics, ads)."
    )
    chromium_path: str | None = Field(default=None, description="Chromium executable (browser mode).")

    def settings_overrides(self) -> dict[str, Any]:
        return _set(
            fetch_mode=self.mode,
            javascript=self.javascript,
            workers=self.workers,
            concurrency=self.concurrency,
            timeout_s=self.timeout_s,
            block_resource_types=self.block_resource_types,
            block_url_patterns=self.block_url_patterns,
        )


class SiteResource(dg.ConfigurableResource):
    """The site being crawled and the politeness owed to it."""

    base_url: str | None = Field(default=None, description="Start URL: the root, a listing or a category page.")
    allowed_domains: list[str] | None = Field(default=None, description="Hosts the crawler may fetch.")
    rate: float | None = Field(
        default=None, description="Minimum seconds between request starts per domain (politeness); 0 disables."
    )
    max_in_flight_per_domain: int | None = Field(default=None, description="Cap on requests in flight per domain.")
    max_pages: int | None = Field(default=None, description="Listing pages followed per category chain.")
    categories: list[str] | None = Field(default=None, description="Only these categories (names or slugs).")

    def settings_overrides(self) -> dict[str, Any]:
        return _set(
            base_url=self.base_url,
            allowed_domains=self.allowed_domains,
            rate=self.rate,
            max_in_flight_per_domain=self.max_in_flight_per_domain,
            max_pages=self.max_pages,
        )


class SchedulingResource(dg.ConfigurableResource):
    """Category weights and budgets: how the detail pass and the snapshot share books between categories."""

    weights: dict[str, float] | None = Field(
        default=None, description='Category weights, e.g. {"Travel": 3, "Mystery": 2, "*": 1} ("*": the rest).'
    )
    weights_file: str | None = Field(default=None, description="JSON/YAML file of category weights.")
    deep_budget: int | None = Field(default=None, description="Detail pages per run, split by weight; unset: all.")
    interleave: int | None = Field(default=None, description="Detail pages handed out after each listing page.")
    snapshot_budget: int | None = Field(default=None, description="Books in the category-balanced snapshot.")
    data_dir: str | None = Field(default=None, description="Folder under which snapshot files are written.")

    def settings_overrides(self) -> dict[str, Any]:
        return _set(
            weights_file=self.weights_file,
            deep_budget=self.deep_budget,
            interleave=self.interleave,
            snapshot_budget=self.snapshot_budget,
            data_dir=self.data_dir,
        )

    def category_weights(self, settings: Settings) -> CategoryWeights:
        """The run's category weights: the weights file's entries, overridden by ``weights`` (or the setting)."""
        return resolve_weights(settings, weights=self.weights)


def run_settings(site: SiteResource, fetcher: FetcherResource, scheduling: SchedulingResource) -> Settings:
    """Settings of one run: the environment's, overridden by whatever the resources set."""
    return load_settings(**site.settings_overrides(), **fetcher.settings_overrides(), **scheduling.settings_overrides())


def run_settings_for_scheduling(scheduling: SchedulingResource) -> Settings:
    """Settings of a run that only needs the scheduling knobs (the snapshot)."""
    return load_settings(**scheduling.settings_overrides())


def crawl_config(site: SiteResource, fetcher: FetcherResource, scheduling: SchedulingResource) -> CrawlConfig:
    """The :class:`CrawlConfig` the resources describe."""
    overrides: dict[str, Any] = _set(
        categories=tuple(site.categories) if site.categories else None, chromium_path=fetcher.chromium_path
    )
    return CrawlConfig.from_settings(
        run_settings(site, fetcher, scheduling), inline_weights=scheduling.weights, **overrides
    )


def default_resources() -> dict[str, dg.ConfigurableResource]:
    """The resources of the code location; everything unset reads the settings at run time."""
    url = os.environ.get("DATABASE_URL")
    return {
        # EnvVar keeps the URL (and its password) out of the UI's config view; unset means the embedded server.
        "database": DatabaseResource(url=dg.EnvVar("DATABASE_URL")) if url else DatabaseResource(),
        "fetcher": FetcherResource(),
        "site": SiteResource(),
        "scheduling": SchedulingResource(),
    }
