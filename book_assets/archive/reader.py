"""Reading the archive back: one gzip member (one record) at a time, with damage reported, not skipped.

``warcio`` reads a ``.warc.gz`` whose last gzip member is cut short without complaint (measured: a file with
its last 10 bytes, or 200, removed passes ``warcio check`` and yields every record), so the reader walks the
members itself: each must end with its gzip trailer, and the first that does not marks where the file was
interrupted (a worker killed mid-write). The records before it are whole and are read; the damage is
reported as an :class:`ArchiveDamage` with the file and offset.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from io import BytesIO
from pathlib import Path
from typing import BinaryIO

from warcio.archiveiterator import ArchiveIterator
from warcio.recordloader import ArcWarcRecord

from book_assets.archive.writer import SUFFIX

_CHUNK = 1 << 16
_WARC_TYPE = re.compile(rb"\r\nWARC-Type: *([a-z]+)\r\n", re.IGNORECASE)


@dataclass(frozen=True)
class ArchiveDamage:
    """A file that ends inside a record (or holds bytes that are not a WARC record)."""

    path: Path
    offset: int
    reason: str

    def line(self) -> str:
        return f"{self.path}: {self.reason} at byte {self.offset}; the records before it are whole"


@dataclass(frozen=True)
class ArchivedResponse:
    """A response record (or a 304's revisit record, no body), with the rendered DOM of its conversion record
    when the browser ran scripts."""

    url: str
    status: int
    headers: dict[str, str]
    body: bytes
    fetched_at: datetime
    record_id: str
    path: Path
    offset: int
    rendered_html: str | None = None


def archive_files(folder: Path) -> list[Path]:
    """The WARC files of a day's folder (or of every day under the archive), in name order."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob(f"*{SUFFIX}") if p.is_file())


def members(fh: BinaryIO) -> Iterator[tuple[int, int, bytes]]:
    """``(start, end, decompressed bytes)`` of each gzip member; raises :class:`CutShort` at an unfinished one."""
    offset, size, pending = 0, 0, b""
    inflate, out = zlib.decompressobj(wbits=31), []
    while True:
        chunk = pending or fh.read(_CHUNK)
        pending = b""
        if not chunk:
            if size:
                raise CutShort(offset, "file ends inside a record (truncated gzip member)")
            return
        try:
            out.append(inflate.decompress(chunk))
        except zlib.error as exc:
            raise CutShort(offset, f"bytes that are not a gzip member ({exc})") from None
        if not inflate.eof:
            size += len(chunk)
            continue
        pending = inflate.unused_data
        end = offset + size + len(chunk) - len(pending)
        yield offset, end, b"".join(out)
        offset, size, inflate, out = end, 0, zlib.decompressobj(wbits=31), []


class CutShort(Exception):
    """A file ends inside a gzip member (or holds something else) at ``offset``."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason


def records(path: Path) -> Iterator[tuple[int, ArcWarcRecord, bytes]]:
    """``(offset, record, content)`` of every whole record of ``path``; raises :class:`CutShort` at damage."""
    with path.open("rb") as fh:
        for offset, _end, data in members(fh):
            for record in ArchiveIterator(BytesIO(data), arc2warc=False):
                yield offset, record, record.raw_stream.read()


@dataclass(frozen=True)
class FileScan:
    """One WARC file: its size, the leading bytes that are whole records, records by type, damage."""

    path: Path
    size: int
    intact: int
    types: dict[str, int]
    damage: ArchiveDamage | None


def scan(path: Path, start: int = 0) -> FileScan:
    """Count the records of ``path`` by WARC-Type and find where it stops being whole, in one pass; from the
    record at offset ``start`` when the records before it are known (the types are then those from there)."""
    end, types = start, Counter[str]()
    damage = None
    try:
        with path.open("rb") as fh:
            fh.seek(start)
            for _start, member_end, data in members(fh):
                end = start + member_end
                match = _WARC_TYPE.search(data, 0, 4096)
                types[match.group(1).decode("ascii") if match else "unknown"] += 1
    except CutShort as exc:
        damage = ArchiveDamage(path, start + exc.offset, exc.reason)
    return FileScan(path, path.stat().st_size, end, dict(types), damage)


def responses(paths: list[Path], damaged: list[ArchiveDamage]) -> Iterator[ArchivedResponse]:
    """Every response (and 304 revisit) record of ``paths`` in file order, with its rendered DOM; damaged files
    go to ``damaged``.

    A response's conversion record follows it in the same file (the writer's order: response, request,
    conversion), so a response is handed out once the next response or the end of its file shows up.
    """
    for path in paths:
        pending: ArchivedResponse | None = None
        try:
            for offset, record, content in records(path):
                if record.rec_type in ("response", "revisit") and record.http_headers is not None:
                    if pending is not None:
                        yield pending
                    pending = _response(path, offset, record, content)
                elif _refers_to(record, pending):
                    assert pending is not None
                    pending = replace(pending, rendered_html=content.decode("utf-8", "replace"))
        except CutShort as exc:
            damaged.append(ArchiveDamage(path, exc.offset, exc.reason))
        if pending is not None:
            yield pending


def _refers_to(record: ArcWarcRecord, response: ArchivedResponse | None) -> bool:
    """Whether ``record`` is the rendered DOM (conversion record) of ``response``."""
    refers_to = record.rec_headers.get_header("WARC-Refers-To")
    return record.rec_type == "conversion" and response is not None and refers_to == response.record_id


def _response(path: Path, offset: int, record: ArcWarcRecord, content: bytes) -> ArchivedResponse:
    http = record.http_headers
    status = int(http.get_statuscode() or 0)
    headers = {name.lower(): value for name, value in http.headers if not name.lower().startswith("x-archive-orig-")}
    return ArchivedResponse(
        url=record.rec_headers.get_header("WARC-Target-URI"),
        status=status,
        headers=headers,
        body=content,
        fetched_at=datetime.fromisoformat(record.rec_headers.get_header("WARC-Date")),
        record_id=record.rec_headers.get_header("WARC-Record-ID"),
        path=path,
        offset=offset,
    )
