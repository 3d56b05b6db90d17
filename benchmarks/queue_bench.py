"""Task-queue benchmark: prints ONE JSON object.

Runs against the server ``DATABASE_URL`` names (default: the project's embedded PostgreSQL 18; point it at the
oldest server you run, since a function's planning cost differs by version), in a scratch database
``bookpipeline_bench`` created and dropped by this script, so the pipeline's data is never touched.

Measures: batched enqueue rate; claim+complete throughput with 1, 4 and 8 worker processes (claims of 50,
completes batched with ``complete_many``); single-task claim latency with 10,000 and 1,000,000 pending tasks;
scheduled (smooth weighted round-robin) claim latency; fair claims of 50 interleaving listing and detail tasks
(``type_weights``, as the crawl worker claims) with 1, 4 and 8 workers, and the same in claims of 8 with 1 and
2 workers (the crawl's shape: its claims are its pages in flight, so small claims over 50 groups are the
claim's common case; the per-call cost of the round-robin state shows there, not in claims of 50). Politeness
is off (interval 0) for the benchmark domain: the figures are the queue's overhead, not the crawl's rate
limit. Bounded in count and time (about 2-4 minutes on two cores). ``--fair-only`` measures the fair
throughput figures alone.

    .venv/bin/python benchmarks/queue_bench.py [--fair-only]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import FAIR_BATCH, TYPE_WEIGHTS, bench_queue, claim_complete_per_s, fill_queue, reset_queue

from book_assets.db.connection import Database, ensure_database, resolve_database_url
from book_assets.db.migrations import migrate
from book_assets.queue import NewTask
from book_assets.settings import load_settings

SCRATCH = "bookpipeline_bench"
SEED = {"enqueue_per_s": 85, "claim_complete_per_s": 45}
#: Tasks per claim of the crawl-shaped figure: what a crawl worker asks for (pages in flight, 2 workers).
CRAWL_BATCH = 8


def _with_db(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def bench_enqueue(db: Database, n: int = 50_000, batch: int = 1_000) -> float:
    reset_queue(db)
    queue = bench_queue(db)
    started = time.perf_counter()
    for start in range(0, n, batch):
        queue.enqueue_many(
            NewTask("detail", {"url": f"http://bench.example/e/{i}"}, group=f"g{i % 50}")
            for i in range(start, start + batch)
        )
    return n / (time.perf_counter() - started)


def bench_latency(db: Database, pending: int, samples: int = 400, *, scheduled: bool = False) -> dict[str, float]:
    reset_queue(db)
    fill_queue(db, pending)
    queue = bench_queue(db)
    latencies = []
    for _ in range(samples):
        started = time.perf_counter()
        tasks = queue.claim("lat", 1, task_types=["detail"], scheduled=scheduled).tasks
        latencies.append((time.perf_counter() - started) * 1000)
        queue.complete_many(tasks)
    latencies.sort()
    return {
        "p50": round(statistics.median(latencies), 3),
        "p99": round(latencies[int(len(latencies) * 0.99) - 1], 3),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fair-only", action="store_true", help="measure the fair throughput figures only")
    args = parser.parse_args(argv)
    base = resolve_database_url(load_settings())
    admin = _with_db(base, "postgres")
    ensure_database(admin, SCRATCH)
    url = _with_db(base, SCRATCH)
    db = Database(url, application_name="queue-bench")
    try:
        migrate(db)
        report: dict[str, Any] = {}
        if not args.fair_only:
            report["enqueue_batch_per_s"] = round(bench_enqueue(db))
            report["claim_complete_per_s"] = {
                str(w): round(claim_complete_per_s(db, url, w, 30_000 if w > 1 else 15_000)) for w in (1, 4, 8)
            }
        report["fair_claims_per_s"] = {
            str(w): round(
                claim_complete_per_s(db, url, w, 20_000 if w > 1 else 10_000, batch=FAIR_BATCH, scheduled=True)
            )
            for w in (1, 4, 8)
        }
        report["fair_interleaved_claims_per_s"] = {
            str(w): round(
                claim_complete_per_s(
                    db, url, w, 20_000 if w > 1 else 10_000, batch=FAIR_BATCH, scheduled=True, interleave=True
                )
            )
            for w in (1, 4, 8)
        }
        report["crawl_shaped_claims_per_s"] = {
            str(w): round(claim_complete_per_s(db, url, w, 4_000, batch=CRAWL_BATCH, scheduled=True, interleave=True))
            for w in (1, 2)
        }
        report["crawl_batch"] = CRAWL_BATCH
        report["fair_batch"] = FAIR_BATCH
        report["fair_type_weights"] = TYPE_WEIGHTS
        if not args.fair_only:
            plain_10k = bench_latency(db, 10_000)
            scheduled = bench_latency(db, 10_000, scheduled=True)
            report["claim_latency_ms"] = {"10000": plain_10k, "1000000": bench_latency(db, 1_000_000, samples=300)}
            report["scheduled_claim_latency_ms"] = scheduled
            report["scheduled_vs_plain_p50"] = round(scheduled["p50"] / plain_10k["p50"], 2)
            report["seed"] = SEED
    finally:
        db.close()
        conn = psycopg2.connect(admin)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{SCRATCH}" WITH (FORCE)')
        conn.close()
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
