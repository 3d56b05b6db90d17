"""Traces benchmark: what OpenTelemetry traces cost an http crawl's pages/s (goal: under 3 %).

Full http crawls of the 1000-book sandbox (about 1,080 pages, politeness off, 2 worker processes, each crawl
in a scratch database emptied first), alternately with traces off and on, ``--rounds`` of each. On, the spans
go over OTLP/HTTP (the SDK's exporter, batched as by default) to a receiver in a process of its own that reads
each request and answers 200, as a collector on another host would, so the figure is the crawl's own cost:
making the spans, batching, encoding and sending them. Prints:

    {"off": {"pages_per_s": [...], "median": N, "cpu_ms_per_page": [...]}, "on": {...},
     "cost_pct": N, "cpu_cost_pct": N, "spans_requests": N, "spans_bytes": N,
     "span_cpu_us": {"attributes": N, "events": N, "child_spans": N}}

``span_cpu_us``: CPU microseconds per task span made, batched and OTLP-encoded, with its stages as attributes
(what the worker does), as events or as child spans (``--shapes-only`` prints just these).

``cost_pct`` is (off median - on median) / off median, in percent (negative: on was faster, i.e. noise). On a
machine shared with other work pages/s swing by a quarter from one crawl to the next, so the crawler's CPU per
page (its process, fork server and workers; PostgreSQL and the sandbox left out) is measured too:
``cpu_cost_pct`` is what traces add to it, in percent, the figure to hold against the 3 % goal there.

Usage: python benchmarks/trace_bench.py [--rounds 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from crawl_bench import _reset, _scratch_database

from book_assets.crawl.config import CrawlConfig
from book_assets.crawl.pipeline import crawl

BENCH_DB = "bookpipeline_bench_traces"


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


def _run(url: str, base_url: str, workers: int, env: dict[str, str], result: Any) -> None:
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        del os.environ[name]
    os.environ.update(env)
    config = CrawlConfig.resolve(base_url=base_url, fetch_mode="http", min_interval_s=0.0, workers=workers)
    report = crawl(url, config)
    result["pages"] = report.run.pages
    result["pages_per_s"] = report.pages_per_s
    # The crawler's CPU: this process, and its fork server with the workers it forked and reaped.
    me = psutil.Process()
    cpu = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            t = child.cpu_times()
            cpu += t.user + t.system + t.children_user + t.children_system
    result["cpu_ms_per_page"] = 1000 * cpu / report.run.pages


def measure(url: str, base_url: str, workers: int, env: dict[str, str]) -> tuple[float, float]:
    """One full crawl in a child process (a fresh interpreter: traces set up from ``env`` alone); its pages/s
    and the crawler's CPU milliseconds per page."""
    _reset(url)
    ctx = multiprocessing.get_context("spawn")
    shared = ctx.Manager().dict()
    proc = ctx.Process(target=_run, args=(url, base_url, workers, env, shared))
    proc.start()
    proc.join()
    if proc.exitcode != 0 or not shared.get("pages"):
        raise SystemExit(f"crawl failed (exit {proc.exitcode}): {dict(shared)}")
    return round(float(shared["pages_per_s"]), 1), round(float(shared["cpu_ms_per_page"]), 3)


def span_shapes(n: int = 20_000) -> dict[str, float]:
    """CPU microseconds per task span of three shapes of a task's stages, made, batched and OTLP-encoded by the
    SDK (the encoder without the network): as attributes of its one span (what the worker does), as five events
    on it, as five child spans."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Encoded(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            encode_spans(spans).SerializeToString()
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Encoded(), max_queue_size=6 * n))  # none dropped
    tracer = provider.get_tracer("trace_bench")
    stages = ("claim", "politeness_wait", "fetch", "parse", "store")
    base = {
        "book_pipeline.task.id": 1,
        "book_pipeline.task.type": "detail",
        "book_pipeline.task.domain": "127.0.0.1:8800",
        "book_pipeline.task.attempt": 1,
        "book_pipeline.task.outcome": "completed",
        "book_pipeline.task.stage": "store",
        "book_pipeline.worker.id": "host:1234",
        "book_pipeline.crawl.id": 1,
        "url.full": "http://127.0.0.1:8800/catalogue/a-light-in-the-attic_1000/index.html",
    }

    timed = {**base, **{f"book_pipeline.task.{stage}_s": 0.01 for stage in stages}}

    def attributes() -> None:
        tracer.start_span("task detail", attributes=timed).end()

    def events() -> None:
        span = tracer.start_span("task detail", attributes=base)
        for stage in stages:
            span.add_event(stage)
        span.end()

    def child_spans() -> None:
        span = tracer.start_span("task detail", attributes=base)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--shapes-only", action="store_true", help="Only the CPU per span of three span shapes.")
    args = parser.parse_args()
    if args.shapes_only:
        print(json.dumps({"span_cpu_us": span_shapes()}))
        return
    url = _scratch_database(BENCH_DB)
    ctx = multiprocessing.get_context("spawn")
    port, counts = ctx.Value("i", 0), ctx.Manager().dict()
    collector = ctx.Process(target=_receive, args=(port, counts), daemon=True)
    collector.start()
    sandbox = subprocess.Popen(
        [sys.executable, "-m", "book_assets.cli", "sandbox", "serve", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    line = sandbox.stdout.readline() if sandbox.stdout else ""
    base_url = next(tok for tok in line.split() if tok.startswith("http"))
    while not port.value:
        collector.join(0.05)
    on_env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port.value}"}
    rates: dict[str, list[float]] = {"off": [], "on": []}
    cpu: dict[str, list[float]] = {"off": [], "on": []}
    try:
        for _ in range(args.rounds):
            for name, env in (("off", {}), ("on", on_env)):
                rate, cpu_ms = measure(url, base_url, args.workers, env)
                rates[name].append(rate)
                cpu[name].append(cpu_ms)
                print(json.dumps({name: rate, "cpu_ms_per_page": cpu_ms}), file=sys.stderr)
    finally:
        sandbox.terminate()
        sandbox.wait(10)
        collector.terminate()
    off, on = statistics.median(rates["off"]), statistics.median(rates["on"])
    cpu_off, cpu_on = statistics.median(cpu["off"]), statistics.median(cpu["on"])
    out = {
        "off": {"pages_per_s": rates["off"], "median": off, "cpu_ms_per_page": cpu["off"]},
        "on": {"pages_per_s": rates["on"], "median": on, "cpu_ms_per_page": cpu["on"]},
        "cost_pct": round(100 * (off - on) / off, 1),
        "cpu_cost_pct": round(100 * (cpu_on - cpu_off) / cpu_off, 1),
        "spans_requests": counts.get("requests", 0),
        "spans_bytes": counts.get("bytes", 0),
        "span_cpu_us": span_shapes(),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
