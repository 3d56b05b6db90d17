"""Every other catalogue's daily snapshot: ``<site>/category_balanced_snapshot``, its share check and its
``<site>_publish_job``, made by one factory over a site definition (:func:`site_snapshot`).

The books' snapshot (:mod:`.assets`) keeps its key, table and files. Each other shipped site whose definition
publishes (``Site.publishing``, :mod:`book_assets.publish.publishing`) gets the same asset under its own prefix:
partitioned by day like the books' (:data:`~.assets.SNAPSHOT_DAYS`), after its crawl's details asset
(:func:`book_assets.defs.catalog.crawl_keys`), published by the same automation, built by the same generic
path (:func:`book_assets.publish.snapshot.build_snapshot` over the site's snapshot source, with the same
weights and budget settings) and written as files only: ``<data_dir>/<site>/snapshots/<day>/``. Its check
reads the day's Parquet file back and recomputes the targets from the site's records, as the books' check
does from the table. This module names no site: it reads them from the registry.
"""

from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
import pandas as pd

from book_assets.db.connection import Cursor, Database
from book_assets.defs.catalog import OWNERS, PUBLISH_AUTOMATION, crawl_keys, crawl_name, tags_for
from book_assets.defs.resources import DatabaseResource, SchedulingResource, run_settings
from book_assets.defs.retries import TRANSIENT_RETRY, transient_only
from book_assets.defs.snapshot.assets import GROUP, SNAPSHOT_DAYS, embedded_png, snapshot_day, summary_table
from book_assets.defs.snapshot.checks import shares_result
from book_assets.publish.publishing import SnapshotSource
from book_assets.publish.snapshot import (
    PARQUET_NAME,
    build_snapshot,
    day_bounds,
    site_day_folder,
    write_snapshot_files,
)
from book_assets.scheduling.quotas import split_budget
from book_assets.scheduling.weights import resolve_weights, warn_unknown
from book_assets.settings import default
from book_assets.sites.registry import SITES
from book_assets.sites.site import Site
from book_assets.sql import load_queries

if TYPE_CHECKING:  # what define_asset_job returns; Dagster does not export its type
    from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

#: The transaction settings every snapshot read runs under (counts and rows from one view).
SNAPSHOT_Q = load_queries("snapshot")


@dataclass(frozen=True)
class SiteSnapshot:
    """One catalogue's daily snapshot: the asset, its share check and the job that publishes its days."""

    asset: dg.AssetsDefinition
    check: dg.AssetChecksDefinition
    job: "UnresolvedAssetJobDefinition"


def snapshot_key(site: str) -> dg.AssetKey:
    """``<site>/category_balanced_snapshot``."""
    return dg.AssetKey([site, "category_balanced_snapshot"])


def publish_job_name(site: str) -> str:
    """``<site>_publish_job``: the job that publishes one day of a catalogue (and backfills its days)."""
    return f"{site}_publish_job"


def site_snapshot(site: Site) -> SiteSnapshot:
    """The daily snapshot asset of ``site``, its check and its publish job (see the module's docstring)."""
    if site.publishing is None:
        raise ValueError(f"site {site.name} publishes nothing: it has no snapshot")
    source = site.publishing.snapshot
    name, key, job = site.name, snapshot_key(site.name), publish_job_name(site.name)

    @dg.asset(
        key=key,
        group_name=crawl_name(site.name, GROUP),
        kinds={"pandas", "parquet"},
        deps=[crawl_keys(name).details],
        partitions_def=SNAPSHOT_DAYS,
        automation_condition=PUBLISH_AUTOMATION,
        retry_policy=TRANSIENT_RETRY,
        owners=OWNERS,
        tags=tags_for("publish"),
        description=(
            f"A category-balanced sample of the {source.unit} of site {name} as they stood at the end of each "
            "day: shares follow the category weights. Written as files under the data folder."
        ),
    )
    def _snapshot(
        context: dg.AssetExecutionContext, database: DatabaseResource, scheduling: SchedulingResource
    ) -> dg.MaterializeResult[None]:
        day = snapshot_day(context, job=job)
        settings = run_settings(scheduling)
        weights = resolve_weights(settings)
        with transient_only(context.op_execution_context), database.open() as db:
            snapshot = build_snapshot(db, weights, settings.snapshot_budget, day, source)
        written = write_snapshot_files(snapshot, site_day_folder(settings.data_dir, name, day))
        unknown = warn_unknown(weights, snapshot.summary["category"].tolist())
        if unknown:
            context.log.warning(f"weights for unknown categories (check the spelling): {', '.join(unknown)}")
        context.log.info(f"{name} snapshot of {day}: {written.rows} {source.unit} in {written.parquet_path}")
        return dg.MaterializeResult(
            metadata={
                "dagster/row_count": written.rows,
                "snapshot_day": day.isoformat(),
                f"{source.unit}_available": sum(snapshot.available.values()),
                "budget": settings.snapshot_budget,
                "categories": summary_table(snapshot.summary),
                "weights": weights.source,
                "target_vs_actual": embedded_png(written.chart_path, "target vs actual share per category"),
                "chart_path": dg.MetadataValue.path(str(written.chart_path)),
                "parquet_path": dg.MetadataValue.path(str(written.parquet_path)),
                "summary_path": dg.MetadataValue.path(str(written.summary_path)),
            }
        )

    @dg.asset_check(
        asset=key,
        name="shares_within_tolerance",
        retry_policy=TRANSIENT_RETRY,
        description="Each category's share of the day's snapshot file is within max(1 record, 2%) of its weighted "
        "target.",
    )
    def _shares(
        context: dg.AssetCheckExecutionContext, database: DatabaseResource, scheduling: SchedulingResource
    ) -> dg.AssetCheckResult:
        settings = run_settings(scheduling)
        day = _checked_day(context, settings.data_dir, name)
        if day is None:
            return dg.AssetCheckResult(
                passed=False, severity=dg.AssetCheckSeverity.WARN, description=f"no {name} snapshot file yet"
            )
        parquet = site_day_folder(settings.data_dir, name, day) / PARQUET_NAME
        if not parquet.is_file():
            return dg.AssetCheckResult(
                passed=False, severity=dg.AssetCheckSeverity.WARN, description=f"{day}: no file {parquet}"
            )
        categories = pd.read_parquet(parquet, columns=["category"])["category"]
        actual = {str(c): int(n) for c, n in categories.value_counts().items()}
        with transient_only(context.op_execution_context), database.open(application_name="book-pipeline checks") as db:
            available = _available(db, source, day)
        targets = split_budget(settings.snapshot_budget, resolve_weights(settings), available)
        return shares_result(day, targets, actual, source.unit)

    return SiteSnapshot(
        asset=_snapshot,
        check=_shares,
        job=dg.define_asset_job(
            name=job,
            selection=dg.AssetSelection.assets(key),
            description=f"Rebuild one day's snapshot of site {name} from the stored records (no crawl): launch it "
            "with the day as partition key, or backfill it over past days.",
        ),
    )


def _available(db: Database, source: SnapshotSource, day: date) -> dict[str, int]:
    """The records per category as of the end of ``day``, read in one consistent view."""

    def _read(cur: Cursor) -> dict[str, int]:
        cur.execute(SNAPSHOT_Q["consistent_read"])
        return source.category_counts(cur, day_bounds(day)[1])

    return db.run(_read)


def _checked_day(context: dg.AssetCheckExecutionContext, data_dir: Path, site: str) -> date | None:
    """The run's partition, else the newest day with a snapshot folder (None: none yet)."""
    op_context = context.op_execution_context
    if op_context.has_partition_key:
        return date.fromisoformat(op_context.partition_key)
    folder = Path(data_dir) / site / "snapshots"
    days = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    return date.fromisoformat(days[-1]) if days else None


#: The snapshot of every shipped site but the default one (the books', :mod:`.assets`) that publishes.
SITE_SNAPSHOTS = [
    site_snapshot(site) for name, site in SITES.items() if name != default("site") and site.publishing is not None
]
SITE_SNAPSHOT_ASSETS = [s.asset for s in SITE_SNAPSHOTS]
SITE_SNAPSHOT_CHECKS = [s.check for s in SITE_SNAPSHOTS]
SITE_PUBLISH_JOBS = [s.job for s in SITE_SNAPSHOTS]
