"""Browser benchmark: the project's browser crawl against Chromium's ceiling on the same pages.

One process tree, one sandbox (in its own process), one after the other on the same pages:

1. ``ceiling``: a bare Playwright loop over the pages a full crawl fetches (the start page, every category's
   listing pages and the 1000 book pages: ``harness.crawled_paths``) — the same Chromium binary the crawl uses
   (``find_chromium``), 8 tabs, images/CSS/fonts/media blocked inside Chromium (CDP ``Network.setBlockedURLs``),
   JavaScript off, no database, no parsing.
2. ``browser``: a full crawl of the sandbox (about 1,080 pages: listings and books) with default settings
   (workers, tabs, JavaScript), politeness off, in a scratch database.
3. ``adaptive``: the same crawl with ``fetch_mode=adaptive`` (null while the mode does not exist).
4. ``http``: the same crawl with ``fetch_mode=http``.

``browser_peak_pss_mb`` is the peak, over the browser crawl, of one worker process plus its descendants
(Playwright's Node driver and Chromium's processes), summed as PSS so pages shared between Chromium's
processes count once; sampled every 250 ms. Prints one JSON line:

    {"ceiling_pages_per_s": N, "browser_pages_per_s": N, "browser_vs_ceiling": R, "adaptive_pages_per_s": N,
     "http_pages_per_s": N, "browser_peak_pss_mb": N, "chromium": "path"}

(and per-run details on stderr). Never a timed assertion: run it by hand, under
``flock /tmp/book-pipeline-cpu.lock``, on an idle machine.

Usage: python benchmarks/browser_bench.py [--runs ceiling,browser,adaptive,http] [--tabs 8]
       [--workers W --concurrency C]  (the crawls' settings instead of the defaults)
"""

from __future__ import annotations

import argparse
import asyncio
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

from harness import (
    ceiling_pages_per_s,
    crawl_for_figures,
    crawled_paths,
    reset_crawl_tables,
    scratch_database,
    worker_pss,
)

from book_assets.sandbox.catalogue import Catalogue
from book_assets.scraper.chromium import find_chromium

BENCH_DB = "bookpipeline_bench_browser"


def measure_crawl(url: str, base_url: str, mode: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """One full crawl in a child process, sampling the memory of each worker's process tree."""
    reset_crawl_tables(url)
    manager = multiprocessing.Manager()
    shared = manager.dict()
    proc = multiprocessing.get_context("spawn").Process(
        target=crawl_for_figures, args=(url, base_url, mode, overrides, shared)
    )
    started = time.monotonic()
    proc.start()
    parent, peak = psutil.Process(proc.pid), 0.0
    while proc.is_alive():
        with contextlib.suppress(psutil.Error):
            peak = max(peak, worker_pss(parent))
        time.sleep(0.25)
    proc.join()
    out = dict(shared)
    if proc.exitcode != 0 or not out.get("pages"):
        return {"error": f"exit code {proc.exitcode}", "pages_per_s": None}
    out["pages_per_s"] = round(out["pages"] / out["elapsed_s"], 1)
    out["peak_worker_pss_mb"] = round(peak / 1e6, 1)
    out["wall_s"] = round(time.monotonic() - started, 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", default="ceiling,browser,adaptive,http")
    parser.add_argument("--tabs", type=int, default=8, help="tabs of the ceiling loop")
    parser.add_argument("--workers", type=int, help="crawl workers (default: the setting)")
    parser.add_argument("--concurrency", type=int, help="crawl pages per worker (default: the setting)")
    args = parser.parse_args()
    runs = args.runs.split(",")
    url = scratch_database(BENCH_DB)
    chromium = find_chromium()
    out: dict[str, Any] = {
        "ceiling_pages_per_s": None,
        "browser_pages_per_s": None,
        "browser_vs_ceiling": None,
        "adaptive_pages_per_s": None,
        "http_pages_per_s": None,
        "browser_peak_pss_mb": None,
        "chromium": chromium,
    }
    sandbox = subprocess.Popen(
        [sys.executable, "-m", "book_assets.cli", "sandbox", "serve", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    line = sandbox.stdout.readline() if sandbox.stdout else ""
    base_url = next(tok for tok in line.split() if tok.startswith("http"))
    try:
        if "ceiling" in runs:
            paths = crawled_paths(Catalogue())
            out["ceiling_pages_per_s"] = round(
                asyncio.run(ceiling_pages_per_s(base_url, paths, args.tabs, chromium)), 1
            )
            print(json.dumps({"ceiling": out["ceiling_pages_per_s"], "pages": len(paths)}), file=sys.stderr)
        for mode in ("browser", "adaptive", "http"):
            if mode not in runs:
                continue
            try:
                overrides = {"workers": args.workers, "concurrency": args.concurrency}
                figures = measure_crawl(url, base_url, mode, {k: v for k, v in overrides.items() if v is not None})
            except Exception as exc:  # a mode this checkout does not have yet
                figures = {"error": f"{type(exc).__name__}: {exc}", "pages_per_s": None}
            print(json.dumps({mode: figures}), file=sys.stderr)
            out[f"{mode}_pages_per_s"] = figures.get("pages_per_s")
            if mode == "browser":
                out["browser_peak_pss_mb"] = figures.get("peak_worker_pss_mb")
        if out["ceiling_pages_per_s"] and out["browser_pages_per_s"]:
            out["browser_vs_ceiling"] = round(out["browser_pages_per_s"] / out["ceiling_pages_per_s"], 2)
    finally:
        sandbox.terminate()
        sandbox.wait(10)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
