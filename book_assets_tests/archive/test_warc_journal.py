"""The WARC index written as records are written: each file's journal gives the index a reading of the files
would, and the files are read only past their journals' end."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from book_assets.archive import ArchiveSummary, ArchiveWriter, index_day
from book_assets.archive.journal import journal_path, read_journal
from book_assets.crawl.pipeline import crawl
from book_assets.scraper.fetching import FetchResult, build_result
from book_assets_tests.crawl.conftest import sandbox_config


def _fetch(url: str, status: int = 200, headers: dict[str, str] | None = None) -> FetchResult:
    return build_result(
        url=url,
        final_url=url,
        status=status,
        headers={"content-type": "text/html; charset=utf-8"} if headers is None else headers,
        body=b"<html>page</html>",
        fetched_at=datetime.now(UTC),
        elapsed_s=0.01,
        request_headers={"user-agent": "test"},
    )


def _index(summary: ArchiveSummary) -> str:
    assert summary.index_path is not None
    return summary.index_path.read_text(encoding="utf-8")


def _journaled_and_reread(archive: Path) -> tuple[tuple[ArchiveSummary, str], tuple[ArchiveSummary, str]]:
    """The day's index from the journals (what a crawl's end writes), then from reading every file whole."""
    today = datetime.now(UTC).date()
    journaled = index_day(archive, today)
    first = (journaled, _index(journaled))
    reread = index_day(archive, today, reread=True)
    return first, (reread, _index(reread))


def _write_odd_pages(archive: Path) -> list[Path]:
    """Pages of every kind the index treats apart: a non-ASCII URL, no or an unusual Content-Type, an error
    status, a rendered DOM (conversion record), a 304 (revisit record)."""
    with ArchiveWriter(archive) as writer:
        writer.write_now(_fetch("http://example.test/a"))
        writer.write_now(_fetch("http://example.test/caf\u00e9_1/?q=1"))
        writer.write_now(_fetch("http://example.test/none", headers={}))
        writer.write_now(_fetch("http://example.test/gone", status=404, headers={"Content-Type": "TEXT/HTML ;x"}))
        writer.write_now(dataclasses.replace(_fetch("http://example.test/r"), rendered_html="<html>dom</html>"))
        writer.write_now(_fetch("http://example.test/same", status=304))
    return writer.files


def test_the_journaled_index_equals_the_index_read_back_from_the_files_for_every_kind_of_record(
    tmp_path: Path,
) -> None:
    [path] = _write_odd_pages(tmp_path)
    journal = read_journal(path)
    assert journal is not None and journal.end == path.stat().st_size and len(journal.lines) == 6
    (journaled, index), (reread, expected) = _journaled_and_reread(tmp_path)
    assert index == expected and len(index.splitlines()) == 6
    assert journaled.files == reread.files and journaled.damaged == []


def test_the_end_step_reads_a_file_only_past_its_journals_end(tmp_path: Path) -> None:
    with ArchiveWriter(tmp_path) as writer:
        for n in range(4):
            writer.write_now(_fetch(f"http://example.test/{n}"))
    [path] = writer.files
    journal = read_journal(path)
    assert journal is not None
    # Bytes the journal covers, overwritten: were they read, the file would be damaged from byte 0 on.
    with path.open("r+b") as fh:
        fh.write(b"x" * journal.end)
    summary = index_day(tmp_path, datetime.now(UTC).date())
    assert (summary.index_lines, summary.responses, summary.damaged) == (4, 4, [])
    repaired = index_day(tmp_path, datetime.now(UTC).date(), reread=True)
    assert (repaired.index_lines, [d.offset for d in repaired.damaged]) == (0, [0])


def test_records_past_a_cut_or_lost_journal_line_are_indexed_from_the_file(tmp_path: Path) -> None:
    [path] = _write_odd_pages(tmp_path)
    journal = journal_path(path)
    lines = journal.read_text(encoding="utf-8").splitlines(keepends=True)
    # Killed between its records and their journal lines: the last write's line lost, the one before cut.
    journal.write_text("".join(lines[:-2]) + lines[-2][: len(lines[-2]) // 2], encoding="utf-8")
    left = read_journal(path)
    assert left is not None and left.end < path.stat().st_size and len(left.lines) == 4
    (_, index), (_, expected) = _journaled_and_reread(tmp_path)
    assert index == expected and len(index.splitlines()) == 6


def test_a_file_without_a_journal_or_longer_than_its_file_is_read_whole(tmp_path: Path) -> None:
    [kept, lost] = [_write_odd_pages(tmp_path / "a")[0], _write_odd_pages(tmp_path / "b")[0]]
    journal_path(lost).unlink()
    with kept.open("r+b") as fh:  # the file cut inside its last record: its journal claims more than it holds
        fh.truncate(kept.stat().st_size - 10)
    damaged = []
    for archive in (tmp_path / "a", tmp_path / "b"):
        (journaled, index), (reread, expected) = _journaled_and_reread(archive)
        assert index == expected and len(index.splitlines()) == 6 and journaled.files == reread.files
        damaged.append([d.path for d in journaled.damaged])
    assert damaged == [[kept], []]  # the cut is reported (it falls in the last page's request record)


def test_a_crawls_index_equals_the_index_read_back_from_its_files(
    database_url: str, sandbox: Any, tmp_path: Path
) -> None:
    config = sandbox_config(sandbox.url, categories=("Travel",), warc_dir=tmp_path, workers=2)
    crawl(database_url, config)
    again = crawl(database_url, config)  # a conditional re-crawl: its 304s are revisit records
    [summary] = again.archive
    index = _index(summary)
    repaired = index_day(tmp_path, summary.day, reread=True)
    assert index == _index(repaired) and summary.files == repaired.files
    assert summary.index_lines == 26 and summary.count("revisit") == 13
