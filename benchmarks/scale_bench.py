"""Scale-out benchmark: workers on 1, 2 and 3 hosts, politeness across hosts, fair claims, PgBouncer. ONE JSON.

Hosts are network namespaces made by the run (``book_assets_tests/scale/hosts.py``): each has its own
address on a bridge, and PostgreSQL (a throw-away cluster of the run) and the sandbox are served in the root
namespace on the bridge address; no traffic leaves the subnet, and everything is torn down at the end, on
failure too. Needs root and iproute2; prints ``{"skipped": reason}`` where namespaces cannot be made.

* ``hosts``: books/s of a full sandbox crawl (1,000 books, about 1,080 pages) with 200 ms latency per page,
  ``book-pipeline work`` on each host (http mode, 4 pages in flight), the domain interval 0.01 s: a bound of
  100 requests/s, above what three hosts ask for (3 x 4 / 0.2 s = 60/s). Timed from the seed to nothing
  outstanding. ``scaling_3_vs_1``: the ratio of 3 hosts to 1 (target >= 2.7).
* ``politeness``: three hosts crawl 304 books with the interval binding (0.05 s, a bound of 20/s against
  their 60/s): ``min_spacing_s`` is the closest two request starts the site saw, ``min_warm_spacing_s``
  the same leaving out each host's first request (which reaches the site late after its slot while the
  worker's HTTP client finishes setting up), ``rate_vs_bound`` the request rate over the middle 80% of the
  starts divided by 1 / interval (target in [0.9, 1.0]).
* ``skewed_host_min_spacing_s`` (and ``..._warm_...``): the same with the third host's clock 0.5 s ahead
  (libfaketime).
* ``fair_claims_per_s``: scheduled (weighted round-robin) claims of 50 tasks with 1, 4 and 8 worker processes,
  tasks claimed and completed per second on the run's cluster (the measurement queue_bench makes on its own).
* ``pgbouncer_crawl_ok``: a crawl by two hosts whose workers reach PostgreSQL only through PgBouncer in
  transaction pooling mode completed exactly (every book once, nothing outstanding, nothing failed);
  ``pgbouncer_error`` says what went wrong otherwise.

    .venv/bin/python benchmarks/scale_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import FAIR_BATCH, claim_complete_per_s

from book_assets.categories import slugify
from book_assets.db.connection import Database
from book_assets.db.migrations import migrate
from book_assets.sandbox.catalogue import Catalogue
from book_assets.sandbox.faults import Faults
from book_assets_tests.scale.hosts import Host, NamespaceHosts, PostgresOnAddress, unavailable_reason
from book_assets_tests.scale.multihost import LIBFAKETIME, HostRun, HostSandbox, run_on_hosts

LATENCY_S = 0.2
CONCURRENCY = 4
SCALING_INTERVAL_S = 0.01
POLITE_INTERVAL_S = 0.05
SKEW_S = 0.5
POLITE_CATEGORIES = ("Nonfiction", "Sequential Art", "Fiction", "Young Adult")
PGBOUNCER_CATEGORIES = ("Fantasy", "Romance", "Mystery")
PGBOUNCER = "/usr/sbin/pgbouncer"


def _settings(interval_s: float, categories: tuple[str, ...] = ()) -> dict[str, Any]:
    settings: dict[str, Any] = {"fetch_mode": "http", "concurrency": CONCURRENCY, "min_interval_s": interval_s}
    if categories:
        settings["categories"] = tuple(slugify(c) for c in categories)
    return settings


def _check(run: HostRun, expected_books: int, label: str) -> None:
    """A run whose books or queue are wrong has no throughput worth printing."""
    if run.books != expected_books or run.outstanding or run.failed:
        raise RuntimeError(
            f"{label}: {run.books}/{expected_books} books, {run.outstanding} outstanding, {run.failed} failed"
        )


def _log(what: str, **figures: Any) -> None:
    print(json.dumps({what: figures}), file=sys.stderr, flush=True)


def bench_hosts(
    net: NamespaceHosts, postgres: PostgresOnAddress, sandbox: HostSandbox, categories: tuple[str, ...]
) -> dict[str, float]:
    expected = _expected_books(categories)
    out = {}
    for count in (1, 2, 3):
        run = run_on_hosts(
            net.hosts[:count],
            postgres,
            sandbox,
            _settings(SCALING_INTERVAL_S, categories),
            database=f"scale_{count}",
            timeout_s=600,
        )
        _check(run, expected, f"{count} host(s)")
        out[str(count)] = round(run.books_per_s, 2)
        _log(
            f"hosts_{count}",
            books=run.books,
            elapsed_s=round(run.elapsed_s, 2),
            pages_by_host=run.pages_by_host,
            rate_per_s=round(run.rate_per_s(), 1),
        )
    return out


def bench_politeness(net: NamespaceHosts, postgres: PostgresOnAddress, sandbox: HostSandbox, *, skew: bool) -> HostRun:
    run = run_on_hosts(
        net.hosts[:3],
        postgres,
        sandbox,
        _settings(POLITE_INTERVAL_S, POLITE_CATEGORIES),
        database="skewed" if skew else "polite",
        skew_s={2: SKEW_S} if skew else None,
        timeout_s=600,
    )
    label = "skewed" if skew else "politeness"
    _log(
        label,
        books=run.books,
        outstanding=run.outstanding,
        failed=run.failed,
        elapsed_s=round(run.elapsed_s, 2),
        pages_by_host=run.pages_by_host,
        requests_by_host=run.requests_by_host,
        min_spacing_s=round(run.min_spacing_s, 4),
        min_warm_spacing_s=round(run.min_warm_spacing_s, 4),
        closest_spacings_s=[round(s, 4) for s in sorted(run.spacings)[:5]],
        rate_vs_bound=round(run.rate_per_s() * POLITE_INTERVAL_S, 3),
    )
    return run


def _expected_books(categories: tuple[str, ...]) -> int:
    return sum(1 for book in Catalogue() if not categories or book.category in categories)


def bench_fair_claims(postgres: PostgresOnAddress) -> dict[str, Any]:
    """Fair (scheduled) claims/s with 1, 4 and 8 workers on this run's cluster, measured as queue_bench does."""
    url = postgres.create_database("fair_claims")
    with Database(url, application_name="scale-bench fair") as db:
        migrate(db)
        return {
            str(workers): round(
                claim_complete_per_s(
                    db, url, workers, 20_000 if workers > 1 else 10_000, batch=FAIR_BATCH, scheduled=True
                )
            )
            for workers in (1, 4, 8)
        }


class PgBouncer:
    """PgBouncer in transaction pooling mode on ``address``, in front of ``postgres`` (as ``nobody``)."""

    def __init__(self, postgres: PostgresOnAddress, address: str) -> None:
        self.postgres = postgres
        self.address = address
        self.port = 0
        self._root = Path(tempfile.mkdtemp(prefix="book-pipeline-pgbouncer-"))
        self._proc: subprocess.Popen[bytes] | None = None

    def url_for(self, database: str) -> str:
        return f"postgresql://postgres:{self.postgres.password}@{self.address}:{self.port}/{database}"

    def __enter__(self) -> PgBouncer:
        import socket

        with socket.create_server((self.address, 0)) as probe:
            self.port = probe.getsockname()[1]
        self._root.chmod(0o755)
        (self._root / "userlist.txt").write_text(f'"postgres" "{self.postgres.password}"\n')
        (self._root / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"* = host={self.postgres.address} port={self.postgres.port}\n"
            "[pgbouncer]\n"
            f"listen_addr = {self.address}\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = scram-sha-256\nauth_file = {self._root / 'userlist.txt'}\n"
            "pool_mode = transaction\nmax_client_conn = 500\ndefault_pool_size = 20\n"
            "ignore_startup_parameters = extra_float_digits\n"
            f"logfile = {self._root / 'pgbouncer.log'}\n"
        )
        shutil.chown(self._root, "nobody", "nogroup")
        for name in ("userlist.txt", "pgbouncer.ini"):
            shutil.chown(self._root / name, "nobody", "nogroup")
            (self._root / name).chmod(0o600)
        self._proc = subprocess.Popen(
            [PGBOUNCER, str(self._root / "pgbouncer.ini")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
            user="nobody", group="nogroup", extra_groups=[], start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 20
        import psycopg2

        while True:
            try:
                psycopg2.connect(self.url_for("postgres"), connect_timeout=2).close()
                return self
            except psycopg2.OperationalError as exc:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    raise RuntimeError(f"pgbouncer did not start: {exc}") from None
                time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
        shutil.rmtree(self._root, ignore_errors=True)


def bench_pgbouncer(hosts: list[Host], postgres: PostgresOnAddress, gateway: str) -> dict[str, Any]:
    """A two-host crawl whose workers and driver reach PostgreSQL only through PgBouncer (transaction mode)."""
    if not Path(PGBOUNCER).exists():
        return {"pgbouncer_crawl_ok": False, "pgbouncer_error": f"{PGBOUNCER} is not installed"}
    expected = _expected_books(PGBOUNCER_CATEGORIES)
    with HostSandbox(host=gateway) as sandbox, PgBouncer(postgres, gateway) as bouncer:
        try:
            run = run_on_hosts(
                hosts,
                postgres,
                sandbox,
                _settings(0.0, PGBOUNCER_CATEGORIES),
                database="pooled",  # not "pgbouncer": that name is the pooler's admin console
                through=bouncer.url_for,
                timeout_s=180,
            )
        except Exception as exc:  # what goes wrong through the pooler is the figure
            return {"pgbouncer_crawl_ok": False, "pgbouncer_error": str(exc)[:800]}
    ok = run.books == expected and run.counts["versions"] == expected and not run.outstanding and not run.failed
    out: dict[str, Any] = {"pgbouncer_crawl_ok": ok}
    if not ok:
        out["pgbouncer_error"] = f"{run.books}/{expected} books, {run.outstanding} outstanding, {run.failed} failed"
    return out


PARTS = ("hosts", "politeness", "skew", "fair", "pgbouncer")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="Scaling on 3 categories instead of the whole site.")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"Comma-separated subset of {', '.join(PARTS)}.")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    reason = unavailable_reason()
    if reason:
        print(json.dumps({"skipped": reason}))
        return 0
    scaling_categories = PGBOUNCER_CATEGORIES if args.quick else ()
    report: dict[str, Any] = {}
    with NamespaceHosts(3) as net, PostgresOnAddress(net.gateway, allow=f"{net.gateway}/24") as postgres:
        with HostSandbox(host=net.gateway, faults=Faults(latency_s=LATENCY_S)) as sandbox:
            if "hosts" in parts:
                report["hosts"] = bench_hosts(net, postgres, sandbox, scaling_categories)
                report["scaling_3_vs_1"] = round(report["hosts"]["3"] / report["hosts"]["1"], 2)
            if "politeness" in parts:
                polite = bench_politeness(net, postgres, sandbox, skew=False)
                report["politeness"] = {
                    "interval_s": POLITE_INTERVAL_S,
                    "min_spacing_s": round(polite.min_spacing_s, 4),
                    "min_warm_spacing_s": round(polite.min_warm_spacing_s, 4),
                    "rate_vs_bound": round(polite.rate_per_s() * POLITE_INTERVAL_S, 3),
                }
            if "skew" in parts and LIBFAKETIME.exists():
                skewed = bench_politeness(net, postgres, sandbox, skew=True)
                report["skewed_host_min_spacing_s"] = round(skewed.min_spacing_s, 4)
                report["skewed_host_min_warm_spacing_s"] = round(skewed.min_warm_spacing_s, 4)
            elif "skew" in parts:
                report["skewed_host_min_spacing_s"] = None
        if "fair" in parts:
            report["fair_claims_per_s"] = bench_fair_claims(postgres)
        if "pgbouncer" in parts:
            report.update(bench_pgbouncer(net.hosts[:2], postgres, net.gateway))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
