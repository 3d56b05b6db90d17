"""Where a browser crawl's CPU goes: CPU milliseconds per page by process, for the ceiling loop and the crawl.

Runs, on one sandbox (its own process), the ceiling loop of ``browser_bench.py`` and then a full browser crawl
with default settings (or ``--workers``/``--concurrency``), each in a child process, and samples every
process of the child's tree every 100 ms (user + system CPU seconds from ``/proc``), grouped by kind:
the Python processes (the crawl's parent and its workers), Playwright's Node driver, and Chromium's
processes by ``--type`` (browser, renderer, gpu-process, utility: the network service, zygote). The
sandbox's CPU and the PostgreSQL backends of the scratch database are read the same way. A process that
exits between two samples loses at most its last 100 ms. Prints one JSON line per run and a last line:

    {"ceiling": {"pages": N, "pages_per_s": N, "cpu_ms_per_page": {"total": N, "python": N, ...}},
     "browser": {...}, "extra_ms_per_page": {"total": N, "python": N, ...}}

Usage: python benchmarks/browser_cpu.py [--runs ceiling,browser,browser-warc-off,browser-warc-on,http,adaptive]
       [--workers W --concurrency C] [--warc on|off]
       [--py-spy FILE]  (a py-spy raw profile of the crawl's Python processes; binary from $PY_SPY)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import re
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness

from book_assets.sandbox.catalogue import Catalogue
from book_assets.scraper.chromium import find_chromium

BENCH_DB = "bookpipeline_bench_browser_cpu"


def _kind(process: psutil.Process) -> str:
    cmdline = process.cmdline()
    name = process.name()
    if name.startswith("postgres"):
        return "postgres"
    if not cmdline:
        return "?"
    if Path(cmdline[0]).name == "node" or name == "node":
        return "node"
    if any(arg == "sandbox" for arg in cmdline) and "serve" in cmdline:
        return "sandbox"
    if "python" in cmdline[0] or "python" in name:
        return "python"
    return next((m.group(1) for arg in cmdline if (m := re.match(r"--type=(\S+)", arg))), "chromium-browser")


class CpuSampler:
    """Latest user + system CPU seconds of every process seen under ``roots`` (and extra pids), by kind."""

    def __init__(self, extra: list[psutil.Process]) -> None:
        self.extra = extra
        self.roots: list[psutil.Process] = []
        self.start: dict[int, float] = {}
        self.latest: dict[int, float] = {}
        self.kinds: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.system_start = psutil.cpu_times()
        self.peak_pss = 0.0  # the largest worker process tree (worker, driver, browser), as browser_bench.py

    def _sample(self) -> None:
        members = list(self.extra)
        for root in self.roots:
            members.append(root)
            try:
                members.extend(root.children(recursive=True))
            except psutil.Error:
                continue
        for process in members:
            try:
                times = process.cpu_times()
                if self.kinds.get(process.pid) == "zygote":  # a renderer forked from the zygote shows as it first
                    self.kinds[process.pid] = _kind(process)
                if process.pid not in self.kinds:
                    is_root = any(process.pid == r.pid for r in self.roots)
                    self.kinds[process.pid] = "python(crawl parent)" if is_root else _kind(process)
                    # Processes seen for the first time start at their CPU so far only if they predate us.
                    self.start.setdefault(process.pid, times.user + times.system if process in self.extra else 0.0)
                self.latest[process.pid] = times.user + times.system
            except psutil.Error:
                continue

    def _run(self) -> None:
        n = 0
        while not self._stop.wait(0.1):
            self._sample()
            n += 1
            if n % 5 == 0 and self.roots:
                self.peak_pss = max(self.peak_pss, harness.worker_pss(self.roots[0]))

    def begin(self) -> None:
        self._sample()
        self._thread.start()

    def end(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        self._sample()
        by_kind: defaultdict[str, float] = defaultdict(float)
        for pid, latest in self.latest.items():
            by_kind[self.kinds[pid]] += latest - self.start.get(pid, 0.0)
        system = psutil.cpu_times()
        busy = sum(
            getattr(system, f) - getattr(self.system_start, f) for f in ("user", "system", "nice", "irq", "softirq")
        )
        by_kind["machine(all processes)"] = busy
        return dict(by_kind)


def _postgres_backends(dbname: str) -> list[psutil.Process]:
    """Backends already connected to ``dbname`` are few; new ones are found by the sampler's rescans."""
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        cmd = " ".join(process.info.get("cmdline") or [])
        if cmd.startswith("postgres:") and f" {dbname} " in f" {cmd} ":
            found.append(process)
    return found


class PostgresWatcher(threading.Thread):
    """Adds the scratch database's backends to the sampler as they connect."""

    def __init__(self, sampler: CpuSampler, dbname: str) -> None:
        super().__init__(daemon=True)
        self.sampler, self.dbname, self.stop = sampler, dbname, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.2):
            known = {p.pid for p in self.sampler.extra}
            for process in _postgres_backends(self.dbname):
                if process.pid not in known:
                    self.sampler.start[process.pid] = 0.0  # a new backend: all its CPU is this run's
                    self.sampler.extra.append(process)


def _ceiling_child(base_url: str, paths: list[str], tabs: int, chromium: str, out: Any) -> None:
    out["pages_per_s"] = asyncio.run(harness.ceiling_pages_per_s(base_url, paths, tabs, chromium))
    out["pages"] = len(paths)


def measure(
    target: Any, args: tuple[Any, ...], sandbox: psutil.Process, dbname: str | None, py_spy: str | None = None
) -> dict[str, Any]:
    manager = multiprocessing.Manager()
    shared = manager.dict()
    sampler = CpuSampler([sandbox])
    watcher = PostgresWatcher(sampler, dbname) if dbname else None
    proc = multiprocessing.get_context("spawn").Process(target=target, args=(*args, shared))
    started = time.monotonic()
    proc.start()
    sampler.roots.append(psutil.Process(proc.pid))
    sampler.begin()
    spy = None
    if py_spy:  # a sampling profile of every Python process of the run (py-spy is not a dependency)
        command = [
            os.environ.get("PY_SPY", "py-spy"),
            "record",
            "--subprocesses",
            "--nonblocking",
            "--rate",
            "200",
            "--format",
            "raw",
        ]
        spy = subprocess.Popen([*command, "-o", py_spy, "-p", str(proc.pid)], stderr=subprocess.DEVNULL)
    if watcher:
        watcher.start()
    proc.join()
    wall = time.monotonic() - started
    if spy is not None:
        spy.wait(30)
    if watcher:
        watcher.stop.set()
        watcher.join()
    cpu = sampler.end()
    out = dict(shared)
    pages = out["pages"]
    out["wall_s"] = round(wall, 1)
    out["peak_worker_pss_mb"] = round(sampler.peak_pss / 1e6, 1)
    out["cpu_s"] = {k: round(v, 2) for k, v in sorted(cpu.items())}
    out["cpu_ms_per_page"] = {k: round(1000 * v / pages, 1) for k, v in sorted(cpu.items())}
    out["cpu_ms_per_page"]["total(tree+sandbox+postgres)"] = round(
        1000 * sum(v for k, v in cpu.items() if not k.startswith("machine")) / pages, 1
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", default="ceiling,browser")
    parser.add_argument("--tabs", type=int, default=8)
    parser.add_argument("--workers", type=int)
    parser.add_argument("--concurrency", type=int)
    parser.add_argument("--warc", choices=("on", "off"))
    parser.add_argument("--py-spy", help="write a py-spy raw profile of the crawl's Python processes here")
    args = parser.parse_args()
    url = harness.scratch_database(BENCH_DB)
    chromium = find_chromium()
    server = subprocess.Popen(
        [sys.executable, "-m", "book_assets.cli", "sandbox", "serve", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    line = server.stdout.readline() if server.stdout else ""
    base_url = next(tok for tok in line.split() if tok.startswith("http"))
    sandbox = psutil.Process(server.pid)
    results: dict[str, Any] = {}
    try:
        runs = args.runs.split(",")
        if "ceiling" in runs:
            paths = harness.crawled_paths(Catalogue())
            results["ceiling"] = measure(_ceiling_child, (base_url, paths, args.tabs, chromium), sandbox, None)
            print(json.dumps({"ceiling": results["ceiling"]}), file=sys.stderr)
        for run in runs:
            mode = run.partition(":")[0].partition("-")[0]
            if mode not in ("browser", "http", "adaptive"):
                continue
            # "browser": the archive as the settings say (or --warc); "browser-warc-on" / "browser-warc-off";
            # "browser:SETTING=VALUE": one setting changed (integers only), e.g. browser:relaunch_after_pages=2000;
            # "http" and "adaptive" (with the same suffixes): the crawl in that fetch mode.
            overrides: dict[str, Any] = {"workers": args.workers, "concurrency": args.concurrency}
            warc = run.partition(":")[0].removeprefix(f"{mode}-warc-") if "-warc-" in run else args.warc
            if warc:
                overrides["warc"] = warc == "on"
            if ":" in run:
                name, _, value = run.partition(":")[2].partition("=")
                overrides[name] = int(value)
            overrides = {k: v for k, v in overrides.items() if v is not None}
            harness.reset_crawl_tables(url)
            figures = measure(
                harness.crawl_for_figures, (url, base_url, mode, overrides), sandbox, BENCH_DB, args.py_spy
            )
            figures["pages_per_s"] = round(figures["pages"] / figures["elapsed_s"], 1)
            figures.pop("summary", None)
            results[run if run not in results else f"{run}#{len(results)}"] = figures
            print(json.dumps({run: figures}), file=sys.stderr)
    finally:
        server.terminate()
        server.wait(10)
    if "ceiling" in results and "browser" in results:
        a, b = results["ceiling"]["cpu_ms_per_page"], results["browser"]["cpu_ms_per_page"]
        results["extra_ms_per_page"] = {k: round(b.get(k, 0) - a.get(k, 0), 1) for k in sorted({*a, *b})}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
