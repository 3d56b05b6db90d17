"""Dagster at scale: the day's snapshot and change feed of a large catalogue, and a year of daily partitions.

Two measurements (not in ``make test``; JSON on stdout):

- ``--database URL``: materialize ``category_balanced_snapshot`` and ``book_changes`` for one day (default:
  today, UTC) against a database a crawl filled (``benchmarks/growth_bench.py`` leaves its last case's in
  ``bookpipeline_bench_growth``), each in its own ``dg.materialize`` on an ephemeral instance, best of
  ``--repeat``; with the books, versions and the day's changes counted, so runs on catalogues of different
  sizes compare.
- ``--partitions``: for a daily partitions definition of 7 days, a year (365) and five years (first day set
  with ``BOOK_PIPELINE_SNAPSHOT_START_DATE``), the code location's load (importing ``book_assets.definitions``
  and resolving its repository, in a fresh process, median of ``--repeat``), ``dg check defs``, and the
  webserver's answer to the query the UI sends for an asset's partitions (its keys and the status of each).

Usage: python benchmarks/dagster_scale_bench.py [--database URL] [--day 2026-12-02] [--partitions] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from book_assets.db.embedded import free_port

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
LOAD = (
    "import time; t = time.perf_counter(); from book_assets.definitions import build_definitions; "
    "repo = build_definitions().get_repository_def(); repo.get_all_jobs(); repo.asset_graph; "
    "print(time.perf_counter() - t)"
)
#: What the UI's asset page asks for a partitioned asset: every key and the status ranges.
PARTITIONS_QUERY = """
query ($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) {
    ... on AssetNode {
      partitionKeysByDimension { name partitionKeys }
      assetPartitionStatuses {
        ... on TimePartitionStatuses { ranges { status startKey endKey } }
      }
    }
  }
}
"""


def materialize_day(url: str, day: date, repeat: int) -> dict[str, Any]:
    import dagster as dg

    from book_assets.db.connection import Database
    from book_assets.defs.changes.assets import book_changes
    from book_assets.defs.resources import DatabaseResource, SchedulingResource
    from book_assets.defs.snapshot.assets import category_balanced_snapshot

    with Database(url) as db:
        counts = db.query(
            "SELECT (SELECT count(*) FROM books) AS books, (SELECT count(*) FROM book_versions) AS versions"
        )[0]
    out: dict[str, Any] = {"day": day.isoformat(), **counts}
    for asset in (category_balanced_snapshot, book_changes):
        times, rows = [], None
        for _ in range(repeat):
            data_dir = tempfile.mkdtemp(prefix="dagster-scale-")
            resources = {"database": DatabaseResource(url=url), "scheduling": SchedulingResource(data_dir=data_dir)}
            started = time.perf_counter()
            result = dg.materialize([asset], partition_key=day.isoformat(), resources=resources)
            times.append(time.perf_counter() - started)
            assert result.success
            [event] = result.get_asset_materialization_events()
            rows = event.materialization.metadata["dagster/row_count"].value
            shutil.rmtree(data_dir, ignore_errors=True)
        out[asset.key.to_user_string()] = {"best_s": round(min(times), 3), "runs_s": [round(t, 3) for t in times],
                                           "rows": rows}  # fmt: skip
    return out


def partitions(days: int, repeat: int) -> dict[str, Any]:
    start = (datetime.now(UTC).date() - timedelta(days=days - 1)).isoformat()
    env = {**os.environ, "BOOK_PIPELINE_SNAPSHOT_START_DATE": start}
    loads = []
    for _ in range(repeat):
        done = subprocess.run([sys.executable, "-c", LOAD], env=env, cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        loads.append(float(done.stdout.strip().splitlines()[-1]))
    started = time.perf_counter()
    check = subprocess.run([str(VENV_BIN / "dg"), "check", "defs"], env=env, cwd=ROOT, capture_output=True, text=True)
    check_s = time.perf_counter() - started
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
    return {"start_date": start, "location_load_s": round(statistics.median(loads), 3),
            "dg_check_defs_s": round(check_s, 2), "ui": _or_error(ui_partitions, env)}  # fmt: skip


def _or_error(fn: Any, *args: Any) -> Any:
    """``fn(*args)``, or what went wrong as a string (one part failing keeps the others' figures)."""
    try:
        return fn(*args)
    except Exception as exc:  # a benchmark reports, it does not stop
        return f"error: {type(exc).__name__}: {exc}"[:500]


def ui_partitions(env: dict[str, str]) -> dict[str, Any]:
    """Start the webserver on the project's workspace and time the UI's partitions query, best of 3."""
    port, home = free_port(), tempfile.mkdtemp(prefix="dagster-home-")
    server = subprocess.Popen(
        [str(VENV_BIN / "dagster-webserver"), "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        env={**env, "DAGSTER_HOME": home},
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        started = time.perf_counter()
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            while True:
                try:
                    if client.get("/server_info").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.perf_counter() - started > 180:
                    raise RuntimeError("the webserver did not come up in 180 s")
                time.sleep(0.2)
            up_s = time.perf_counter() - started
            times, keys = [], 0
            for _ in range(3):
                t = time.perf_counter()
                body = {"query": PARTITIONS_QUERY, "variables": {"key": {"path": ["category_balanced_snapshot"]}}}
                answer = client.post("/graphql", json=body).json()
                times.append(time.perf_counter() - t)
                if "errors" in answer or not answer.get("data"):
                    raise RuntimeError(json.dumps(answer)[:400])
                node = answer["data"]["assetNodeOrError"]
                keys = len(node["partitionKeysByDimension"][0]["partitionKeys"])
        return {"webserver_up_s": round(up_s, 2), "partitions_query_s": round(min(times), 3), "partition_keys": keys}
    finally:
        server.terminate()
        server.wait(30)
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", help="postgresql:// URL of a crawled database")
    parser.add_argument("--day", type=date.fromisoformat, default=datetime.now(UTC).date())
    parser.add_argument("--partitions", action="store_true")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    out: dict[str, Any] = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cpus": os.cpu_count()}
    if args.database:
        out["materialize"] = materialize_day(args.database, args.day, args.repeat)
    if args.partitions:
        out["partitions"] = {str(days): _or_error(partitions, days, args.repeat) for days in (7, 365, 5 * 365)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
