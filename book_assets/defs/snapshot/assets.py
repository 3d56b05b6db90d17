"""``category_balanced_snapshot``: the scheduling module's weighted sample of the stored books, one per day.

The asset is partitioned by day (UTC). Partition ``D`` is built from ``book_versions`` as the books stood at
the end of ``D``, so a backfill rebuilds past days and the UI shows one row per day. A run names its day:
without a partition key the step fails (:func:`snapshot_day`) rather than guess one.

The asset only orchestrates: :mod:`book_assets.publish.snapshot` chooses the books (each category's share
of the budget follows its weight, capped by the books it has) and publishes them (table rows of the day,
Parquet, CSV, a target-vs-actual PNG); this module turns the result into Dagster metadata. The chart is
embedded in a Markdown value as a base64 data URI so the UI shows it inline, next to the file's path.
"""

import base64
from collections.abc import Iterable
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd

from book_assets.defs.catalog import OWNERS, PUBLISH_AUTOMATION, SNAPSHOT_SCHEMA, SNAPSHOT_TABLE, tags_for
from book_assets.defs.resources import DatabaseResource, SchedulingResource, run_settings
from book_assets.defs.retries import TRANSIENT_RETRY, transient_only
from book_assets.publish.snapshot import build_snapshot, write_snapshot
from book_assets.scheduling.weights import resolve_weights, warn_unknown
from book_assets.settings import load_settings

GROUP = "snapshot"
#: First day a snapshot partition exists for (a setting, read when the location loads).
START_DATE = load_settings().snapshot_start_date
#: One partition per day (UTC), today's included (``end_offset=1``) so the daily run can build it.
SNAPSHOT_DAYS = dg.DailyPartitionsDefinition(start_date=START_DATE, end_offset=1, timezone="UTC")
#: Columns of the per-category summary table in the materialization metadata.
SUMMARY_SCHEMA = dg.TableSchema(
    columns=[
        dg.TableColumn("category", "string"),
        dg.TableColumn("weight", "float"),
        dg.TableColumn("available", "int"),
        dg.TableColumn("quota", "int"),
        dg.TableColumn("count", "int"),
        dg.TableColumn("target_share", "float"),
        dg.TableColumn("actual_share", "float"),
        dg.TableColumn("mean_price", "float"),
        dg.TableColumn("mean_rating", "float"),
    ]
)


def snapshot_day(context: dg.AssetExecutionContext | dg.OpExecutionContext, job: str = "publish_job") -> date:
    """The run's partition as a date; a run without a partition key fails, naming what to give (``job``: the job
    that publishes the asset's days).

    Why not today by default: a run launched without a key would then rebuild today's partition whatever
    day it was meant for, and a backfill's run that lost its key would overwrite today in silence.
    """
    if not context.has_partition_key:
        names = ", ".join(key.to_user_string() for key in context.selected_asset_keys)
        raise dg.Failure(
            description=f"{names} is partitioned by day (UTC): materialize it with a partition key, e.g. "
            f"`dg launch --job {job} --partition 2026-03-01`, or backfill {job} over a range of days",
            allow_retries=False,
        )
    return date.fromisoformat(context.partition_key)


def summary_table(summary: pd.DataFrame) -> dg.MetadataValue:
    """The per-category summary as a Dagster table (shares rounded to 4 places, NaN means left out)."""
    records = []
    # Each row's fields are the summary's columns, which pandas types only as "any scalar".
    rows: Iterable[Any] = summary.itertuples(index=False)
    for r in rows:
        row: dict[str, str | int | float] = {
            "category": str(r.category),
            "weight": float(r.weight),
            "available": int(r.available),
            "quota": int(r.quota),
            "count": int(r.count),
            "target_share": round(float(r.target_share), 4),
            "actual_share": round(float(r.actual_share), 4),
        }
        if not pd.isna(r.mean_price):
            row["mean_price"] = round(float(r.mean_price), 2)
        if not pd.isna(r.mean_rating):
            row["mean_rating"] = round(float(r.mean_rating), 2)
        records.append(dg.TableRecord(row))
    return dg.MetadataValue.table(records=records, schema=SUMMARY_SCHEMA)


def embedded_png(path: Path, alt: str = "chart") -> dg.MetadataValue:
    """Markdown showing the PNG at ``path`` inline (base64 data URI)."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return dg.MetadataValue.md(f"![{alt}](data:image/png;base64,{data})")


@dg.asset(
    group_name=GROUP,
    kinds={"pandas", "postgres", "parquet"},
    deps=[dg.AssetKey("book_details")],
    partitions_def=SNAPSHOT_DAYS,
    automation_condition=PUBLISH_AUTOMATION,
    retry_policy=TRANSIENT_RETRY,
    owners=OWNERS,
    tags=tags_for("publish"),
    metadata={"dagster/table_name": SNAPSHOT_TABLE, "dagster/column_schema": SNAPSHOT_SCHEMA},
    description=(
        "A category-balanced sample of the books as they stood at the end of each day: shares follow the "
        "category weights."
    ),
)
def category_balanced_snapshot(
    context: dg.AssetExecutionContext, database: DatabaseResource, scheduling: SchedulingResource
) -> dg.MaterializeResult[None]:
    day = snapshot_day(context)
    settings = run_settings(scheduling)
    weights = resolve_weights(settings)
    with transient_only(context.op_execution_context), database.open() as db:
        snapshot = build_snapshot(db, weights, settings.snapshot_budget, day)
        written = write_snapshot(db, snapshot, settings.data_dir)
    unknown = warn_unknown(weights, snapshot.summary["category"].tolist())
    if unknown:
        context.log.warning(f"weights for unknown categories (check the spelling): {', '.join(unknown)}")
    context.log.info(f"snapshot of {day}: {written.rows} books in table {written.table} and {written.parquet_path}")
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": written.rows,
            "snapshot_day": day.isoformat(),
            "books_available": sum(snapshot.available.values()),
            "budget": settings.snapshot_budget,
            "categories": summary_table(snapshot.summary),
            "weights": weights.source,
            "target_vs_actual": embedded_png(written.chart_path, "target vs actual share per category"),
            "chart_path": dg.MetadataValue.path(str(written.chart_path)),
            "parquet_path": dg.MetadataValue.path(str(written.parquet_path)),
            "summary_path": dg.MetadataValue.path(str(written.summary_path)),
            "table": written.table,
        }
    )
