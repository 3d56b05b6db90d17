"""Publishing a day's snapshot: the books' table rows for the day, then the day's Parquet, CSV and chart files
(:func:`write_snapshot`); another site's snapshot is the files alone (:func:`write_snapshot_files`)."""

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
    return SnapshotArtifacts(TABLE, rows, *_files(snapshot, day_folder(data_dir, snapshot.day)))


@dataclass(frozen=True)
class SnapshotFiles:
    """Where :func:`write_snapshot_files` put a day's snapshot, and its rows."""

    rows: int
    parquet_path: Path
    chart_path: Path
    summary_path: Path


def write_snapshot_files(snapshot: Snapshot, folder: Path) -> SnapshotFiles:
    """Publish ``snapshot`` as files in ``folder`` (no table): the chosen rows' Parquet, the summary's CSV, the
    chart; each written whole or not at all."""
    return SnapshotFiles(len(snapshot.frame), *_files(snapshot, folder))


def _files(snapshot: Snapshot, folder: Path) -> tuple[Path, Path, Path]:
    """The day's Parquet, chart and summary CSV written in ``folder``, in that order."""
    return (
        write_parquet(snapshot.frame, folder / PARQUET_NAME),
        write_chart(snapshot.summary, folder / CHART_NAME),
        write_csv(snapshot.summary, folder / SUMMARY_NAME),
    )
