"""Observability benchmark: what the workers' metrics and OpenTelemetry traces cost an http crawl (goal: under 3 %).

Full http crawls of a sandbox of ``--books`` books (10,000 by default: about 10,600 pages, tens of seconds a
crawl, so what is paid once per process weighs what it would on a long crawl), politeness off, ``--workers``
worker processes, each crawl in a fresh interpreter and a scratch database emptied first. The settings:

- ``off``: no metrics port, no ``OTEL_*`` variable;
- ``metrics``: ``metrics_port`` set, and the endpoint scraped every second from this process, as Prometheus would;
- ``traces``: spans over OTLP/HTTP (the SDK's exporter, batched as by default) to a receiver in a process of its
  own that reads each request and answers 200, as a collector on another host would;
- ``both``: the two at once (these four by default);
- ``sampled``: traces with the task sampler (``OTEL_TRACES_SAMPLER=book_pipeline_tasks``), keeping
  ``--sample-ratio`` of the tasks that complete at their first attempt;
- ``base``: traces, crawled by the code of another checkout (``--base``, e.g. a worktree of main), so a change
  is measured against the code before it in the same run, its crawls between this checkout's.

Each round crawls once with each setting, the order rotated from one round to the next (off, metrics, traces,
both; then metrics, traces, both, off; ...), so a slow spell of the shared machine falls on every setting alike.

Two figures per crawl: pages/s (wall time: on a machine shared with other work it swings by a quarter from one
crawl to the next), and the crawler's CPU milliseconds per page (its process, fork server and workers, each
with what it reaped; PostgreSQL, the sandbox, the scraper and the receiver left out), the steadier figure.
A setting's cost is taken per round against the ``off`` crawl of the same round, then the median over rounds.
Prints one JSON object:

    {"books": N, "pages": N, "rounds": N,
     "off": {"pages_per_s": [...], "cpu_ms_per_page": [...], "median_pages_per_s": N, "median_cpu_ms": N,
             "spread_pages_per_s_pct": N, "spread_cpu_pct": N},
     "metrics": {... "cost_pct": N, "cpu_cost_pct": N, "cpu_cost_pct_rounds": [...]}, "traces": {...}, "both": {...},
     "scrapes": N, "spans_requests": N, "spans_bytes": N}

``spread_*_pct``: (max - min) / median of that setting's crawls. ``cost_pct``, ``cpu_cost_pct``: median over
rounds of (setting - off) / off, in percent (pages/s lost, CPU per page added; negative: within the noise).

``--paired [both|metrics|traces|sampled|both_sampled]`` crawls instead with the two workers of one crawl on
opposite sides: metrics and traces (or one of them; ``sampled``: traces with the task sampler at
``--sample-ratio``) on in one, off in the other (which one alternates from round to round),
the endpoint scraped every second and the spans sent to the receiver as in ``both``. Each worker reports its
own CPU and pages; both run at the same moments on the same machine, so what slows the machine slows both,
and their difference is the cost of the ``on`` side with the machine's swings taken out. Per round:
``cpu_cost_pct`` = (on's CPU per page - off's) / off's, ``share_cost_pct`` = (off's pages - on's) / off's
(the pages the ``on`` worker left to the other: what it costs the crawl's pages/s while both are busy); the
median over rounds. The drain's own part (the endpoint it serves) is in neither worker.

``--shapes-only`` prints instead the CPU microseconds per task span of three shapes of a task's stages, made
through the SDK's tracer, batched by its batch span processor and OTLP-encoded by its exporter's encoder
(without the network): as attributes of its one span (what the worker makes), as five events on it, as five
child spans; and the CPU microseconds per task of the worker's own hooks (``tracing.task_traces``), its spans
exported over OTLP/HTTP to a receiver process: all kept, sampled at ``--sample-ratio``, all dropped.

Usage: python benchmarks/observe_bench.py [--books 10000] [--rounds 5] [--workers 2] [--concurrency 8]
       python benchmarks/observe_bench.py --settings off,traces,base --base ../main  # a change against main
       python benchmarks/observe_bench.py --paired --rounds 20  # both on against off, in one crawl
       python benchmarks/observe_bench.py --shapes-only
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import reset_crawl_tables, scratch_database

from book_assets.crawl.config import CrawlConfig
from book_assets.crawl.pipeline import crawl
from book_assets.crawl.stats import WorkerStats
from book_assets.db.embedded import free_port
from book_assets.observe.tracing import TASK_SAMPLER
from book_assets.settings import load_settings

BENCH_DB = "bookpipeline_bench_observe"
SETTINGS = ("off", "metrics", "traces", "both", "sampled", "base")
#: What ``--paired`` turns on in one worker: ``sampled`` is traces with the task sampler at ``--sample-ratio``.
PAIRED = ("both", "metrics", "traces", "sampled", "both_sampled")
#: A crawl with another checkout's code (``--base``): its own ``_run``, in an interpreter whose path starts there.
_BASE_RUN = """
import json, sys
sys.path.insert(0, sys.argv[1] + "/benchmarks")
from observe_bench import _run
result = {}
_run(*json.loads(sys.argv[2]), result)
print(json.dumps(result))
"""


def _receive(port: Any, counts: Any) -> None:
    """A stand-in collector: reads every export request, answers 200, counts requests and bytes."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            counts["requests"] = counts.get("requests", 0) + 1
            counts["bytes"] = counts.get("bytes", 0) + len(body)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port.value = server.server_port
    server.serve_forever()


def _crawler_cpu_s() -> tuple[float, float]:
    """CPU seconds of this process and its descendants, each with the children it reaped (the fork server
    reaps the workers), and of this process alone (the drain: the crawl's own work and the metrics endpoint)."""
    me = psutil.Process()
    total = own = 0.0
    for proc in (me, *me.children(recursive=True)):
        with contextlib.suppress(psutil.Error):
            t = proc.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
            if proc is me:
                own = t.user + t.system
    return total, own


def _run(url: str, config: dict[str, Any], env: dict[str, str], result: Any) -> None:
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        del os.environ[name]
    os.environ.update(env)
    report = crawl(url, CrawlConfig.resolve(**config))
    result["pages"] = report.run.pages
    result["pages_per_s"] = report.pages_per_s
    total, own = _crawler_cpu_s()
    result["cpu_ms_per_page"] = 1000 * total / report.run.pages
    result["drain_cpu_ms_per_page"] = 1000 * own / report.run.pages


#: ``--paired``: the folder where the workers of a crawl take their sides and leave their figures, and which
#: side the first worker to start takes (``on`` or ``off``).
PAIR_DIR, PAIR_FIRST = "OBSERVE_BENCH_PAIR_DIR", "OBSERVE_BENCH_PAIR_FIRST"


def paired_worker(
    database_url: str, config: CrawlConfig, worker_id: str | None, task_types: tuple[str, ...]
) -> WorkerStats:
    """A worker of a ``--paired`` crawl (what the drain's workers run): the first to start takes the side
    ``PAIR_FIRST`` names, the second the other; the ``off`` side turns metrics and traces off before its worker
    is made. Leaves its side, CPU seconds and pages in ``PAIR_DIR``."""
    from book_assets.crawl.config import make_queue
    from book_assets.crawl.drain import run_worker
    from book_assets.crawl.stats import WorkerFigures
    from book_assets.db.connection import Database
    from book_assets.observe import metrics

    folder = Path(os.environ[PAIR_DIR])
    with open(folder / "started", "a+") as counter:
        fcntl.flock(counter, fcntl.LOCK_EX)
        counter.seek(0)
        order = len(counter.read())
        counter.write("x")
    side = os.environ[PAIR_FIRST] if order % 2 == 0 else {"on": "off", "off": "on"}[os.environ[PAIR_FIRST]]
    if side == "off":
        os.environ["OTEL_SDK_DISABLED"] = "true"
        metrics.join(None)  # joined the drain's folder before this ran: record nothing
    started = time.process_time()
    stats = run_worker(database_url, config, worker_id, task_types)
    cpu_s = time.process_time() - started
    with Database(database_url) as db:
        pages = WorkerFigures.read(make_queue(db, config), stats).pages
    figures = {
        "side": side,
        "cpu_s": cpu_s,
        "pages": pages,
        "threads": _threads_cpu(),
        **_usage(),
    }
    (folder / f"{os.getpid()}.json").write_text(json.dumps(figures))
    return stats


def _threads_cpu() -> dict[str, float]:
    """CPU seconds of each live thread of this process, by its name (the worker's loop, its database thread,
    the span processor's export thread ...), from ``/proc``."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    tick, out = os.sysconf("SC_CLK_TCK"), dict[str, float]()
    for task in Path("/proc/self/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # the thread ended since the folder was listed
            continue
        name = names.get(int(task.name), "other")
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def _usage() -> dict[str, float]:
    """This process's user and system CPU seconds, page faults and context switches."""
    import resource

    u = resource.getrusage(resource.RUSAGE_SELF)
    return {"user_s": u.ru_utime, "sys_s": u.ru_stime, "minflt": u.ru_minflt, "vcsw": u.ru_nvcsw, "ivcsw": u.ru_nivcsw}


def _run_paired(url: str, config: dict[str, Any], env: dict[str, str], first: str, result: Any) -> None:
    """One crawl whose workers run :func:`paired_worker`; its figures per side in ``result``."""
    import tempfile

    from book_assets.crawl.drain import Drain

    defaults = Drain.__init__.__kwdefaults__
    assert defaults is not None
    defaults["run"] = paired_worker  # the crawl's drains start paired workers
    with tempfile.TemporaryDirectory() as folder:
        os.environ.update({PAIR_DIR: folder, PAIR_FIRST: first})
        _run(url, config, env, result)
        sides = [json.loads(p.read_text()) for p in Path(folder).glob("*.json")]
    print(json.dumps({"workers": sides}), file=sys.stderr)
    for side in ("on", "off"):
        mine = [f for f in sides if f["side"] == side]
        pages = sum(f["pages"] for f in mine)
        result[f"{side}_pages"] = pages
        result[f"{side}_cpu_ms_per_page"] = 1000 * sum(f["cpu_s"] for f in mine) / max(pages, 1)


def _scrape(port: int, stop: threading.Event, counter: list[int]) -> None:
    while not stop.wait(1.0):
        with contextlib.suppress(httpx.HTTPError):  # not serving yet, or already gone
            counter[0] += httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).status_code == 200


def _measure_base(repo: str, url: str, config: dict[str, Any], env: dict[str, str]) -> dict[str, float]:
    """One full crawl by the code of the checkout ``repo``, in a fresh interpreter."""
    reset_crawl_tables(url)
    child_env = {"BOOK_PIPELINE_DATA_DIR": str(load_settings().data_dir), **os.environ, "PYTHONPATH": repo}
    args = [sys.executable, "-c", _BASE_RUN, repo, json.dumps([url, {**config, "metrics_final_scrape_s": 0}, env])]
    out = subprocess.run(args, env=child_env, cwd=repo, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"crawl of {repo} failed (exit {out.returncode}): {out.stderr[-2000:]}")
    shared = json.loads(out.stdout.strip().splitlines()[-1])
    return {
        "pages": int(shared["pages"]),
        "pages_per_s": round(float(shared["pages_per_s"]), 1),
        "cpu_ms_per_page": round(float(shared["cpu_ms_per_page"]), 3),
        "drain_cpu_ms_per_page": round(float(shared["drain_cpu_ms_per_page"]), 3),
        "scrapes": 0,
    }


def measure(
    url: str, config: dict[str, Any], env: dict[str, str], *, metrics: bool, paired: str | None = None
) -> dict[str, float]:
    """One full crawl in a fresh interpreter: pages, pages/s, the crawler's CPU ms per page, scrapes answered;
    ``paired`` (the side of the first worker): its workers on opposite sides, each side's CPU and pages."""
    reset_crawl_tables(url)
    ctx = multiprocessing.get_context("spawn")
    shared = ctx.Manager().dict()
    port = free_port() if metrics else None
    config = {**config, "metrics_port": port, "metrics_final_scrape_s": 0}
    if paired is None:
        proc = ctx.Process(target=_run, args=(url, config, env, shared))
    else:
        proc = ctx.Process(target=_run_paired, args=(url, config, env, paired, shared))
    stop, scrapes = threading.Event(), [0]
    scraper = threading.Thread(target=_scrape, args=(port, stop, scrapes)) if port is not None else None
    proc.start()
    if scraper is not None:
        scraper.start()
    proc.join()
    stop.set()
    if scraper is not None:
        scraper.join()
    if proc.exitcode != 0 or not shared.get("pages"):
        raise SystemExit(f"crawl failed (exit {proc.exitcode}): {dict(shared)}")
    sides = {key: round(float(value), 3) for key, value in shared.items() if key.startswith(("on_", "off_"))}
    return {
        "pages": int(shared["pages"]),
        "pages_per_s": round(float(shared["pages_per_s"]), 1),
        "cpu_ms_per_page": round(float(shared["cpu_ms_per_page"]), 3),
        "drain_cpu_ms_per_page": round(float(shared["drain_cpu_ms_per_page"]), 3),
        "scrapes": scrapes[0],
        **sides,
    }


def paired_summary(crawls: list[dict[str, float]]) -> dict[str, Any]:
    """``--paired``: per round the ``on`` worker against the ``off`` one of the same crawl; medians over rounds.
    A round where a side has no pages (its worker died and its replacement found the queue drained) is left out
    and counted."""
    lost = [c for c in crawls if not c["on_pages"] or not c["off_pages"]]
    crawls = [c for c in crawls if c not in lost]
    cpu = [_pct(c["on_cpu_ms_per_page"], c["off_cpu_ms_per_page"]) for c in crawls]
    share = [-_pct(c["on_pages"], c["off_pages"]) for c in crawls]
    return {
        "on_cpu_ms_per_page": [c["on_cpu_ms_per_page"] for c in crawls],
        "off_cpu_ms_per_page": [c["off_cpu_ms_per_page"] for c in crawls],
        "on_pages": [int(c["on_pages"]) for c in crawls],
        "off_pages": [int(c["off_pages"]) for c in crawls],
        "cpu_cost_pct_rounds": cpu,
        "share_cost_pct_rounds": share,
        "cpu_cost_pct": round(statistics.median(cpu), 1),
        "share_cost_pct": round(statistics.median(share), 1),
        "pages_per_s": [c["pages_per_s"] for c in crawls],
        "rounds_left_out": len(lost),
    }


def _pct(value: float, base: float) -> float:
    return round(100 * (value - base) / base, 1)


def summary(runs: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    """Each setting's crawls, medians, spreads and its cost against the ``off`` crawl of the same round."""
    out: dict[str, Any] = {}
    for name, crawls in runs.items():
        rates = [c["pages_per_s"] for c in crawls]
        cpu = [c["cpu_ms_per_page"] for c in crawls]
        figures: dict[str, Any] = {
            "pages_per_s": rates,
            "cpu_ms_per_page": cpu,
            "median_pages_per_s": statistics.median(rates),
            "median_cpu_ms": statistics.median(cpu),
            "spread_pages_per_s_pct": round(100 * (max(rates) - min(rates)) / statistics.median(rates), 1),
            "spread_cpu_pct": round(100 * (max(cpu) - min(cpu)) / statistics.median(cpu), 1),
        }
        if name != "off":
            base = runs["off"]
            rate_costs = [-_pct(c["pages_per_s"], b["pages_per_s"]) for c, b in zip(crawls, base, strict=True)]
            cpu_costs = [_pct(c["cpu_ms_per_page"], b["cpu_ms_per_page"]) for c, b in zip(crawls, base, strict=True)]
            figures |= {
                "cost_pct": round(statistics.median(rate_costs), 1),
                "cpu_cost_pct": round(statistics.median(cpu_costs), 1),
                "cost_pct_rounds": rate_costs,
                "cpu_cost_pct_rounds": cpu_costs,
            }
        out[name] = figures
    return out


def span_shapes(n: int = 20_000) -> dict[str, float]:
    """CPU microseconds per task span of three shapes of a task's stages, made through the SDK's tracer,
    batched by its batch span processor and OTLP-encoded by its exporter's encoder (without the network): as
    attributes of its one span (the worker's shape), as five events on it, as five child spans."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.trace import SpanKind

    class Encoded(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            encode_spans(spans).SerializePartialToString()
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Encoded(), max_queue_size=6 * n))  # none dropped
    tracer = provider.get_tracer("observe_bench")
    stages = ("claim", "politeness_wait", "fetch", "parse", "store")
    base: dict[str, str | int | float] = {
        "book_pipeline.task.id": 1,
        "book_pipeline.task.attempt": 1,
        "book_pipeline.task.outcome": "completed",
        "book_pipeline.task.type": "detail",
        "book_pipeline.task.domain": "127.0.0.1:8800",
        "book_pipeline.task.stage": "store",
        "url.full": "http://127.0.0.1:8800/catalogue/a-light-in-the-attic_1000/index.html",
    }
    timed = {**base, **{f"book_pipeline.task.{stage}_s": 0.01 for stage in stages}}

    def attributes() -> None:
        tracer.start_span("task detail", kind=SpanKind.CONSUMER, attributes=timed).end()

    def events() -> None:
        span = tracer.start_span("task detail", kind=SpanKind.CONSUMER, attributes=base)
        for stage in stages:
            span.add_event(stage)
        span.end()

    def child_spans() -> None:
        span = tracer.start_span("task detail", kind=SpanKind.CONSUMER, attributes=base)
        for stage in stages:
            tracer.start_span(stage).end()
        span.end()

    out = {}
    for shape in (attributes, events, child_spans):
        started = time.process_time()
        for _ in range(n):
            shape()
        provider.force_flush()
        out[shape.__name__] = round((time.process_time() - started) / n * 1e6, 1)
    provider.shutdown()
    return out


def _task_spans(endpoint: str, env: dict[str, str], n: int) -> float:
    """In a process of its own: CPU µs per task of the worker's span hooks (begin, four stages, a fetch, end)
    for ``n`` tasks completed, spans (the task's and its fetch's) exported over OTLP/HTTP to ``endpoint``."""
    from datetime import UTC, datetime

    from book_assets.observe import tracing
    from book_assets.queue import Task

    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        del os.environ[name]
    queue = {"OTEL_BSP_MAX_QUEUE_SIZE": str(2 * n)}  # room for every span (a task's and its fetch's): none dropped
    os.environ.update({**env, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, **queue})
    traces, now, site = tracing.task_traces(), datetime.now(UTC), "127.0.0.1:8800"
    tasks = [Task(i, "detail", {"url": f"http://{site}/b/{i}/"}, 0, site, None, 1, 3, 1, now, None) for i in range(n)]
    stages = (tracing.Stage.POLITENESS_WAIT, tracing.Stage.FETCH, tracing.Stage.PARSE, tracing.Stage.STORE)
    traces.flush()
    started = time.process_time()
    for task in tasks:
        traces.begin(task, time.monotonic())
        for stage in stages:
            traces.stage(task, stage)
            if stage is tracing.Stage.FETCH:
                traces.fetched(task, 200, 0.01, None)  # its fetch's client span
        traces.end(task, tracing.Outcome.COMPLETED)
    traces.flush()
    return round((time.process_time() - started) / n * 1e6, 1)


def task_spans(sample_ratio: float, n: int = 20_000) -> dict[str, float]:
    """CPU µs per task of the worker's span hooks, its spans made, encoded and sent over OTLP/HTTP to a receiver
    process: every span kept, and with the task sampler at ``sample_ratio`` and at 0 (every span dropped)."""
    ctx = multiprocessing.get_context("spawn")
    port, counts = ctx.Value("i", 0), ctx.Manager().dict()
    receiver = ctx.Process(target=_receive, args=(port, counts), daemon=True)
    receiver.start()
    while not port.value:
        receiver.join(0.05)
    out = {}
    for name, ratio in (("kept", None), (f"sampled_{sample_ratio}", sample_ratio), ("dropped", 0.0)):
        env = {} if ratio is None else {"OTEL_TRACES_SAMPLER": TASK_SAMPLER, "OTEL_TRACES_SAMPLER_ARG": str(ratio)}
        with ctx.Pool(1) as pool:
            out[name] = pool.apply(_task_spans, (f"http://127.0.0.1:{port.value}", env, n))
    receiver.terminate()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--books", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--settings", default=",".join(SETTINGS[:4]), help="Comma-separated, off first.")
    parser.add_argument("--sample-ratio", type=float, default=0.1, help="The sampled setting's task ratio.")
    parser.add_argument("--base", help="A checkout whose code the base setting crawls with (traces on).")
    parser.add_argument(
        "--paired",
        nargs="?",
        const="both",
        choices=PAIRED,
        help="One crawl a round, a worker with these on and one with them off (default both).",
    )
    parser.add_argument("--shapes-only", action="store_true", help="Only the CPU per span of three span shapes.")
    args = parser.parse_args()
    if args.shapes_only:
        shapes, tasks = span_shapes(), task_spans(args.sample_ratio)
        print(json.dumps({"span_cpu_us": shapes, "task_cpu_us": tasks}))
        return
    settings = args.settings.split(",")
    if settings[0] != "off" or not set(settings) <= set(SETTINGS):
        raise SystemExit(f"--settings: off first, then any of {', '.join(SETTINGS[1:])}")
    if ("base" in settings) != bool(args.base):
        raise SystemExit("--base: the checkout the base setting crawls with, given with that setting only")
    url = scratch_database(BENCH_DB)
    ctx = multiprocessing.get_context("spawn")
    port, counts = ctx.Value("i", 0), ctx.Manager().dict()
    collector = ctx.Process(target=_receive, args=(port, counts), daemon=True)
    collector.start()
    sandbox = subprocess.Popen(
        [sys.executable, "-m", "book_assets.cli", "sandbox", "serve", "--port", "0", "--books", str(args.books)],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = sandbox.stdout.readline() if sandbox.stdout else ""
    base_url = next(tok for tok in line.split() if tok.startswith("http"))
    while not port.value:
        collector.join(0.05)
    traces_env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port.value}"}
    config = {
        "base_url": base_url,
        "fetch_mode": "http",
        "min_interval_s": 0.0,
        "workers": args.workers,
        "concurrency": args.concurrency,
    }
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in settings}
    try:
        measure(url, config, {}, metrics=False)  # warm-up: page cache, the sandbox's pages, PostgreSQL
        for round_ in range(args.rounds if args.paired else 0):
            first = ("on", "off")[round_ % 2]
            env = {} if args.paired == "metrics" else traces_env
            if args.paired.endswith("sampled"):
                env = {**env, "OTEL_TRACES_SAMPLER": TASK_SAMPLER, "OTEL_TRACES_SAMPLER_ARG": str(args.sample_ratio)}
            metrics = args.paired in ("both", "metrics", "both_sampled")
            figures = measure(url, config, env, metrics=metrics, paired=first)
            runs.setdefault("paired", []).append(figures)
            print(json.dumps({"round": round_, "paired": figures}), file=sys.stderr)
        for round_ in range(0 if args.paired else args.rounds):
            order = settings[round_ % len(settings) :] + settings[: round_ % len(settings)]
            for name in order:
                env = {
                    "traces": traces_env,
                    "both": traces_env,
                    "base": traces_env,
                    "sampled": {
                        **traces_env,
                        "OTEL_TRACES_SAMPLER": TASK_SAMPLER,
                        "OTEL_TRACES_SAMPLER_ARG": str(args.sample_ratio),
                    },
                }.get(name, {})
                if name == "base":
                    figures = _measure_base(str(Path(args.base).resolve()), url, config, env)
                else:
                    figures = measure(url, config, env, metrics=name in ("metrics", "both"))
                runs[name].append(figures)
                print(json.dumps({"round": round_, name: figures}), file=sys.stderr)
    finally:
        sandbox.terminate()
        sandbox.wait(10)
        collector.terminate()
    if args.paired:
        print(
            json.dumps(
                {
                    "books": args.books,
                    "pages": runs["paired"][0]["pages"],
                    "rounds": args.rounds,
                    "workers": args.workers,
                    "concurrency": args.concurrency,
                    "paired": args.paired,
                    **paired_summary(runs["paired"]),
                    "scrapes": sum(c["scrapes"] for c in runs["paired"]),
                    "spans_requests": counts.get("requests", 0),
                    "spans_bytes": counts.get("bytes", 0),
                }
            )
        )
        return
    out = {
        "books": args.books,
        "pages": runs["off"][0]["pages"],
        "rounds": args.rounds,
        "workers": args.workers,
        "concurrency": args.concurrency,
        "sample_ratio": args.sample_ratio if "sampled" in settings else None,
        "base": args.base,
        **summary(runs),
        "scrapes": sum(c["scrapes"] for crawls in runs.values() for c in crawls),
        "spans_requests": counts.get("requests", 0),
        "spans_bytes": counts.get("bytes", 0),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
