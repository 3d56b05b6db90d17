"""Dagster resources: the database, the fetcher, the target site, the scheduling knobs and the archive.

Every field of the fetcher, site and scheduling resources is named after a setting and documented by it
(:mod:`book_assets.settings` declares each default once). A field left unset (``None``) takes the setting's
value when the step runs, so ``BOOK_PIPELINE_*`` variables and ``.env`` keep working; a field set in Dagster
(launchpad config, ``dg.materialize(resources=...)``) overrides the setting for that run.
:func:`crawl_config` turns the three crawl resources into the :class:`CrawlConfig` the crawl library takes,
validated by the same code as the CLI's (a bad value fails with the setting's name).
"""

from __future__ import annotations

import enum
import os
import typing
from typing import Any

import dagster as dg
from pydantic import Field

from book_assets.crawl.config import CrawlConfig
from book_assets.db.connection import Database, mask_url, resolve_database_url
from book_assets.settings import ConfigError, Settings, describe, load_settings


# A ConfigurableResource is generic in the value it hands an asset, which for these is the resource itself.
class DatabaseResource(dg.ConfigurableResource[Any]):
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

    def open(self, application_name: str = "book-pipeline dagster") -> Database:
        """A :class:`Database` for the duration of a step (``with database.open() as db``), closed afterwards."""
        return Database(self.resolved_url(), application_name=application_name)


def overrides_of(model: dg.ConfigurableResource[Any] | dg.Config) -> dict[str, Any]:
    """The fields of a resource or run config that are set, by setting name (enum choices as their value)."""
    values = {name: getattr(model, name) for name in type(model).model_fields if name in SETTING_NAMES}
    return {name: getattr(v, "value", v) for name, v in values.items() if v is not None}


class SettingsResource(dg.ConfigurableResource[Any]):
    """Overrides of the settings of the same names: a field left unset keeps the setting's value."""

    def settings_overrides(self) -> dict[str, Any]:
        """The fields set in Dagster, by setting name."""
        return overrides_of(self)


class CrawlRunConfig(dg.Config):
    """What one run of the crawl may change in the launchpad, over the resources and the settings."""

    deep_budget: int | None = Field(default=None, description=describe("deep_budget"))
    categories: list[str] | None = Field(default=None, description=describe("categories"))
    weights: dict[str, float] | None = Field(default=None, description=describe("weights"))
    max_pages: int | None = Field(default=None, description=describe("max_pages"))
    requeue_failed: bool = Field(
        default=False,
        description="Move the failed pages that can succeed (transient failures due for a requeue) back to "
        "pending and drain them (no new seed): a retry of the failures.",
    )
    include_permanent: bool = Field(
        default=False,
        description="With requeue_failed: move every failed task back, permanent failures (404, robots, not a "
        "book page) and pages past their requeues included.",
    )


SETTING_NAMES = frozenset(Settings.model_fields)


def _choices(name: str) -> type[enum.Enum]:
    """The choices of setting ``name`` as an enum: how Dagster's launchpad offers a fixed set of values."""
    values = typing.get_args(Settings.model_fields[name].annotation)
    members = {str(v): str(v) for v in values}
    # mypy reads Enum() with a computed class name as a member lookup, which returns a member, not a class.
    return enum.Enum(f"{name.title().replace('_', '')}", members, type=str)  # type: ignore[return-value]


FetchMode = _choices("fetch_mode")
JavaScript = _choices("javascript")


class FetcherResource(SettingsResource):
    """How pages are fetched: Playwright Chromium or plain HTTP, and how many at once."""

    # The two enums are built at import time from the settings' Literal choices (declared once, there), and
    # mypy cannot take a value computed at import time as a type: valid-type, for these two fields only.
    fetch_mode: FetchMode | None = Field(default=None, description=describe("fetch_mode"))  # type: ignore[valid-type]
    javascript: JavaScript | None = Field(default=None, description=describe("javascript"))  # type: ignore[valid-type]
    workers: int | None = Field(default=None, description=describe("workers"))
    concurrency: int | None = Field(default=None, description=describe("concurrency"))
    timeout_s: float | None = Field(default=None, description=describe("timeout_s"))
    block_resource_types: list[str] | None = Field(default=None, description=describe("block_resource_types"))
    block_url_patterns: list[str] | None = Field(default=None, description=describe("block_url_patterns"))
    chromium_path: str | None = Field(default=None, description=describe("chromium_path"))
    conditional_requests: bool | None = Field(default=None, description=describe("conditional_requests"))


class SiteResource(SettingsResource):
    """The site being crawled and the politeness owed to it."""

    site: str | None = Field(default=None, description=describe("site"))
    base_url: str | None = Field(default=None, description=describe("base_url"))
    allowed_domains: list[str] | None = Field(default=None, description=describe("allowed_domains"))
    min_interval_s: float | None = Field(default=None, description=describe("min_interval_s"))
    max_in_flight_per_domain: int | None = Field(default=None, description=describe("max_in_flight_per_domain"))
    max_pages: int | None = Field(default=None, description=describe("max_pages"))
    categories: list[str] | None = Field(default=None, description=describe("categories"))


class SchedulingResource(SettingsResource):
    """Category weights and budgets: how the detail pass and the snapshot share books between categories."""

    weights: dict[str, float] | None = Field(default=None, description=describe("weights"))
    weights_file: str | None = Field(default=None, description=describe("weights_file"))
    deep_budget: int | None = Field(default=None, description=describe("deep_budget"))
    interleave: int | None = Field(default=None, description=describe("interleave"))
    snapshot_budget: int | None = Field(default=None, description=describe("snapshot_budget"))
    data_dir: str | None = Field(default=None, description=describe("data_dir"))


class ArchiveResource(SettingsResource):
    """Where the WARC archive lives: the crawl writes it, ``raw_archive`` indexes and counts a day of it."""

    warc_dir: str | None = Field(default=None, description=describe("warc_dir"))
    data_dir: str | None = Field(default=None, description=describe("data_dir"))


def run_settings(*resources: SettingsResource) -> Settings:
    """Settings of one run: the environment's, overridden by whatever the resources set."""
    return load_settings(**settings_overrides_of(*resources))


def crawl_config(
    site: SiteResource, fetcher: FetcherResource, scheduling: SchedulingResource, run: CrawlRunConfig | None = None
) -> CrawlConfig:
    """The :class:`CrawlConfig` the resources and the run's config describe, validated as the CLI's is.

    A crawl graph's run config names its catalogue (``site``, set by the graph for the asset's site): that
    site is crawled, whatever the ``site`` setting of the environment says. The site resource's ``site``
    field, when set, must name the same catalogue: a run of one catalogue's assets that would crawl another
    is refused in one line. A run config without a site (a step run on its own) crawls the resource's site,
    or the setting's.
    """
    per_run = overrides_of(run) if run is not None else {}
    resource = settings_overrides_of(site, fetcher, scheduling)
    chosen, named = per_run.get("site"), resource.get("site")
    if chosen is not None and named is not None and named != chosen:
        raise ConfigError(
            f"invalid setting site (the Dagster site resource): it names {named!r}, but this run crawls the assets "
            f"of site {chosen!r}; leave it unset (each catalogue's assets crawl their own site)"
        )
    return CrawlConfig.from_settings(load_settings(**{**resource, **per_run}))


def settings_overrides_of(*resources: SettingsResource) -> dict[str, Any]:
    """Every override the resources set, later resources winning."""
    overrides: dict[str, Any] = {}
    for resource in resources:
        overrides.update(resource.settings_overrides())
    return overrides


def default_resources() -> dict[str, dg.ConfigurableResource[Any]]:
    """The resources of the code location; everything unset reads the settings at run time."""
    url = os.environ.get("DATABASE_URL")
    return {
        # EnvVar keeps the URL (and its password) out of the UI's config view; unset means the embedded server.
        "database": DatabaseResource(url=dg.EnvVar("DATABASE_URL")) if url else DatabaseResource(),
        "fetcher": FetcherResource(),
        "site": SiteResource(),
        "scheduling": SchedulingResource(),
        "archive": ArchiveResource(),
    }
