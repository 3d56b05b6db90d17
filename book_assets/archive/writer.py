"""Writing fetched pages to WARC files: a request and a response record per fetch, gzip per record.

Each worker process writes its own files, named like Heritrix's (``PREFIX-TIMESTAMP-SERIAL-PID~HOST``) and
created exclusively, so workers on several hosts and processes never share a file even in one folder. A
file belongs to the day (UTC) of the fetches in it: ``<archive_dir>/YYYY-MM-DD/``; a worker that runs past
midnight closes its file and opens one in the next day's folder. Files are rotated at ``MAX_FILE_BYTES``
(Heritrix's 1 GB). Every record is flushed as soon as it is written, so a reader (the indexer, a re-extraction)
sees whole records and a worker killed mid-write leaves at most its last record cut short. Each write's index
lines go to the file's journal (:mod:`.journal`) once its records are flushed, so a crawl's end indexes the
day from the journals and reads a WARC file only past its journal's end.

What a response record holds: the final response's status line and headers and its body exactly as the
fetcher received it (``FetchResult.body``). Both fetchers hand over the body after transfer and content
decoding (aiohttp and Chromium decompress), so a ``Content-Encoding``, ``Transfer-Encoding`` or mismatched
``Content-Length`` header would describe bytes the record does not hold; such headers are kept under the
``X-Archive-Orig-`` prefix (pywb's convention) and a ``Content-Length`` of the stored body is written, which
keeps the record readable by ``warcio`` and replay tools. In browser mode with scripts on, the DOM after
scripts ran is written as a ``conversion`` record that refers to the response (``WARC-Refers-To``): the data
of a page that only scripts build is in the archive too, while the response stays what the server sent. A
304 to a conditional re-crawl is a ``revisit`` record of the ``server-not-modified`` profile (its status line
and headers, no payload), paired with its request as a response is.

A record holds only ASCII where warcio writes ASCII: the target URI is the URL's URI form (a non-ASCII
character percent-encoded as UTF-8, RFC 3987 3.1), and a header value with a byte outside ASCII is
percent-encoded byte for byte (:func:`~book_assets.scraper.fetching.header_text`), so a raw ``café_1/``
link or a Latin-1 header byte is archived, recoverably, instead of failing the page.
"""

from __future__ import annotations

import asyncio
import http
import itertools
import os
import socket
import zlib
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime
from io import BytesIO
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Self
from urllib.parse import quote, urlsplit

from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from book_assets.archive.journal import JournalWriter
from book_assets.scraper.fetching import FetchResult, header_text

#: Files are rotated past this size (Heritrix's default); a full sandbox crawl is far smaller.
MAX_FILE_BYTES = 1_000_000_000
WARC_VERSION = "WARC/1.1"
PREFIX = "book-pipeline"
SUFFIX = ".warc.gz"
#: Each record's gzip member is compressed at zlib's default level: the sandbox's pages come out under 1 % larger
#: than at level 9 (what warcio's own gzip option uses), for half its CPU, which is a page's largest cost after
#: its parsing.
GZIP_LEVEL = 6
#: A 304 to a conditional request: a revisit record of this profile (WARC 1.1, section 6.7.3), no payload.
NOT_MODIFIED_PROFILE = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
#: Response headers that describe the bytes on the wire, not the decoded body the record holds.
_WIRE_HEADERS = ("content-encoding", "transfer-encoding")
#: One number per file opened by this process: two writers in one process never pick the same name.
_serial = itertools.count()
#: What :func:`uri_of` leaves as it is: RFC 3986's reserved and unreserved characters, and ``%``.
_URI_SAFE = "!#$%&'()*+,/:;=?@[]~-._"


def uri_of(url: str) -> str:
    """``url`` in its URI form: each character outside ASCII (or not allowed in a URI) percent-encoded as
    UTF-8 (RFC 3987 3.1), an escape already there kept (pure)."""
    return quote(url.encode("utf-8", "surrogateescape"), safe=_URI_SAFE)


def day_folder(archive_dir: Path, day: date) -> Path:
    """The folder of one day's WARC files and index."""
    return archive_dir / day.isoformat()


def warc_date(when: datetime) -> str:
    """A WARC-Date with microseconds (WARC/1.1 allows them): the fetch's ``fetched_at`` in UTC."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def archived_headers(fetched: FetchResult) -> list[tuple[str, str]]:
    """The response headers as the record states them: wire-only headers renamed, the body's length declared
    (a 304's as they came: it has no body)."""
    # Chromium joins repeated headers (Set-Cookie) with newlines; a header block needs one line each.
    lines = [(header_text(n), header_text(line)) for n, value in fetched.headers.items() for line in value.split("\n")]
    if fetched.not_modified:
        return lines  # no body: its headers describe the stored copy it confirms
    headers: list[tuple[str, str]] = []
    length = str(len(fetched.body))
    renamed = any(fetched.headers.get(name, "identity").strip().lower() != "identity" for name in _WIRE_HEADERS)
    declared = fetched.headers.get("content-length")
    for name, value in lines:
        rename = name in _WIRE_HEADERS or (name == "content-length" and (renamed or value.strip() != length))
        headers.append((f"X-Archive-Orig-{name}" if rename else name, value))
    if renamed or declared is None or declared.strip() != length:
        headers.append(("content-length", length))
    return headers


def request_headers(fetched: FetchResult) -> list[tuple[str, str]]:
    """The request's headers as sent, with ``Host`` first when the fetcher did not report it (Chromium)."""
    sent = [(header_text(name), header_text(value)) for name, value in fetched.request_headers.items()]
    if not any(name.lower() == "host" for name, _ in sent):
        sent.insert(0, ("host", header_text(urlsplit(fetched.final_url).netloc)))
    return sent


class ArchiveWriter:
    """One process's WARC files under ``archive_dir``; ``write`` appends a fetch's records.

    Use as a context manager (``with ArchiveWriter(path) as archive``); writes run on one thread of their
    own (``await archive.write(fetched)``) so compression never holds up the event loop, in order.
    """

    def __init__(self, archive_dir: Path, *, max_file_bytes: int = MAX_FILE_BYTES) -> None:
        self.archive_dir = archive_dir
        self.max_file_bytes = max_file_bytes
        self.host = socket.gethostname().replace("~", "-").replace("/", "-")
        self.files: list[Path] = []
        self.records = 0
        self._day: date | None = None
        self._file: BinaryIO | None = None
        self._warc: WARCWriter | None = None
        self._record = BytesIO()  # one record, uncompressed, on its way to the file
        self._journal: JournalWriter | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="warc")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object | TracebackType) -> None:
        self.close()

    async def write(self, fetched: FetchResult) -> None:
        """Append ``fetched`` (on the writer's thread); returns once its records are flushed to the file."""
        await asyncio.get_running_loop().run_in_executor(self._thread, self.write_now, fetched)

    def write_now(self, fetched: FetchResult) -> None:
        """Append the request, response (and rendered DOM) records of ``fetched``, in the calling thread."""
        warc = self._writer_for(fetched.fetched_at.astimezone(UTC).date())
        uri, when = uri_of(fetched.final_url), warc_date(fetched.fetched_at)
        status = StatusAndHeaders(
            f"{fetched.status} {_reason(fetched.status)}", archived_headers(fetched), protocol="HTTP/1.1"
        )
        if fetched.not_modified:
            response = warc.create_warc_record(
                uri,
                "revisit",
                http_headers=status,
                warc_headers_dict={
                    "WARC-Date": when,
                    "WARC-Profile": NOT_MODIFIED_PROFILE,
                    "WARC-Refers-To-Target-URI": uri,
                },
            )
        else:
            body = BytesIO(fetched.body)
            response = warc.create_warc_record(
                uri, "response", payload=body, http_headers=status, warc_headers_dict={"WARC-Date": when}
            )
        parts = urlsplit(uri)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        sent = StatusAndHeaders(f"GET {target} HTTP/1.1", request_headers(fetched), is_http_request=True)
        request = warc.create_warc_record(uri, "request", http_headers=sent, warc_headers_dict={"WARC-Date": when})
        # What warcio's write_request_response_pair writes (the response, then its request that names it),
        # one record at a time, so each record's offset and length are known for its index line.
        request.rec_headers.add_header("WARC-Concurrent-To", response.rec_headers.get_header("WARC-Record-ID"))
        written = [self._put(response), self._put(request)]
        if fetched.rendered_html is not None and fetched.rendered_html != fetched.html:
            dom = fetched.rendered_html.encode("utf-8")
            conversion = warc.create_warc_record(
                uri,
                "conversion",
                payload=BytesIO(dom),
                length=len(dom),
                warc_content_type="text/html; charset=utf-8",
                warc_headers_dict={
                    "WARC-Date": when,
                    "WARC-Refers-To": response.rec_headers.get_header("WARC-Record-ID"),
                },
            )
            written.append(self._put(conversion))
        self._flush(written)
        self.records += 1

    def _put(self, record: ArcWarcRecord) -> tuple[ArcWarcRecord, int, int]:
        """Write ``record`` to the open file as one gzip member (:data:`GZIP_LEVEL`): the record, its offset and
        its length. warcio writes the record uncompressed into a buffer; the member is compressed here."""
        assert self._file is not None and self._warc is not None
        self._record.seek(0)
        self._record.truncate()
        self._warc.write_record(record)
        deflate = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, zlib.MAX_WBITS | 16)
        with self._record.getbuffer() as written:  # released before the next record resizes the buffer
            member = deflate.compress(written) + deflate.flush()
        offset = self._file.tell()
        self._file.write(member)
        return record, offset, len(member)

    def _flush(self, written: list[tuple[ArcWarcRecord, int, int]]) -> None:
        """Flush the file, then journal its new records: the journal never names a record the file lacks."""
        assert self._file is not None and self._journal is not None
        self._file.flush()
        self._journal.append(self._file.tell(), written)

    def _writer_for(self, day: date) -> WARCWriter:
        """The open file's writer, after opening a new file on a new day or past the size limit."""
        if self._file is not None and (day != self._day or self._file.tell() >= self.max_file_bytes):
            self._close_file()
        if self._warc is None:
            self._open_file(day)
        assert self._warc is not None
        return self._warc

    def _open_file(self, day: date) -> None:
        folder = day_folder(self.archive_dir, day)
        folder.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S%f")
        path = folder / f"{PREFIX}-{stamp}-{next(_serial):05d}-{os.getpid()}~{self.host}{SUFFIX}"
        self._file = path.open("xb")  # exclusive: a name taken by another writer fails loudly
        self._warc = WARCWriter(self._record, gzip=False, warc_version=WARC_VERSION)
        self._journal = JournalWriter(path)
        self._day = day
        self.files.append(path)
        info = {"software": PREFIX, "format": "WARC File Format 1.1", "hostname": self.host, "pid": os.getpid()}
        self._flush([self._put(self._warc.create_warcinfo_record(path.name, info))])

    def _close_file(self) -> None:
        file, journal, self._file, self._warc, self._journal = self._file, self._journal, None, None, None
        if file is not None:
            file.close()
        if journal is not None:
            journal.close()

    def close(self) -> None:
        """Finish pending writes and close the file; safe to call twice."""
        self._thread.shutdown(wait=True)
        self._close_file()


def _reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"
