"""Fork memory benchmark: what a worker's full garbage collection costs in shared pages, frozen or not.

The drain's fork server imports the crawl; its workers are forked from it and share those pages until they
write to them. A full collection writes to every object it walks, so a worker that walks the imported
objects copies their pages. ``drain._child`` freezes them first (``gc.freeze()``). Here two workers are
forked by the real fork server, each runs one full collection (``unfrozen``: after ``gc.unfreeze()``,
as without the freeze) and waits; the summed PSS of the fork server and its workers is read meanwhile.
No database and no crawl. Prints:

    {"frozen": {"pss_mb": N, "by_process_mb": [..]}, "unfrozen": {...}}

Usage: python benchmarks/fork_memory_bench.py
"""

from __future__ import annotations

import gc
import json
import sys
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from book_assets.crawl.config import TASK_TYPES, CrawlConfig
from book_assets.crawl.drain import Drain, RunWorker, warm_up
from book_assets.crawl.stats import WorkerStats

#: How long each worker holds still after its collection, so its memory can be read.
HOLD_S = 2.0


def _collect_frozen(
    database_url: str, config: CrawlConfig, worker_id: str | None, types: tuple[str, ...]
) -> WorkerStats:
    gc.collect()
    time.sleep(HOLD_S)
    return WorkerStats(worker_id=worker_id or "frozen")


def _collect_unfrozen(
    database_url: str, config: CrawlConfig, worker_id: str | None, types: tuple[str, ...]
) -> WorkerStats:
    gc.unfreeze()
    gc.collect()
    time.sleep(HOLD_S)
    return WorkerStats(worker_id=worker_id or "unfrozen")


def _pss_kb(process: psutil.Process) -> int:
    with open(f"/proc/{process.pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


def _fork_server() -> psutil.Process:
    for child in psutil.Process().children():
        if "forkserver" in " ".join(child.cmdline()):
            return child
    raise RuntimeError("no fork server")


def measure(run: RunWorker) -> dict[str, object]:
    config = CrawlConfig.resolve(base_url="http://127.0.0.1:9/", workers=2)
    drain = Drain("postgresql://unused", config, TASK_TYPES, workers=2, run=run)
    supervisor = threading.Thread(target=drain.run, daemon=True)
    supervisor.start()
    server = _fork_server()
    deadline = time.monotonic() + 30
    while len(server.children()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(HOLD_S / 2)  # each worker has collected by now; it holds still until HOLD_S
    processes = [server, *server.children()]
    by_process = [round(_pss_kb(p) / 1024, 1) for p in processes]
    supervisor.join()
    return {"pss_mb": round(sum(by_process), 1), "by_process_mb": by_process}


def main() -> None:
    warm_up(2, None)  # the fork server is running before the first measurement starts
    print(json.dumps({"frozen": measure(_collect_frozen), "unfrozen": measure(_collect_unfrozen)}))


if __name__ == "__main__":
    main()
