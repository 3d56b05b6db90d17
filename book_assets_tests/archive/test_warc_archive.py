"""The WARC archive of a crawl: one response record per fetched page, valid for ``warcio check``, indexed
line for line, and enough on its own to rebuild the books table; a file cut short is named, not a crash."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import zlib
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from warcio.archiveiterator import ArchiveIterator

from book_assets.archive import ArchiveWriter, archive_files, index_day, summarize_day
from book_assets.archive.writer import archived_headers
from book_assets.cli import main
from book_assets.crawl.config import TASK_TYPES
from book_assets.crawl.pipeline import CrawlReport, crawl
from book_assets.db.connection import Database
from book_assets.queue import TaskQueue
from book_assets.scraper.fetching import FetchResult, build_result
from book_assets_tests.crawl.conftest import sandbox_config

WARCIO = Path(sys.executable).parent / "warcio"
#: The columns a crawl derives from a fetch (everything but ids and the database's own timestamps).
FETCHED_COLUMNS = (
    "url, title, price, rating, category, availability, upc, description, raw_html, price_amount, price_excl_tax, "
    "price_incl_tax, tax, rating_value, stock, num_reviews, product_type, content_hash, http_status, fetched_at, "
    "rendered_html, requested_url, raw_body, version"
)


def _crawl(database_url: str, site: Any, archive: Path, **overrides: Any) -> CrawlReport:
    settings = {"categories": ("Travel",), "warc_dir": archive, **overrides}
    return crawl(database_url, sandbox_config(site.url, **settings))


def _records(archive: Path) -> list[tuple[Path, int, Any]]:
    """Every record of the archive as warcio reads it: (file, offset, record), content read."""
    found = []
    for path in archive_files(archive):
        with path.open("rb") as fh:
            it = ArchiveIterator(fh)
            for record in it:
                record.content_stream().read()
                found.append((path, it.get_record_offset(), record))
    return found


def _today() -> str:
    return datetime.now(UTC).date().isoformat()


def _reextract(database_url: str, archive: Path, *args: str) -> Any:
    env = {"DATABASE_URL": database_url, "BOOK_PIPELINE_WARC_DIR": str(archive)}
    return CliRunner().invoke(main, ["reextract", "--from-warc", *args], env=env)


def test_crawl_archives_one_response_per_fetched_page_checked_and_indexed_one_file_per_worker(
    db: Database, database_url: str, sandbox: Any, tmp_path: Path
) -> None:
    report = _crawl(database_url, sandbox, tmp_path, workers=2)
    completed = TaskQueue(db, task_types=TASK_TYPES).stats().total("completed")
    records = _records(tmp_path)
    responses = [r for _, _, r in records if r.rec_type == "response"]
    requests = [r for _, _, r in records if r.rec_type == "request"]
    assert len(responses) == report.run.pages == completed == 13  # 2 listing pages, 11 books
    assert {r.rec_headers.get_header("WARC-Target-URI") for r in responses} >= {
        row["url"] for row in db.query("SELECT url FROM books")
    }
    assert all(
        r.http_headers.get_statuscode() == "200" and r.rec_headers.get_header("WARC-Payload-Digest") for r in responses
    )
    # Each request names its response, was sent by the crawler and asked for the response's URL.
    by_id = {r.rec_headers.get_header("WARC-Record-ID"): r for r in responses}
    assert len(requests) == len(responses)
    for request in requests:
        response = by_id[request.rec_headers.get_header("WARC-Concurrent-To")]
        assert request.rec_headers.get_header("WARC-Target-URI") == response.rec_headers.get_header("WARC-Target-URI")
        assert request.http_headers.protocol == "GET"
        assert "book-pipeline" in request.http_headers.get_header("user-agent")

    files = archive_files(tmp_path)
    check = subprocess.run([str(WARCIO), "check", "-v", *map(str, files)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout[-2000:]
    assert check.stdout.count("digest pass") == len(records)
    # One file per worker process, named by host and pid: the two workers never shared one.
    pids = [f.name.split("-")[-1].split("~")[0] for f in files]
    assert 1 <= len(files) <= 2 and len(set(pids)) == len(files)

    [summary] = report.archive
    index = (summary.folder / "index.cdxj").read_text().splitlines()
    assert summary.index_lines == len(index) == len(responses) == summary.responses
    assert sorted(index) == index


def test_a_crawl_whose_journals_cover_its_files_indexes_the_day_without_loading_the_indexer(
    db: Database, database_url: str, sandbox: Any, tmp_path: Path
) -> None:
    """cdxj-indexer (with requests, rich and tldextract: about 20 MB and 0.16 s of CPU) reads only what no journal
    holds, the records of a worker killed before journaling them: a crawl's process loads it for that alone."""
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from book_assets_tests.archive.test_warc_archive import _crawl\n"
        "class Site: url = sys.argv[2]\n"
        "report = _crawl(sys.argv[1], Site, Path(sys.argv[3]), workers=2)\n"
        "[day] = report.archive\n"
        "assert day.index_lines == report.run.pages > 0, (day.index_lines, report.run.pages)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'cdxj_indexer'))\n"
    )
    args = [sys.executable, "-c", script, database_url, sandbox.url, str(tmp_path)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=Path(__file__).parents[2])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == "[]", proc.stdout[-500:]


def test_reextract_from_warc_equals_the_books_table_and_rebuilds_it(
    db: Database, database_url: str, sandbox: Any, tmp_path: Path
) -> None:
    _crawl(database_url, sandbox, tmp_path)
    stored = db.query(f"SELECT {FETCHED_COLUMNS} FROM books ORDER BY url")
    result = _reextract(database_url, tmp_path, "--day", _today())
    assert result.exit_code == 0, result.output
    assert "13 response records from 1 WARC file(s): 11 books, 2 listing pages, 0 not modified" in result.stdout
    assert "books table: 11 equal, 0 differ, 0 only in the archive, 0 only in the table" in result.stdout

    # A stored value the archive does not hold is a difference, named.
    db.query("UPDATE books SET price_amount = price_amount + 1 WHERE url = %s", (stored[0]["url"],))
    result = _reextract(database_url, tmp_path)
    assert result.exit_code == 1
    assert f"differs: {stored[0]['url']} price_amount" in result.stderr

    # From the archive alone into empty tables: the same rows (versions included) as the crawl stored.
    db.query("TRUNCATE books, book_versions RESTART IDENTITY CASCADE")
    result = _reextract(database_url, tmp_path, "--write")
    assert result.exit_code == 0, result.output
    assert "stored: 11 new, 0 changed, 0 unchanged, 0 left alone" in result.stdout
    assert db.query(f"SELECT {FETCHED_COLUMNS} FROM books ORDER BY url") == stored
    assert db.query("SELECT count(*) AS n FROM book_versions")[0]["n"] == 11


def test_a_conditional_recrawl_archives_its_304s_as_revisits_and_the_rebuild_follows_them(
    db: Database, database_url: str, sandbox: Any, tmp_path: Path
) -> None:
    _crawl(database_url, sandbox, tmp_path)
    again = _crawl(database_url, sandbox, tmp_path)
    assert again.run.not_modified == 13  # every page of the day-0 re-crawl answered 304
    records = [r for _, _, r in _records(tmp_path)]
    revisits = [r for r in records if r.rec_type == "revisit"]
    assert len(revisits) == 13 and len([r for r in records if r.rec_type == "response"]) == 13
    assert {r.rec_headers.get_header("WARC-Profile") for r in revisits} == {
        "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
    }
    assert {r.http_headers.get_statuscode() for r in revisits} == {"304"}
    check = subprocess.run([str(WARCIO), "check", *map(str, archive_files(tmp_path))], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout[-2000:]
    [summary] = again.archive
    assert summary.index_lines == 26
    # The 304s moved the books' fetch time; the rebuild moves it the same way.
    result = _reextract(database_url, tmp_path)
    assert result.exit_code == 0, result.output
    assert "13 not modified (304)" in result.stdout
    assert "books table: 11 equal, 0 differ" in result.stdout


def test_reextract_names_a_file_cut_short_and_uses_its_whole_records(
    db: Database, database_url: str, sandbox: Any, tmp_path: Path
) -> None:
    _crawl(database_url, sandbox, tmp_path)
    [path] = archive_files(tmp_path)
    last_response = max(offset for p, offset, r in _records(tmp_path) if r.rec_type == "response")
    with path.open("r+b") as fh:
        fh.truncate(last_response + 100)  # a worker killed while writing its last page

    result = _reextract(database_url, tmp_path)
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert f"error: {path}: file ends inside a record (truncated gzip member) at byte {last_response}" in (
        result.stderr
    )
    assert "read 12 response records" in result.stdout
    summary = index_day(tmp_path, datetime.now(UTC).date())
    assert summary.index_lines == summary.responses == 12
    assert [d.offset for d in summary.damaged] == [last_response]


def _write_pages(folder: str, count: int) -> None:
    with ArchiveWriter(Path(folder)) as archive:
        for n in range(count):
            archive.write_now(_fetch(f"http://example.test/{n}"))


def _fetch(url: str, **headers: str) -> FetchResult:
    return build_result(
        url=url,
        final_url=url,
        status=200,
        headers={"content-type": "text/html", **headers},
        body=b"<html>page</html>",
        fetched_at=datetime.now(UTC),
        elapsed_s=0.01,
        request_headers={"user-agent": "test"},
    )


def test_workers_in_two_processes_writing_at_once_write_separate_whole_files(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write_pages, args=(str(tmp_path), 200)) for _ in range(2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    summary = summarize_day(tmp_path, datetime.now(UTC).date())
    assert [f.types for f in summary.files] == [{"warcinfo": 1, "response": 200, "request": 200}] * 2
    assert summary.damaged == []
    # Two writers of one process, opened in the same microsecond, still get files of their own.
    with ArchiveWriter(tmp_path / "same") as one, ArchiveWriter(tmp_path / "same") as two:
        one.write_now(_fetch("http://example.test/a"))
        two.write_now(_fetch("http://example.test/b"))
    assert len(set(one.files + two.files)) == 2


def test_each_record_is_one_gzip_member_compressed_at_zlibs_default_level(tmp_path: Path) -> None:
    """Level 9 (warcio's own) takes twice the CPU of zlib's default for files under 1 % smaller: a record's
    member says its level in the gzip header's XFL byte (RFC 1952: 2 for the slowest, 0 for the default)."""
    page = b"<html><body>" + b"".join(b"<p>A Light in the Attic %d</p>" % n for n in range(2000)) + b"</body></html>"
    with ArchiveWriter(tmp_path) as archive:
        archive.write_now(replace(_fetch("http://example.test/big"), body=page))
    data = archive.files[0].read_bytes()
    members, offset = [], 0
    while offset < len(data):
        assert data[offset : offset + 2] == b"\x1f\x8b", f"no gzip member at {offset}"
        inflate = zlib.decompressobj(zlib.MAX_WBITS | 16)
        inflate.decompress(data[offset:])
        members.append((data[offset + 8], len(data) - offset - len(inflate.unused_data)))
        offset = len(data) - len(inflate.unused_data)
    assert [xfl for xfl, _ in members] == [0, 0, 0]  # warcinfo, response, request: none at level 9 (XFL 2)
    response_member = members[1][1]
    assert response_member < len(page) / 5  # still compressed: the page repeats itself
    types = [record.rec_type for record in ArchiveIterator(archive.files[0].open("rb"))]
    assert types == ["warcinfo", "response", "request"]


def test_a_writer_past_midnight_or_its_size_limit_moves_to_a_new_file(tmp_path: Path) -> None:
    from datetime import timedelta

    with ArchiveWriter(tmp_path, max_file_bytes=1000) as archive:
        today = _fetch("http://example.test/today")
        for n in range(3):
            archive.write_now(replace(today, url=f"http://example.test/{n}"))
        archive.write_now(replace(today, fetched_at=today.fetched_at + timedelta(days=1)))
    days = sorted(p.parent.name for p in archive.files)
    tomorrow = (today.fetched_at + timedelta(days=1)).date().isoformat()
    assert days.count(tomorrow) == 1 and len(days) > 2  # the size limit opened more than one file today
    assert sum(summarize_day(tmp_path, datetime.fromisoformat(d).date()).responses for d in set(days)) == 4


def test_indexing_a_day_again_reads_only_the_files_changed_since_it_was_last_indexed(tmp_path: Path) -> None:
    today = datetime.now(UTC).date()
    with ArchiveWriter(tmp_path) as first:
        for n in range(3):
            first.write_now(_fetch(f"http://example.test/first/{n}"))
    assert index_day(tmp_path, today).index_lines == 3
    # Same size, same modification time, other bytes: a file that did not change as far as its size and time
    # tell is not read again (were it read, it would be reported as damaged and give no lines).
    [path] = first.files
    before = path.stat()
    path.write_bytes(b"x" * before.st_size)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    with ArchiveWriter(tmp_path) as second:
        for n in range(2):
            second.write_now(_fetch(f"http://example.test/second/{n}"))
    summary = index_day(tmp_path, today)
    assert (summary.index_lines, summary.responses, summary.damaged) == (5, 5, [])
    assert summarize_day(tmp_path, today).responses == 5


def test_a_file_that_grew_since_the_day_was_indexed_is_read_again(tmp_path: Path) -> None:
    today = datetime.now(UTC).date()
    with ArchiveWriter(tmp_path) as archive:
        for n in range(2):
            archive.write_now(_fetch(f"http://example.test/{n}"))
        assert index_day(tmp_path, today).index_lines == 2
        for n in range(2, 5):
            archive.write_now(_fetch(f"http://example.test/{n}"))
        summary = index_day(tmp_path, today)
    assert (summary.index_lines, summary.responses) == (5, 5)
    assert summarize_day(tmp_path, today).responses == 5
    indexed = (summary.folder / "index.cdxj").read_text().splitlines()
    assert sorted(line.split('"url": "')[1].split('"')[0] for line in indexed) == [
        f"http://example.test/{n}" for n in range(5)
    ]


@pytest.mark.parametrize(
    ("served", "recorded"),
    [
        ({"content-length": "17"}, [("content-length", "17")]),
        (
            {"content-encoding": "gzip", "content-length": "9"},
            [
                ("X-Archive-Orig-content-encoding", "gzip"),
                ("X-Archive-Orig-content-length", "9"),
                ("content-length", "17"),
            ],
        ),
        ({"transfer-encoding": "chunked"}, [("X-Archive-Orig-transfer-encoding", "chunked"), ("content-length", "17")]),
        ({"set-cookie": "a=1\nb=2"}, [("set-cookie", "a=1"), ("set-cookie", "b=2"), ("content-length", "17")]),
    ],
    ids=["plain", "decompressed", "unchunked", "repeated"],
)
def test_archived_headers_describe_the_decoded_body_the_record_holds(
    served: dict[str, str], recorded: list[tuple[str, str]]
) -> None:
    headers = archived_headers(_fetch("http://example.test/", **served))
    assert headers[1:] == recorded  # after content-type


@pytest.mark.browser
def test_pages_only_scripts_build_are_rebuilt_from_the_archived_rendered_dom(
    db: Database, database_url: str, sandbox_factory: Any, tmp_path: Path
) -> None:
    site = sandbox_factory(js_mode=True)
    report = _crawl(database_url, site, tmp_path, mode="browser", concurrency=4)
    assert report.counts["total"] == 11
    conversions = [r for _, _, r in _records(tmp_path) if r.rec_type == "conversion"]
    assert len(conversions) >= 11  # the rendered DOM of every book page, beside its served response
    result = _reextract(database_url, tmp_path)
    assert result.exit_code == 0, result.output
    assert "books table: 11 equal, 0 differ, 0 only in the archive, 0 only in the table" in result.stdout


def test_the_days_index_merges_each_files_own_index_and_keeps_no_earlier_line_in_its_cache(tmp_path: Path) -> None:
    today = datetime.now(UTC).date()
    with ArchiveWriter(tmp_path) as first:
        for n in range(3):
            first.write_now(_fetch(f"http://example.test/first/{n}"))
    index_day(tmp_path, today)
    with ArchiveWriter(tmp_path) as second:
        for n in range(2):
            second.write_now(_fetch(f"http://example.test/second/{n}"))
    summary = index_day(tmp_path, today)
    # Each file's lines are indexed once, into an index of its own; the day's cache describes the files (one
    # small entry each) and holds none of their lines, so a crawl's end reads no earlier crawl's lines ...
    cache = json.loads((summary.folder / ".index-files.json").read_text())
    assert sorted(cache) == sorted(p.name for p in (*first.files, *second.files))
    assert all(set(entry) == {"size", "mtime_ns", "intact", "types", "damage"} for entry in cache.values())
    own = {p.name: p.read_text().splitlines() for p in (summary.folder / ".index-files").glob("*.cdxj")}
    assert sorted(len(lines) for lines in own.values()) == [2, 3]
    # ... and the day's index is their merge, in order.
    day = (summary.folder / "index.cdxj").read_text().splitlines()
    assert summary.index_lines == 5 and day == sorted(line for lines in own.values() for line in lines)
