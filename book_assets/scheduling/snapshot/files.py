"""The snapshot's files: ``snapshots/<day>/`` under the data folder holds the day's Parquet and CSV.

Every file is written under a temporary name and renamed into place, so a reader never opens a
half-written one.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from datetime import date
from pathlib import Path

import pandas as pd

PARQUET_NAME = "category_balanced_snapshot.parquet"
SUMMARY_NAME = "category_summary.csv"


def day_folder(data_dir: Path, day: date) -> Path:
    """``<data_dir>/snapshots/<YYYY-MM-DD>``, created when missing."""
    folder = Path(data_dir) / "snapshots" / day.isoformat()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_parquet(frame: pd.DataFrame, path: Path) -> Path:
    atomic_write(path, lambda p: frame.to_parquet(p, engine="pyarrow", index=False))
    return path


def write_csv(frame: pd.DataFrame, path: Path) -> Path:
    atomic_write(path, lambda p: frame.to_csv(p, index=False))
    return path


def atomic_write(path: Path, write: Callable[[Path], object]) -> None:
    """Run ``write`` on a temporary file beside ``path``, then rename it to ``path``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
