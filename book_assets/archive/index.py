"""A day's CDXJ index (cdxj-indexer, pywb's format): one sorted line per response record, and its summary.

``index.cdxj`` in a day's folder lists every response (and revisit) record of the day's files by SURT key
and timestamp, with the file, offset and length a replay tool needs. It is rebuilt from all of the day's
files each time (when a crawl ends, and by the ``raw_archive`` asset), written beside them and renamed into
place, so a reader never sees half an index. A file cut short by an interrupted writer is indexed up to its
last whole record and reported.

Each file's lines and scan are kept in the day's ``.index-files.json``, keyed by the file's name, size and
modification time: a file whose size and time are as they were when it was read is not read again, so the
index a crawl writes at its end costs the files written since the last index, not every file of the day (a
day of re-crawls otherwise re-reads every earlier crawl's files, about 0.2 s per crawl of the sandbox, at
each crawl's end). A file still being written grows, so it is read again.
"""

from __future__ import annotations

import importlib
import io
import json
import threading
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from warcio.limitreader import LimitReader

from book_assets.archive.reader import ArchiveDamage, FileScan, archive_files, scan
from book_assets.archive.writer import day_folder
from book_assets.publish.files import atomic_write_text

INDEX_NAME = "index.cdxj"
#: Each file's scan and index lines as of its last reading, with the size and time it had then.
FILES_CACHE_NAME = ".index-files.json"
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
    known = _read_cache(folder)
    scans = [_cached(known, path)[0] or scan(path) for path in archive_files(folder)]
    return ArchiveSummary(day, folder, scans, index if index.is_file() else None, lines)


def index_day(archive_dir: Path, day: date) -> ArchiveSummary:
    """(Re)write the day's ``index.cdxj`` from its files; returns the day's summary (no files: no index).

    Files unchanged since they were last read (same size and modification time) are not read again.
    """
    folder = day_folder(archive_dir, day)
    paths = archive_files(folder)
    if not paths:
        return ArchiveSummary(day, folder)
    known, entries = _read_cache(folder), dict[str, Any]()
    scans: list[FileScan] = []
    lines: list[str] = []
    for path in paths:
        file, file_lines = _cached(known, path)
        if file is None or file_lines is None:
            before = path.stat()
            file = scan(path)
            file_lines = index_lines(file)
            # A file that grew while it was read (its writer is still at work) is read again next time.
            mtime_ns = before.st_mtime_ns if file.size == before.st_size else None
        else:
            mtime_ns = known[path.name]["mtime_ns"]
        if mtime_ns is not None:
            entries[path.name] = _entry(file, file_lines, mtime_ns)
        scans.append(file)
        lines += file_lines
    lines.sort()
    target = folder / INDEX_NAME
    atomic_write_text(target, "".join(lines))
    atomic_write_text(folder / FILES_CACHE_NAME, json.dumps(entries))
    return ArchiveSummary(day, folder, scans, target, len(lines))


def _entry(file: FileScan, lines: list[str], mtime_ns: int) -> dict[str, Any]:
    damage = None if file.damage is None else [file.damage.offset, file.damage.reason]
    return {"size": file.size, "mtime_ns": mtime_ns, "intact": file.intact, "types": file.types, "damage": damage,
            "lines": lines}  # fmt: skip


def _read_cache(folder: Path) -> dict[str, Any]:
    """The day's cached readings (none when the cache is missing or unreadable: every file is read)."""
    try:
        known = json.loads((folder / FILES_CACHE_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return known if isinstance(known, dict) else {}


def _cached(known: dict[str, Any], path: Path) -> tuple[FileScan | None, list[str] | None]:
    """The cached scan and lines of ``path`` if it has the size and time it had when read, else (None, None)."""
    entry = known.get(path.name)
    if entry is None:
        return None, None
    try:
        stat = path.stat()
        if entry["size"] != stat.st_size or entry["mtime_ns"] != stat.st_mtime_ns:
            return None, None
        damage = None if entry["damage"] is None else ArchiveDamage(path, int(entry["damage"][0]), entry["damage"][1])
        types = {str(name): int(count) for name, count in entry["types"].items()}
        return FileScan(path, stat.st_size, int(entry["intact"]), types, damage), [str(x) for x in entry["lines"]]
    except (OSError, LookupError, TypeError, ValueError, AttributeError):
        return None, None


def load_indexer_meanwhile() -> threading.Thread:
    """Import the indexer on a thread of its own, for a process that will index when its crawl ends.

    cdxj-indexer pulls in requests, rich and tldextract: 0.16 s of CPU with bytecode caches, 0.4 s without,
    which a crawl's end would otherwise wait for; the drain's process sits idle while its workers crawl. It is
    imported lazily at all because every crawl worker imports this package for its writer but never indexes.
    """
    thread = threading.Thread(target=importlib.import_module, args=("cdxj_indexer.main",), daemon=True)
    thread.start()
    return thread


def index_lines(file: FileScan) -> list[str]:
    """The CDXJ lines of one file's whole records (a cut-short tail is left out)."""
    from cdxj_indexer.main import CDXJIndexer  # see load_indexer_meanwhile

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
