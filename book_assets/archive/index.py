"""A day's CDXJ index (cdxj-indexer, pywb's format): one sorted line per response record, and its summary.

``index.cdxj`` in a day's folder lists every response (and revisit) record of the day's files by SURT key
and timestamp, with the file, offset and length a replay tool needs. It is written when a crawl ends, and by
the ``raw_archive`` asset, beside the files and renamed into place, so a reader never sees half an index. A
file cut short by an interrupted writer is indexed up to its last whole record and reported.

What it costs is what the crawl wrote: each file's own lines are indexed once, sorted, into
``.index-files/<file>.cdxj``, and its scan (size, time, record types, damage) kept in the day's
``.index-files.json``; a file whose size and time are as they were when it was read is not read again. The
day's index is then a streaming merge of the files' sorted indexes: no earlier line is parsed, sorted or
held in memory. A file still being written grows, so it is indexed again.

A file's lines come from its journal, written by its writer record by record (:mod:`.journal`): the WARC file
itself is read only past the journal's end (records a killed worker wrote but did not journal, a record cut
short), so a crawl's end reads no WARC bytes it need not. ``index_day(..., reread=True)`` sets the journals
and the cache aside and reads every file whole: the repair, and the reference the journals are tested
against.
"""

from __future__ import annotations

import contextlib
import heapq
import io
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import IO, Any, BinaryIO

from warcio.limitreader import LimitReader

from book_assets.archive.journal import FILE_INDEXES, INDEXED_RECORDS, JOURNAL_SUFFIX, Journaled, read_journal
from book_assets.archive.reader import ArchiveDamage, FileScan, archive_files, scan
from book_assets.archive.writer import day_folder
from book_assets.publish.files import atomic_write, atomic_write_text

INDEX_NAME = "index.cdxj"
#: Each file's scan as of its last reading, with the size and time it had then.
FILES_CACHE_NAME = ".index-files.json"


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
    scans = [_cached(known, folder, path) or scan(path) for path in archive_files(folder)]
    return ArchiveSummary(day, folder, scans, index if index.is_file() else None, lines)


def index_day(archive_dir: Path, day: date, *, reread: bool = False) -> ArchiveSummary:
    """(Re)write the day's ``index.cdxj`` from its files; returns the day's summary (no files: no index).

    Files unchanged since they were last read (same size and modification time) are not read again, and a
    file's journal spares the reading of what it covers; the day's index merges every file's sorted index.
    ``reread`` reads every file whole, trusting neither the cache nor the journals.
    """
    folder = day_folder(archive_dir, day)
    paths = archive_files(folder)
    if not paths:
        return ArchiveSummary(day, folder)
    known, entries = {} if reread else _read_cache(folder), dict[str, Any]()
    scans: list[FileScan] = []
    for path in paths:
        file = _cached(known, folder, path)
        if file is None:
            before = path.stat()
            file, own = read_file(path, None if reread else read_journal(path))
            _file_index(folder, path).parent.mkdir(exist_ok=True)
            atomic_write_text(_file_index(folder, path), "".join(sorted(own)))
            # A file that grew while it was read (its writer is still at work) is read again next time.
            mtime_ns = before.st_mtime_ns if file.size == before.st_size else None
        else:
            mtime_ns = known[path.name]["mtime_ns"]
        if mtime_ns is not None:
            entries[path.name] = _entry(file, mtime_ns)
        scans.append(file)
    target = folder / INDEX_NAME
    lines = 0

    def merge(tmp: Path) -> None:
        nonlocal lines
        with contextlib.ExitStack() as stack, tmp.open("w", encoding="utf-8") as out:
            sources: list[IO[str]] = [stack.enter_context(_file_index(folder, p).open(encoding="utf-8")) for p in paths]
            for line in heapq.merge(*sources):
                out.write(line)
                lines += 1

    atomic_write(target, merge)
    atomic_write_text(folder / FILES_CACHE_NAME, json.dumps(entries))
    kept = {_file_index(folder, p).name for p in paths}
    for gone in (folder / FILE_INDEXES).glob("*.cdxj"):  # the index of a file deleted since
        if gone.name not in kept:
            gone.unlink(missing_ok=True)
    for journal in (folder / FILE_INDEXES).glob(f"*{JOURNAL_SUFFIX}"):  # a file's journal outlives it not
        if not (folder / journal.name.removesuffix(JOURNAL_SUFFIX)).exists():
            journal.unlink(missing_ok=True)
    return ArchiveSummary(day, folder, scans, target, lines)


def read_file(path: Path, journaled: Journaled | None) -> tuple[FileScan, list[str]]:
    """The scan and index lines of one WARC file: what its journal covers, and the file read past that.

    A journal that claims more bytes than the file holds is set aside (the file was cut since); without a
    journal the whole file is read.
    """
    size = path.stat().st_size
    if journaled is None or journaled.end > size:
        journaled = Journaled()
    tail = scan(path, journaled.end)
    types = Counter(journaled.types)
    types.update(tail.types)
    lines = journaled.lines + index_lines(tail, journaled.end)
    return FileScan(path, tail.size, tail.intact, dict(types), tail.damage), lines


def _file_index(folder: Path, path: Path) -> Path:
    """Where the sorted index lines of one WARC file of the day are kept."""
    return folder / FILE_INDEXES / f"{path.name}.cdxj"


def _entry(file: FileScan, mtime_ns: int) -> dict[str, Any]:
    damage = None if file.damage is None else [file.damage.offset, file.damage.reason]
    return {"size": file.size, "mtime_ns": mtime_ns, "intact": file.intact, "types": file.types, "damage": damage}


def _read_cache(folder: Path) -> dict[str, Any]:
    """The day's cached readings (none when the cache is missing or unreadable: every file is read)."""
    try:
        known = json.loads((folder / FILES_CACHE_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return known if isinstance(known, dict) else {}


def _cached(known: dict[str, Any], folder: Path, path: Path) -> FileScan | None:
    """The cached scan of ``path`` if it has the size and time it had when read and its index is kept, else None."""
    entry = known.get(path.name)
    if entry is None or not _file_index(folder, path).is_file():
        return None
    try:
        stat = path.stat()
        if entry["size"] != stat.st_size or entry["mtime_ns"] != stat.st_mtime_ns:
            return None
        damage = None if entry["damage"] is None else ArchiveDamage(path, int(entry["damage"][0]), entry["damage"][1])
        types = {str(name): int(count) for name, count in entry["types"].items()}
        return FileScan(path, stat.st_size, int(entry["intact"]), types, damage)
    except (OSError, LookupError, TypeError, ValueError, AttributeError):
        return None


def index_lines(file: FileScan, start: int = 0) -> list[str]:
    """The CDXJ lines of one file's whole records from offset ``start`` (a cut-short tail is left out)."""
    if file.intact <= start:
        return []
    # Imported here: cdxj-indexer pulls in requests, rich and tldextract (about 20 MB and 0.16 s of CPU), and
    # reads only what no journal holds, the records of a worker killed before journaling them.
    from cdxj_indexer.main import CDXJIndexer

    indexer = CDXJIndexer(output=None, inputs=[], records=",".join(INDEXED_RECORDS))
    out = io.StringIO()
    with file.path.open("rb") as fh:
        fh.seek(start)
        indexer.process_one(_Span(fh, start, file.intact - start), out, file.path.name)
    return [line for line in out.getvalue().splitlines(keepends=True) if line.strip()]


class _Span:
    """``limit`` bytes of an open file from offset ``start``, whose ``tell`` is the offset in the file: the
    offset warcio's reader puts in each line."""

    def __init__(self, fh: BinaryIO, start: int, limit: int) -> None:
        self._reader, self._start = LimitReader(fh, limit), start

    def read(self, size: int | None = None) -> bytes:
        data: bytes = self._reader.read(size)
        return data

    def readline(self, size: int | None = None) -> bytes:
        data: bytes = self._reader.readline(size)
        return data

    def tell(self) -> int:
        return self._start + int(self._reader.tell())


def index_days(archive_dir: Path, days: list[date]) -> list[ArchiveSummary]:
    """Index each of ``days`` that has files (a crawl's days: usually one, two across midnight)."""
    return [s for s in (index_day(archive_dir, d) for d in days) if s.files]


def _count_lines(path: Path) -> int:
    with path.open("rb") as fh:
        return sum(1 for line in fh if line.strip())
