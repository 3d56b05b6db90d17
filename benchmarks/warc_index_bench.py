"""WARC index benchmark: what indexing a day costs a crawl's end, from the writers' journals and by reading the files.

Writes ``--pages`` synthetic book pages (about 8 KB of HTML each, 3 KB per page compressed, as the sandbox's)
through the archive's writer into ``--files`` files (one per worker process of a crawl), then indexes the
day twice in a fresh folder state: from the journals (what a crawl's end runs: ``index_day``) and by reading
every file whole (``index_day(reread=True)``: what the end step did before the journals, and the repair).
The two indexes must be equal. A third end step indexes the day after the last journal line of every file
is lost (a worker killed before journaling its last write): its files are read only past the journal's end.
The writer's time per page is measured with its journal and with journaling switched off, the cost the
journal moves from the crawl's end into the workers' writer threads. Prints one JSON object:

    {"pages": N, "files": N, "warc_mb": N, "index_lines": N, "equal": true,
     "end_step_reread_s": N, "end_step_journal_s": N, "speedup": N, "end_step_lost_last_line_s": N,
     "write_us_per_page": N, "write_us_per_page_no_journal": N, "journal_mb": N}

Usage: python benchmarks/warc_index_bench.py [--pages 10000] [--files 2]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from book_assets.archive import ArchiveWriter, index_day
from book_assets.archive import journal as journal_module
from book_assets.archive.journal import FILE_INDEXES, journal_path
from book_assets.scraper.fetching import FetchResult, build_result

WORDS = [
    "the",
    "a",
    "book",
    "of",
    "in",
    "light",
    "dark",
    "river",
    "house",
    "night",
    "city",
    "stone",
    "garden",
    "letter",
    "summer",
    "winter",
    "road",
]


def _page(rng: random.Random, n: int) -> FetchResult:
    text = " ".join(rng.choice(WORDS) for _ in range(1300))
    body = (
        f"<html><head><title>Book {n}</title></head><body><h1>Book {n}</h1>"
        f"<p class='price_color'>£{rng.randint(10, 60)}.{rng.randint(0, 99):02d}</p><p>{text}</p></body></html>"
    ).encode()
    url = f"http://books.example.test/catalogue/book_{n}/index.html"
    return build_result(
        url=url,
        final_url=url,
        status=200,
        headers={"content-type": "text/html; charset=utf-8", "content-length": str(len(body))},
        body=body,
        fetched_at=datetime.now(UTC),
        elapsed_s=0.01,
        request_headers={"user-agent": "book-pipeline bench"},
    )


@contextmanager
def _no_journal() -> Iterator[None]:
    """The writer with journaling off: its cost without the journal, for comparison only."""
    append = journal_module.JournalWriter.append
    journal_module.JournalWriter.append = lambda self, end, written: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        journal_module.JournalWriter.append = append  # type: ignore[method-assign]


def _write(archive: Path, pages: list[FetchResult], files: int) -> float:
    """Write ``pages`` into ``files`` files, round robin; the seconds spent in the writers."""
    writers = [ArchiveWriter(archive) for _ in range(files)]
    started = time.perf_counter()
    for n, page in enumerate(pages):
        writers[n % files].write_now(page)
    elapsed = time.perf_counter() - started
    for writer in writers:
        writer.close()
    return elapsed


def _fresh(folder: Path) -> None:
    """Forget every earlier indexing of the day (the index, the cache, each file's sorted lines)."""
    (folder / "index.cdxj").unlink(missing_ok=True)
    (folder / ".index-files.json").unlink(missing_ok=True)
    for sorted_lines in (folder / FILE_INDEXES).glob("*.cdxj"):
        sorted_lines.unlink()


def _timed_index(archive: Path, *, reread: bool = False) -> tuple[float, str, int]:
    day = datetime.now(UTC).date()
    started = time.perf_counter()
    summary = index_day(archive, day, reread=reread)
    elapsed = time.perf_counter() - started
    assert summary.index_path is not None
    return elapsed, summary.index_path.read_text(encoding="utf-8"), summary.bytes


def measure(count: int, files: int) -> dict[str, Any]:
    rng = random.Random(48)
    pages = [_page(rng, n) for n in range(count)]
    with tempfile.TemporaryDirectory() as scratch:
        with _no_journal():
            plain_s = _write(Path(scratch) / "plain", pages, files)
        archive = Path(scratch) / "journaled"
        write_s = _write(archive, pages, files)
        folder = next(archive.iterdir())
        _fresh(folder)
        journal_s, journaled, warc_bytes = _timed_index(archive)
        _fresh(folder)
        reread_s, reread, _ = _timed_index(archive, reread=True)
        journal_bytes = sum(p.stat().st_size for p in (folder / FILE_INDEXES).glob("*.journal"))
        for journal in (folder / FILE_INDEXES).glob("*.journal"):
            lines = journal.read_text(encoding="utf-8").splitlines(keepends=True)
            journal.write_text("".join(lines[:-1]), encoding="utf-8")
        _fresh(folder)
        lost_s, lost, _ = _timed_index(archive)
        assert all(journal_path(p).is_file() for p in folder.glob("*.warc.gz"))
        shutil.rmtree(Path(scratch) / "plain")
    return {
        "pages": count,
        "files": files,
        "warc_mb": round(warc_bytes / 1e6, 1),
        "index_lines": len(journaled.splitlines()),
        "equal": journaled == reread == lost,
        "end_step_reread_s": round(reread_s, 3),
        "end_step_journal_s": round(journal_s, 3),
        "speedup": round(reread_s / journal_s, 1),
        "end_step_lost_last_line_s": round(lost_s, 3),
        "write_us_per_page": round(1e6 * write_s / count),
        "write_us_per_page_no_journal": round(1e6 * plain_s / count),
        "journal_mb": round(journal_bytes / 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=2)
    args = parser.parse_args()
    print(json.dumps(measure(args.pages, args.files)))


if __name__ == "__main__":
    main()
