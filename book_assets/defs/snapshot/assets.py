"""``category_balanced_snapshot``: the scheduling module's weighted sample of the stored books.

The asset only orchestrates: :mod:`book_assets.scheduling` builds the DataFrame (each category's share of
the budget follows its weight, capped by the books it has) and writes it to PostgreSQL, Parquet and a
target-vs-actual PNG chart; this module turns the result into Dagster metadata. The chart is embedded in a
Markdown value as a base64 data URI so the UI shows it inline, next to the path of the file itself.
"""

import base64
from pathlib import Path

import dagster as dg

from book_assets.defs.crawl.assets import book_details
from book_assets.defs.resources import DatabaseResource, SchedulingResource, run_settings_for_scheduling
from book_assets.scheduling.snapshot import build_snapshot, summary_markdown, write_snapshot
from book_assets.scheduling.weights import warn_unknown

GROUP = "snapshot"


def column_schema(frame: object) -> dg.TableSchema:
    """The DataFrame's columns and dtypes as a Dagster table schema."""
    dtypes = frame.dtypes  # type: ignore[attr-defined]
    return dg.TableSchema(columns=[dg.TableColumn(name=str(name), type=str(dtype)) for name, dtype in dtypes.items()])


def embedded_png(path: Path, alt: str = "chart") -> dg.MetadataValue:
    """Markdown showing the PNG at ``path`` inline (base64 data URI)."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return dg.MetadataValue.md(f"![{alt}](data:image/png;base64,{data})")


@dg.asset(
    group_name=GROUP,
    kinds={"pandas", "postgres", "parquet"},
    deps=[book_details],
    description="A category-balanced sample of the stored books: shares follow the category weights.",
)
def category_balanced_snapshot(
    context: dg.AssetExecutionContext, database: DatabaseResource, scheduling: SchedulingResource
) -> dg.MaterializeResult:
    settings = run_settings_for_scheduling(scheduling)
    weights = scheduling.category_weights(settings)
    with database.open() as db:
        snapshot = build_snapshot(db, weights, settings.snapshot_budget)
        written = write_snapshot(db, snapshot, settings.data_dir)
    unknown = warn_unknown(weights, snapshot.summary["category"].tolist())
    if unknown:
        context.log.warning(f"weights for unknown categories (check the spelling): {', '.join(unknown)}")
    context.log.info(f"snapshot of {written.rows} books written to table {written.table} and {written.parquet_path}")
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": written.rows,
            "dagster/column_schema": column_schema(snapshot.frame),
            "budget": settings.snapshot_budget,
            "categories": dg.MetadataValue.md(summary_markdown(snapshot.summary)),
            "weights": weights.source,
            "target_vs_actual": embedded_png(written.chart_path, "target vs actual share per category"),
            "chart_path": dg.MetadataValue.path(str(written.chart_path)),
            "parquet_path": dg.MetadataValue.path(str(written.parquet_path)),
            "summary_path": dg.MetadataValue.path(str(written.summary_path)),
            "table": written.table,
        }
    )
