"""A day's CDXJ index (cdxj-indexer, pywb's format): one sorted line per response record, and its summary.

``index.cdxj`` in a day's folder lists every response (and revisit) record of the day's files by SURT key
and timestamp, with the file, offset and length a replay tool needs. It is rebuilt from all of the day's
files each time (when a crawl ends, and by the ``raw_archive`` asset), written beside them and renamed into
place, so a reader never sees half an index. A file cut short by an interrupted writer is indexed up to its
last whole record and reported.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from cdxj_indexer.main import CDXJIndexer
from warcio.limitreader import LimitReader

from book_assets.archive.reader import ArchiveDamage, FileScan, archive_files, scan
from book_assets.archive.writer import day_folder

INDEX_NAME = "index.cdxj"
#: Record types with an index line: what a replay looks up by URL.
INDEXED_RECORDS = "response,revisit"


@dataclass(frozen=True)
class ArchiveSummary:
    """One day of the archive: its files, records by type, bytes and index."""

    day: date
    folder: Path
    files: list[FileScan] = field(default_factory=list)
    index_path: Path | None = None
    index_lines: int = 0

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def responses(self) -> int:
        return self.count("response")

    @property
    def records(self) -> int:
        return sum(sum(f.types.values()) for f in self.files)

    @property
    def damaged(self) -> list[ArchiveDamage]:
        return [f.damage for f in self.files if f.damage is not None]

    def count(self, record_type: str) -> int:
        return sum(f.types.get(record_type, 0) for f in self.files)

    def line(self) -> str:
        damaged = f", {len(self.damaged)} cut short" if self.damaged else ""
        return (
            f"archive {self.day}: {self.responses} responses in {len(self.files)} WARC file(s), "
            f"{self.bytes / 1e6:.1f} MB{damaged}, index {self.index_path or '-'}"
        )


def summarize_day(archive_dir: Path, day: date) -> ArchiveSummary:
    """The day's files and records, without touching its index."""
    folder = day_folder(archive_dir, day)
    index = folder / INDEX_NAME
    lines = _count_lines(index) if index.is_file() else 0
    return ArchiveSummary(
        day, folder, [scan(p) for p in archive_files(folder)], index if index.is_file() else None, lines
    )


def index_day(archive_dir: Path, day: date) -> ArchiveSummary:
    """(Re)write the day's ``index.cdxj`` from its files; returns the day's summary (no files: no index)."""
    folder = day_folder(archive_dir, day)
    scans = [scan(p) for p in archive_files(folder)]
    if not scans:
        return ArchiveSummary(day, folder)
    lines: list[str] = []
    for file in scans:
        lines += index_lines(file)
    lines.sort()
    target = folder / INDEX_NAME
    partial = folder / f".{INDEX_NAME}.{os.getpid()}"
    partial.write_text("".join(lines), encoding="utf-8")
    partial.replace(target)
    return ArchiveSummary(day, folder, scans, target, len(lines))


def index_lines(file: FileScan) -> list[str]:
    """The CDXJ lines of one file's whole records (a cut-short tail is left out)."""
    indexer = CDXJIndexer(output=None, inputs=[], records=INDEXED_RECORDS)
    out = io.StringIO()
    with file.path.open("rb") as fh:
        indexer.process_one(LimitReader(fh, file.intact), out, file.path.name)
    return [line for line in out.getvalue().splitlines(keepends=True) if line.strip()]


def index_days(archive_dir: Path, days: list[date]) -> list[ArchiveSummary]:
    """Index each of ``days`` that has files (a crawl's days: usually one, two across midnight)."""
    return [s for s in (index_day(archive_dir, d) for d in days) if s.files]


def _count_lines(path: Path) -> int:
    with path.open("rb") as fh:
        return sum(1 for line in fh if line.strip())
