"""WARC benchmark: what archiving costs a full sandbox crawl (1000 books), and how large the archive is.

Each round crawls the whole sandbox twice in a scratch database, once with ``warc`` off and once on (the
order alternates between rounds), one worker process, politeness off; the crawl with the archive includes
indexing the day (CDXJ) when it ends. Then the archive is read back: ``reextract --from-warc``'s rebuild and
comparison with the books table, after one more (untimed) crawl with the archive, the one the table then
holds. Prints one JSON object:

    {"mode": "http", "rounds": 3, "pages": 1071, "books": 1000,
     "warc_off_s": [..], "warc_on_s": [..], "median_off_s": N, "median_on_s": N, "overhead_pct": N,
     "warc_bytes": N, "warc_mb": N, "bytes_per_page": N, "responses": N, "index_lines": N, "index_bytes": N,
     "rebuild_s": N, "compare": "1000 equal, 0 differ, ..."}

Usage: python benchmarks/warc_bench.py [--mode http|browser] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import reset_crawl_tables, scratch_database

from book_assets.archive import archive_files, summarize_day
from book_assets.archive.rebuild import compare, rebuild
from book_assets.crawl.config import CrawlConfig
from book_assets.crawl.pipeline import CrawlReport, crawl
from book_assets.db.connection import Database
from book_assets.sandbox.server import SandboxServer

BENCH_DB = "bookpipeline_bench_warc"


def _crawl(url: str, base_url: str, mode: str, archive: Path | None) -> CrawlReport:
    reset_crawl_tables(url)
    config = CrawlConfig.resolve(
        base_url=base_url,
        fetch_mode=mode,
        concurrency=8,
        min_interval_s=0.0,
        workers=1,
        timeout_s=30,
        warc=archive is not None,
        warc_dir=archive,
    )
    return crawl(url, config)


def measure(mode: str, rounds: int) -> dict[str, Any]:
    url = scratch_database(BENCH_DB)
    off: list[float] = []
    on: list[float] = []
    result: dict[str, Any] = {"mode": mode, "rounds": rounds}
    with SandboxServer() as site, tempfile.TemporaryDirectory() as scratch:
        for n in range(rounds):
            archive = Path(scratch) / f"round{n}"
            order = [None, archive] if n % 2 == 0 else [archive, None]
            for folder in order:
                report = _crawl(url, site.url, mode, folder)
                (on if folder else off).append(round(report.elapsed_s, 2))
                result.update(pages=report.run.pages, books=report.counts["total"])
        last = Path(scratch) / "last"
        _crawl(url, site.url, mode, last)  # untimed: the archive whose crawl the books table holds
        summary = summarize_day(last, datetime.now(UTC).date())
        started = time.monotonic()
        rebuilt = rebuild(archive_files(last))
        with Database(url) as db:
            comparison = compare(db, rebuilt)
        rebuild_s = time.monotonic() - started
        index = summary.index_path
        result.update(
            warc_off_s=off,
            warc_on_s=on,
            median_off_s=statistics.median(off),
            median_on_s=statistics.median(on),
            overhead_pct=round(100 * (statistics.median(on) / statistics.median(off) - 1), 1),
            warc_files=len(summary.files),
            warc_bytes=summary.bytes,
            warc_mb=round(summary.bytes / 1e6, 2),
            bytes_per_page=round(summary.bytes / max(summary.responses, 1)),
            responses=summary.responses,
            index_lines=summary.index_lines,
            index_bytes=index.stat().st_size if index else 0,
            served_bytes=sum(len(page[1].body) for page in rebuilt.books.values()),
            rebuild_s=round(rebuild_s, 2),
            compare=comparison.line().removeprefix("books table: "),
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["http", "browser"], default="http")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(measure(args.mode, args.rounds)))


if __name__ == "__main__":
    main()
