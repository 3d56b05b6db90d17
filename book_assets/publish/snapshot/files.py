"""The snapshot's files: ``snapshots/<day>/`` under the data folder holds the books' Parquet and CSV of a day,
``<site>/snapshots/<day>/`` another site's.

Every file is written whole or not at all (:func:`~book_assets.publish.files.atomic_write`).
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pandas as pd

from book_assets.publish.files import atomic_write

PARQUET_NAME = "category_balanced_snapshot.parquet"
SUMMARY_NAME = "category_summary.csv"


def day_folder(data_dir: Path, day: date) -> Path:
    """``<data_dir>/snapshots/<YYYY-MM-DD>``, created when missing."""
    folder = Path(data_dir) / "snapshots" / day.isoformat()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def site_day_folder(data_dir: Path, site: str, day: date) -> Path:
    """``<data_dir>/<site>/snapshots/<YYYY-MM-DD>``, created when missing: a site's snapshot beside its data."""
    folder = Path(data_dir) / site / "snapshots" / day.isoformat()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_parquet(frame: pd.DataFrame, path: Path) -> Path:
    atomic_write(path, lambda p: frame.to_parquet(p, engine="pyarrow", index=False))
    return path


def write_csv(frame: pd.DataFrame, path: Path) -> Path:
    atomic_write(path, lambda p: frame.to_csv(p, index=False))
    return path
