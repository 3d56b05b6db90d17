"""Crawl benchmark: a full sandbox crawl's pages/s and peak RSS (worker + Chromium).

Runs browser mode at concurrency 1, 4 and 8 and http mode, each a full crawl of the 1000-book sandbox
(about 1,080 pages) with politeness off, in a scratch database, one worker process. Memory is sampled
every 100 ms over the worker process and all its children (Chromium's processes): ``peak_rss_mb`` is the
peak of their summed PSS (shared pages counted once), ``peak_rss_sum_mb`` the naive sum of RSS. Prints:

    {"browser": {"1": {"pages_per_s": N, "peak_rss_mb": N}, "4": {...}, "8": {...}},
     "http": {"pages_per_s": N, "peak_rss_mb": N}, "seed_pages_per_s": 3.3}

Usage: python benchmarks/crawl_bench.py [--modes browser:1,browser:4,browser:8,http:8] [--categories ...]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import reset_crawl_tables, scratch_database

from book_assets.crawl.config import CrawlConfig
from book_assets.crawl.pipeline import crawl

BENCH_DB = "bookpipeline_bench_crawl"


def _run(url: str, base_url: str, mode: str, concurrency: int, result: dict[str, Any]) -> None:
    config = CrawlConfig.resolve(
        base_url=base_url, fetch_mode=mode, concurrency=concurrency, min_interval_s=0.0, workers=1, timeout_s=30
    )
    report = crawl(url, config)
    result["pages"] = report.run.pages
    result["books"] = report.counts["total"]
    result["elapsed_s"] = report.elapsed_s


def measure(url: str, base_url: str, mode: str, concurrency: int) -> dict[str, Any]:
    """One full crawl in a child process; RSS summed over it and its descendants."""
    reset_crawl_tables(url)
    manager = multiprocessing.Manager()
    shared = manager.dict()
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_run, args=(url, base_url, mode, concurrency, shared))
    started = time.monotonic()
    proc.start()
    peak_pss = peak_rss_sum = 0
    parent = psutil.Process(proc.pid)
    while proc.is_alive():
        try:
            family = [parent, *parent.children(recursive=True)]
            rss_sum = pss_sum = 0
            for member in family:
                with contextlib.suppress(psutil.Error):
                    info = member.memory_full_info()
                    rss_sum += info.rss
                    pss_sum += getattr(info, "pss", info.rss)
            peak_rss_sum, peak_pss = max(peak_rss_sum, rss_sum), max(peak_pss, pss_sum)
        except psutil.Error:
            pass
        time.sleep(0.1)
    proc.join()
    elapsed = time.monotonic() - started
    pages = shared.get("pages", 0)
    return {
        "pages_per_s": round(pages / shared.get("elapsed_s", elapsed), 1) if pages else 0.0,
        # Chromium is a dozen processes sharing most of their pages: summing their RSS counts the shared
        # pages once per process. PSS (proportional set size) charges each shared page to its sharers in
        # proportion, so the sum is the family's real footprint; the naive RSS sum is reported beside it.
        "peak_rss_mb": round(peak_pss / 1e6, 1),
        "peak_rss_sum_mb": round(peak_rss_sum / 1e6, 1),
        "pages": pages,
        "books": shared.get("books", 0),
        "wall_s": round(elapsed, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--modes", default="browser:1,browser:4,browser:8,http:8")
    args = parser.parse_args()
    url = scratch_database(BENCH_DB)
    out: dict[str, Any] = {"browser": {}, "seed_pages_per_s": 3.3}
    # The sandbox runs in its own process so it never competes with the crawler's event loop.
    sandbox = subprocess.Popen(
        [sys.executable, "-m", "book_assets.cli", "sandbox", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = sandbox.stdout.readline() if sandbox.stdout else ""
    base_url = next(tok for tok in line.split() if tok.startswith("http"))
    try:
        for spec in args.modes.split(","):
            mode, _, conc = spec.partition(":")
            figures = measure(url, base_url, mode, int(conc or 8))
            if mode == "browser":
                out["browser"][conc] = figures
            else:
                out["http"] = figures
            print(json.dumps({spec: figures}), file=sys.stderr)
    finally:
        sandbox.terminate()
        sandbox.wait(10)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
