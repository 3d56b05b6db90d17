"""Metrics benchmark: what the workers' Prometheus metrics cost an http crawl's pages/s (goal: under 3 %).

Full crawls of the 1000-book sandbox (about 1,080 pages) in http mode, politeness off, in a scratch database,
alternately with metrics off and on (``metrics_port`` set, and the endpoint scraped every second from another
process, as Prometheus would), each in a fresh process; the baseline is measured in the same run. Prints:

    {"off": {"pages_per_s": [..], "median": N}, "on": {...}, "overhead_pct": N, "scrapes": N}

Usage: python benchmarks/metrics_bench.py [--rounds 3] [--workers 2] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from crawl_bench import _reset, _scratch_database

from book_assets.crawl.config import CrawlConfig
from book_assets.crawl.pipeline import crawl


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(url: str, base_url: str, workers: int, concurrency: int, port: int | None, result: Any) -> None:
    config = CrawlConfig.resolve(
        base_url=base_url,
        fetch_mode="http",
        workers=workers,
        concurrency=concurrency,
        min_interval_s=0.0,
        metrics_port=port,
        metrics_final_scrape_s=0,
    )
    report = crawl(url, config)
    result["pages"] = report.run.pages
    result["elapsed_s"] = report.elapsed_s


def measure(url: str, base_url: str, workers: int, concurrency: int, *, metrics: bool) -> tuple[float, int]:
    """One crawl in a fresh process: its pages/s, and how many scrapes answered meanwhile."""
    _reset(url)
    shared = multiprocessing.Manager().dict()
    port = _free_port() if metrics else None
    proc = multiprocessing.get_context("spawn").Process(
        target=_run, args=(url, base_url, workers, concurrency, port, shared)
    )
    proc.start()
    scrapes = 0
    while proc.is_alive():
        time.sleep(1.0)
        if port is not None:
            with contextlib.suppress(httpx.HTTPError):  # not serving yet, or already gone
                scrapes += httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).status_code == 200
    proc.join()
    return round(shared["pages"] / shared["elapsed_s"], 1), scrapes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    url = _scratch_database("bookpipeline_bench_metrics")
    sandbox = subprocess.Popen(
        [sys.executable, "-m", "book_assets.cli", "sandbox", "serve", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    line = sandbox.stdout.readline() if sandbox.stdout else ""
    base_url = next(tok for tok in line.split() if tok.startswith("http"))
    runs: dict[str, list[float]] = {"off": [], "on": []}
    scrapes = 0
    try:
        measure(url, base_url, args.workers, args.concurrency, metrics=False)  # warm-up: caches, the sandbox
        for _ in range(args.rounds):
            for label in ("off", "on"):
                pages_per_s, scraped = measure(url, base_url, args.workers, args.concurrency, metrics=label == "on")
                runs[label].append(pages_per_s)
                scrapes += scraped
                print(json.dumps({label: pages_per_s}), file=sys.stderr)
    finally:
        sandbox.terminate()
        sandbox.wait(10)
    off, on = statistics.median(runs["off"]), statistics.median(runs["on"])
    out = {
        "off": {"pages_per_s": runs["off"], "median": off},
        "on": {"pages_per_s": runs["on"], "median": on},
        "overhead_pct": round((off - on) / off * 100, 2),
        "scrapes": scrapes,
        "workers": args.workers,
        "concurrency": args.concurrency,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
