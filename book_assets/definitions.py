"""The Dagster code location: a dg project whose definitions are loaded from the ``book_assets/defs`` folder.

Every module under ``defs/`` contributes what it defines (``crawl/``: each served catalogue's assets, checks,
jobs and schedule, and the sensors; ``snapshot/``: the daily snapshot and its check, and every other
catalogue's with its publish job (``catalogues.py``); ``changes/``: the daily change feed); this module adds the
resources, the executor, each catalogue's details asset's freshness policy (from the schedule's cron) and code
references (each asset links to the file and line of its definition in the UI).
The schedule's cron and the sensor's threshold are settings read when the location loads, so a bad
``BOOK_PIPELINE_SCHEDULE_CRON`` fails the load with a message naming the setting; :func:`build_definitions`
re-raises that message as it is, whatever the loader wrapped it in.

``ASSETS`` and ``ASSET_CHECKS`` list the asset graph (every served catalogue's) for code that binds its own
resources (tests); ``BOOKS_ASSETS`` and ``BOOKS_CHECKS`` the books' part, their crawl and the daily assets
built on it, for a materialization of all of it against one site.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import dagster as dg

from book_assets.defs.archive.assets import raw_archive
from book_assets.defs.catalog import crawl_keys, refresh_freshness
from book_assets.defs.changes.assets import book_changes
from book_assets.defs.crawl.assets import crawl_asset
from book_assets.defs.crawl.catalogue import served_sites
from book_assets.defs.crawl.checks import crawl_checks
from book_assets.defs.resources import default_resources
from book_assets.defs.snapshot.assets import category_balanced_snapshot
from book_assets.defs.snapshot.catalogues import SITE_SNAPSHOT_ASSETS, SITE_SNAPSHOT_CHECKS
from book_assets.defs.snapshot.checks import SNAPSHOT_CHECKS
from book_assets.settings import ConfigError, default, load_settings
from book_assets.sites.registry import site_named

PUBLISHING = [category_balanced_snapshot, book_changes, raw_archive]
ASSETS = [*(crawl_asset(site) for site in served_sites()), *PUBLISHING, *SITE_SNAPSHOT_ASSETS]
ASSET_CHECKS = [
    *(check for site in served_sites() for check in crawl_checks(site).every),
    *SNAPSHOT_CHECKS,
    *SITE_SNAPSHOT_CHECKS,
]
BOOKS_ASSETS = [crawl_asset(site_named(default("site"))), *PUBLISHING]
BOOKS_CHECKS = [*crawl_checks(site_named(default("site"))).every, *SNAPSHOT_CHECKS]


def _config_error(exc: BaseException | None) -> ConfigError | None:
    while exc is not None:
        if isinstance(exc, ConfigError):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def build_definitions() -> dg.Definitions:
    """The definitions of the defs folder, with the settings of the environment (read now)."""
    try:
        folder = dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
    except Exception as exc:
        error = _config_error(exc)
        if error is None:
            raise
        raise ConfigError(str(error)) from None
    merged = dg.Definitions.merge(
        folder,
        dg.Definitions(
            resources=default_resources(),
            # In process: the lineage is a chain and the crawl's one drain step spawns its own worker processes, so a
            # subprocess per step would only add a definitions load (tens of seconds on two cores) per step.
            executor=dg.in_process_executor,
        ),
    )
    settings = load_settings()
    freshness = refresh_freshness(settings.schedule_cron, settings.refresh_deadline_minutes)
    return with_code_references(merged, freshness=freshness)


def with_code_references(loaded: dg.Definitions, freshness: dg.FreshnessPolicy | None = None) -> dg.Definitions:
    """``loaded`` with every asset's ``dagster/code_references`` pointing at the function that defines it, and
    ``freshness`` (when given) as the freshness policy of every served catalogue's details asset
    (``book_details``, ``quotes/details``): it follows a setting, read at each load, where the asset's module is
    imported once per process.

    The defs folder loader finds an asset once in its own module and again in every module that imports it;
    the copies are one object, kept once here so that the mapped assets stay one per key.
    """
    unique = list({id(a): a for a in loaded.assets or []}.values())
    if freshness is not None:
        details = {crawl_keys(site.name).details for site in served_sites()}

        def fresh(spec: dg.AssetSpec) -> dg.AssetSpec:
            return spec.replace_attributes(freshness_policy=freshness) if spec.key in details else spec

        for i, asset in enumerate(unique):
            if isinstance(asset, dg.AssetsDefinition):
                unique[i] = asset.map_asset_specs(fresh)
            elif isinstance(asset, dg.AssetSpec):
                unique[i] = fresh(asset)
    with warnings.catch_warnings():
        # Code references are a beta API; the warning would repeat on every load of the location.
        warnings.simplefilter("ignore", dg.BetaWarning)
        assets = dg.with_source_code_references(unique)
    return dg.Definitions(
        assets=assets,
        asset_checks=loaded.asset_checks,
        jobs=loaded.jobs,
        schedules=loaded.schedules,
        sensors=loaded.sensors,
        resources=loaded.resources,
        executor=loaded.executor,
        loggers=loaded.loggers,
        metadata=loaded.metadata,
    )


@dg.definitions
def defs() -> dg.Definitions:
    return build_definitions()
