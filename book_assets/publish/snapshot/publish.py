"""Publishing a day's snapshot: the table's rows for the day, then the day's Parquet, CSV and chart files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from book_assets.db.connection import Database
from book_assets.publish.snapshot.chart import CHART_NAME, write_chart
from book_assets.publish.snapshot.files import PARQUET_NAME, SUMMARY_NAME, day_folder, write_csv, write_parquet
from book_assets.publish.snapshot.select import Snapshot
from book_assets.publish.snapshot.table import TABLE, replace_day


@dataclass(frozen=True)
class SnapshotArtifacts:
    """Where :func:`write_snapshot` put a day's snapshot."""

    table: str
    rows: int
    parquet_path: Path
    chart_path: Path
    summary_path: Path


def write_snapshot(db: Database, snapshot: Snapshot, data_dir: Path) -> SnapshotArtifacts:
    """Publish ``snapshot`` for its day: table rows first, then the files beside the data."""
    rows = replace_day(db, snapshot.day, snapshot.frame)
    folder = day_folder(data_dir, snapshot.day)
    return SnapshotArtifacts(
        table=TABLE,
        rows=rows,
        parquet_path=write_parquet(snapshot.frame, folder / PARQUET_NAME),
        chart_path=write_chart(snapshot.summary, folder / CHART_NAME),
        summary_path=write_csv(snapshot.summary, folder / SUMMARY_NAME),
    )
