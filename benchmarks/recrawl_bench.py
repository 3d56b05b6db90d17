"""Re-crawl benchmark: bytes and time of a day-0 re-crawl (nothing changed) against the first crawl.

Each variant crawls the whole 1000-book sandbox in http mode into an emptied scratch database, then
crawls it again with nothing changed: ``conditional`` sends the stored validators (the default), and
``unconditional`` turns ``conditional_requests`` off, as every crawl was before (the baseline). Bytes are
what the sandbox sent (response heads and bodies, from its own counter); ``body_bytes`` is what the
fetcher downloaded. The sandbox runs in its own process. Prints:

    {"conditional": {"first": {"bytes": N, "body_bytes": N, "elapsed_s": N, "pages": N, "statuses": {...}},
                     "recrawl": {...}, "recrawl_bytes_share": 0.0NN},
     "unconditional": {...}}

Usage: python benchmarks/recrawl_bench.py [--workers 2] [--concurrency 8] [--categories Travel,Poetry] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import reset_crawl_tables, scratch_database

from book_assets.crawl.config import CrawlConfig
from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets.db.migrations import migrate

BENCH_DB = "bookpipeline_bench_recrawl"


def _one_crawl(url: str, base_url: str, settings: dict[str, Any]) -> dict[str, Any]:
    """One crawl, measured by the sandbox's counters (reset first) and the crawl's report."""
    httpx.post(base_url + "__sandbox__/reset").raise_for_status()
    report = crawl(url, CrawlConfig.resolve(base_url=base_url, **settings))
    served = httpx.get(base_url + "__sandbox__/stats").json()
    statuses: Counter[int] = Counter(s for seen in served["responses"].values() for s in seen)
    return {
        "bytes": served["bytes_sent"],
        "body_bytes": report.stats.fetcher.get("bytes_fetched", 0),
        "elapsed_s": round(report.elapsed_s, 2),
        "pages": report.run.pages,
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "books_unchanged": report.run.books_unchanged,
        "not_modified": report.run.not_modified,
        "failed": sum(report.failed_by_reason.values()),
    }


def _fastest(crawls: list[dict[str, Any]]) -> dict[str, Any]:
    """The fastest of repeated identical crawls (on a shared machine, the least disturbed), with every time."""
    best = min(crawls, key=lambda c: c["elapsed_s"])
    return {**best, "elapsed_s_all": [c["elapsed_s"] for c in crawls]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--categories", default="")
    parser.add_argument("--repeat", type=int, default=1, help="pairs of crawls per variant; the fastest is shown")
    args = parser.parse_args()
    url = scratch_database(BENCH_DB)
    with Database(url) as db:  # before any timing: the first crawl would otherwise include the migrations
        migrate(db)
    sandbox = subprocess.Popen(
        [sys.executable, "-m", "book_assets.cli", "sandbox", "serve", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    line = sandbox.stdout.readline() if sandbox.stdout else ""
    base_url = next(tok for tok in line.split() if tok.startswith("http")).rstrip("/") + "/"
    common: dict[str, Any] = {
        "fetch_mode": "http",
        "workers": args.workers,
        "concurrency": args.concurrency,
        "min_interval_s": 0.0,
        "categories": args.categories or None,
    }
    out: dict[str, Any] = {}
    try:
        for name, conditional in (("conditional", True), ("unconditional", False)):
            settings = {**common, "conditional_requests": conditional}
            runs = []
            for _ in range(args.repeat):
                reset_crawl_tables(url)
                runs.append((_one_crawl(url, base_url, settings), _one_crawl(url, base_url, settings)))
            first, recrawl = (_fastest([run[i] for run in runs]) for i in (0, 1))
            out[name] = {
                "first": first,
                "recrawl": recrawl,
                "recrawl_bytes_share": round(recrawl["bytes"] / first["bytes"], 4),
            }
            print(json.dumps({name: out[name]}), file=sys.stderr)
    finally:
        sandbox.terminate()
        sandbox.wait(10)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
