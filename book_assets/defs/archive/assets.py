"""``raw_archive``: the WARC files the crawl's workers wrote on one day, indexed, with their counts.

The workers write the records as they fetch (:mod:`book_assets.archive.writer`); a crawl indexes its days
when it ends. Materializing partition ``D`` rebuilds ``D``'s ``index.cdxj`` from every file of the day
(workers started by ``book-pipeline work`` on other hosts included, which no crawl's end indexes) and
records what the day holds: files, records by type, bytes, and any file cut short by an interrupted worker
(a warning; its whole records are indexed).
"""

import dagster as dg

from book_assets.archive import ArchiveSummary, index_day
from book_assets.defs.catalog import OWNERS, PUBLISH_AUTOMATION, AssetMetadata, tags_for
from book_assets.defs.resources import ArchiveResource, run_settings
from book_assets.defs.retries import TRANSIENT_RETRY, transient_only
from book_assets.defs.snapshot.assets import SNAPSHOT_DAYS, snapshot_day

GROUP = "archive"
FILES_SCHEMA = dg.TableSchema(
    columns=[
        dg.TableColumn("file", "string"),
        dg.TableColumn("responses", "int"),
        dg.TableColumn("requests", "int"),
        dg.TableColumn("bytes", "int"),
        dg.TableColumn("cut_short_at", "int", description="Byte where an interrupted file stops being whole."),
    ]
)


def files_table(summary: ArchiveSummary) -> dg.MetadataValue:
    """One row per WARC file of the day."""
    rows = []
    for scan in summary.files:
        row: dict[str, str | int] = {
            "file": scan.path.name,
            "responses": scan.types.get("response", 0),
            "requests": scan.types.get("request", 0),
            "bytes": scan.size,
        }
        if scan.damage is not None:
            row["cut_short_at"] = scan.damage.offset
        rows.append(dg.TableRecord(row))
    return dg.MetadataValue.table(records=rows, schema=FILES_SCHEMA)


def archive_metadata(summary: ArchiveSummary) -> AssetMetadata:
    """The day's counts as typed metadata."""
    return {
        "dagster/row_count": summary.responses,
        "archive_day": summary.day.isoformat(),
        "files": len(summary.files),
        "records": summary.records,
        "responses": summary.responses,
        "requests": summary.count("request"),
        "bytes": summary.bytes,
        "megabytes": round(summary.bytes / 1e6, 2),
        "index_lines": summary.index_lines,
        "files_cut_short": len(summary.damaged),
        "folder": dg.MetadataValue.path(str(summary.folder)),
        "index_path": dg.MetadataValue.path(str(summary.index_path or "")),
        "warc_files": files_table(summary),
    }


@dg.asset(
    group_name=GROUP,
    kinds={"python", "warc"},
    deps=[dg.AssetKey("book_details")],
    partitions_def=SNAPSHOT_DAYS,
    automation_condition=PUBLISH_AUTOMATION,
    retry_policy=TRANSIENT_RETRY,
    owners=OWNERS,
    tags=tags_for("crawl"),
    description=(
        "Every page the crawl fetched on a day, as served (WARC request and response records, one file per "
        "worker process), with the day's CDXJ index; metadata: files, records and bytes."
    ),
)
def raw_archive(context: dg.AssetExecutionContext, archive: ArchiveResource) -> dg.MaterializeResult[None]:
    day = snapshot_day(context)
    settings = run_settings(archive)
    with transient_only(context.op_execution_context):
        summary = index_day(settings.archive_dir, day)
    if not summary.files:
        context.log.warning(f"no WARC files for {day} under {summary.folder} (is the warc setting on?)")
    for damage in summary.damaged:
        context.log.warning(damage.line())
    context.log.info(summary.line())
    return dg.MaterializeResult(metadata=archive_metadata(summary))
