"""``book_changes``: the change feed of each day, exported as files, with a chart of changes per day.

Partitioned by day (UTC) like the snapshot: partition ``D`` holds the books new, changed (with the changed
fields), removed or returned on ``D`` (:mod:`book_assets.publish.changes`), so a backfill rebuilds past days. A
run without a partition key fails. The asset only orchestrates: the library writes the files
and draws the chart, this module turns the result into Dagster metadata (the chart inline, as the snapshot's).
"""

from datetime import timedelta

import dagster as dg

from book_assets.defs.catalog import OWNERS, PUBLISH_AUTOMATION, tags_for
from book_assets.defs.resources import DatabaseResource, SchedulingResource, run_settings
from book_assets.defs.retries import TRANSIENT_RETRY, transient_only
from book_assets.defs.snapshot.assets import SNAPSHOT_DAYS, embedded_png, snapshot_day
from book_assets.publish.changes import CHANGES, PublishedChanges, publish_changes

GROUP = "changes"
#: Days of the per-day table in the metadata (the chart shows more).
TABLE_DAYS = 7
FEED_SCHEMA = dg.TableSchema(
    columns=[
        dg.TableColumn("day", "date", "The day (UTC) of the change."),
        dg.TableColumn("change", "string", "new, changed, returned or removed."),
        dg.TableColumn("book_id", "int"),
        dg.TableColumn("url", "string"),
        dg.TableColumn("title", "string", "As of the day's end."),
        dg.TableColumn("category", "string", "As of the day's end."),
        dg.TableColumn("price", "float", "As of the day's end."),
        dg.TableColumn("version", "int", "The book's latest version recorded by the day's end."),
        dg.TableColumn("fields", "string", "The fields the day's versions changed."),
        dg.TableColumn("changed_at", "timestamptz", "The day's last change of the book."),
    ]
)


def per_day_table(published: PublishedChanges) -> dg.MetadataValue:
    """Books per kind of change for the last :data:`TABLE_DAYS` days up to the partition's."""
    first = published.day - timedelta(days=TABLE_DAYS - 1)
    records = [
        dg.TableRecord({"day": day.isoformat(), **counts})
        for day, counts in sorted(published.per_day.items())
        if day >= first
    ]
    columns = [dg.TableColumn("day", "string"), *(dg.TableColumn(change, "int") for change in CHANGES)]
    return dg.MetadataValue.table(records=records, schema=dg.TableSchema(columns=columns))


@dg.asset(
    group_name=GROUP,
    kinds={"postgres", "csv"},
    deps=[dg.AssetKey("book_details")],
    partitions_def=SNAPSHOT_DAYS,
    automation_condition=PUBLISH_AUTOMATION,
    retry_policy=TRANSIENT_RETRY,
    owners=OWNERS,
    tags=tags_for("publish"),
    metadata={"dagster/column_schema": FEED_SCHEMA},
    description=(
        "The change feed of each day: every book new, changed (with its fields), removed from the category "
        "listings or returned to them that day, as JSON Lines and CSV."
    ),
)
def book_changes(
    context: dg.AssetExecutionContext, database: DatabaseResource, scheduling: SchedulingResource
) -> dg.MaterializeResult[None]:
    day = snapshot_day(context)
    with transient_only(context.op_execution_context), database.open() as db:
        published = publish_changes(db, day, run_settings(scheduling).data_dir)
    counts = ", ".join(f"{n} {change}" for change, n in published.by_change.items())
    context.log.info(f"changes of {day}: {counts}; written to {published.jsonl_path}")
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": published.rows,
            "day": day.isoformat(),
            **{change: published.by_change[change] for change in CHANGES},
            "changes_per_day": per_day_table(published),
            "chart": embedded_png(published.chart_path, "book changes per day"),
            "chart_path": dg.MetadataValue.path(str(published.chart_path)),
            "jsonl_path": dg.MetadataValue.path(str(published.jsonl_path)),
            "csv_path": dg.MetadataValue.path(str(published.csv_path)),
        }
    )
