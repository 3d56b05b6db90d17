"""Each WARC file's index entries as its writer writes them: a journal beside the file, read at a crawl's end.

The writer knows every record's offset, compressed length and headers when it writes it, so it composes
then the CDXJ line cdxj-indexer would read back from the file (:func:`cdxj_line`: the same key, timestamp
and fields, in the same order) and, once the records are flushed to the WARC file, appends one journal
line for the write: the file's end after it, its records by type, its index lines. The day's index then
reads each file's journal instead of the file: reading back a 100,000-book crawl's files takes 18-27 s
(docs/growth.md), its journals about a thirtieth of that (``benchmarks/warc_index_bench.py``), for about
80 µs more a page in each worker's writer thread (the key, the line and the journal's write).

The WARC file is flushed before its journal line, so the journal never names a record the file lacks; a
worker killed between the two leaves records past the journal's end, and a line cut short is not a line.
:func:`read_journal` returns the whole lines and the file offset they cover, and the indexer reads the WARC
file only from there (:func:`~book_assets.archive.index.index_day`): the records written but not journaled,
and any record cut short, are found as a full reading would find them. A journal that claims more than the
file holds (its file truncated since) or is missing is set aside and the file is read whole.

Journal lines are JSON: ``{"end": <offset>, "types": {"response": 1, ...}, "lines": ["<cdxj line>", ...]}``;
the file lives at ``.index-files/<WARC file name>.journal`` in the day's folder.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from warcio.recordloader import ArcWarcRecord
from warcio.timeutils import iso_date_to_timestamp

#: The folder, in a day's folder, of each WARC file's journal and its own sorted index lines.
FILE_INDEXES = ".index-files"
JOURNAL_SUFFIX = ".journal"
#: The records a replay looks up by URL: those with an index line (cdxj-indexer's ``records`` option).
INDEXED_RECORDS = ("response", "revisit")
#: Where cdxj-indexer cuts a Content-Type to its MIME type.
_MIME_END = re.compile(r"[;\s]")


def journal_path(path: Path) -> Path:
    """The journal of the WARC file ``path``."""
    return path.parent / FILE_INDEXES / f"{path.name}{JOURNAL_SUFFIX}"


def cdxj_line(record: ArcWarcRecord, offset: int, length: int, filename: str) -> str | None:
    """The CDXJ line cdxj-indexer writes for ``record`` (at ``offset``, ``length`` bytes compressed, in
    ``filename``), or None for a record type the index leaves out (pure but for the SURT library)."""
    if record.rec_type not in INDEXED_RECORDS:
        return None
    import surt  # cdxj-indexer's key; imported on first use (tldextract is 0.1 s), on the writer's thread

    headers, http = record.rec_headers, record.http_headers
    url = headers.get_header("WARC-Target-URI")
    mime = "warc/revisit" if record.rec_type == "revisit" else _mime(http.get_header("Content-Type") if http else None)
    fields: dict[str, Any] = {
        "url": url,
        "mime": mime,
        "status": http.get_statuscode() if http else None,
        "digest": headers.get_header("WARC-Payload-Digest"),
        "length": str(length),
        "offset": str(offset),
        "filename": filename,
    }
    try:
        key = surt.surt(url)
    except Exception:  # cdxj-indexer's fallback: the URL itself
        key = url
    index = {name: value for name, value in fields.items() if value is not None}
    return f"{key} {iso_date_to_timestamp(headers.get_header('WARC-Date'))} {json.dumps(index)}\n"


def _mime(content_type: str | None) -> str | None:
    return _MIME_END.split(content_type, maxsplit=1)[0].strip() if content_type else content_type


class JournalWriter:
    """Appends one line per write to a WARC file's journal; the caller flushes the WARC file first."""

    def __init__(self, warc_path: Path) -> None:
        self.path = journal_path(warc_path)
        self.path.parent.mkdir(exist_ok=True)
        self.filename = warc_path.name
        self._fh: IO[str] = self.path.open("x", encoding="utf-8")

    def append(self, end: int, written: list[tuple[ArcWarcRecord, int, int]]) -> None:
        """Journal ``written`` (each record with its offset and compressed length), the file's end ``end``."""
        types = Counter(record.rec_type for record, _, _ in written)
        lines = [cdxj_line(record, offset, length, self.filename) for record, offset, length in written]
        entry = {"end": end, "types": types, "lines": [line for line in lines if line is not None]}
        self._fh.write(json.dumps(entry) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


@dataclass(frozen=True)
class Journaled:
    """What a journal vouches for: the first ``end`` bytes of its file, their records by type, their lines."""

    end: int = 0
    types: dict[str, int] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)


def read_journal(path: Path) -> Journaled | None:
    """The whole lines of the journal of the WARC file ``path`` (None when it has none).

    Reading stops at a line cut short or unreadable, or one whose end does not move forward: what follows
    is left to the reading of the WARC file from the last good end.
    """
    try:
        text = journal_path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    end, types, lines = 0, Counter[str](), list[str]()
    for raw in text.splitlines(keepends=True):
        if not raw.endswith("\n"):
            break
        try:
            entry = json.loads(raw)
            next_end = int(entry["end"])
            more = Counter({str(name): int(count) for name, count in entry["types"].items()})
            new = [str(line) for line in entry["lines"]]
        except (ValueError, LookupError, TypeError, AttributeError):
            break
        if next_end <= end:
            break
        end = next_end
        types.update(more)
        lines.extend(new)
    return Journaled(end, dict(types), lines)
