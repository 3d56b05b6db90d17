"""Traces of a crawl: one trace per crawl across worker processes, one tree per task, outcomes as the database has them.

The spans are exported by the SDK's OTLP/HTTP exporter, as in production, to a small OTLP receiver in the test
(protobuf over HTTP, decoded with opentelemetry-proto), so spans from the drain's forked worker processes arrive
the way a collector gets them.
"""

from __future__ import annotations

import gzip
import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import entry_points
from typing import Any
from urllib.parse import urlsplit

import pytest
from opentelemetry.context import Context
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.sampling import Decision, Sampler
from opentelemetry.trace import SpanKind, StatusCode

from book_assets import __version__
from book_assets.crawl.pipeline import begin, finish, work
from book_assets.db.connection import Database
from book_assets.observe import tracing
from book_assets.queue import FailOutcome, Task
from book_assets.sandbox.catalogue import Catalogue
from book_assets.sandbox.faults import Faults
from book_assets.scraper.errors import ErrorKind
from book_assets.settings import ConfigError
from book_assets.store.lifecycle import OpenCrawl
from book_assets_tests.crawl.conftest import sandbox_config

TRUTH = Catalogue(seed=0, day=0).ground_truth()


@dataclass(frozen=True)
class ReceivedSpan:
    trace_id: int
    span_id: int
    parent_id: int | None
    name: str
    attributes: dict[str, Any]
    error: bool
    pid: int
    instance: str
    duration_ns: int
    kind: int
    version: str


def _value(any_value: Any) -> Any:
    return getattr(any_value, any_value.WhichOneof("value"))


class OtlpReceiver:
    """An OTLP/HTTP trace receiver on loopback: every span of every export request, decoded."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                receiver.take(ExportTraceServiceRequest.FromString(body))
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self._lock = threading.Lock()
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def take(self, request: ExportTraceServiceRequest) -> None:
        with self._lock:
            for resource_spans in request.resource_spans:
                resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append(
                            ReceivedSpan(
                                trace_id=int.from_bytes(span.trace_id, "big"),
                                span_id=int.from_bytes(span.span_id, "big"),
                                parent_id=int.from_bytes(span.parent_span_id, "big") if span.parent_span_id else None,
                                name=span.name,
                                attributes={a.key: _value(a.value) for a in span.attributes},
                                error=span.status.code == span.status.STATUS_CODE_ERROR,
                                pid=int(resource["process.pid"]),
                                instance=str(resource["service.instance.id"]),
                                duration_ns=span.end_time_unix_nano - span.start_time_unix_nano,
                                kind=span.kind,
                                version=str(resource["service.version"]),
                            )
                        )


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    """Traces on, exported to a receiver of the test's own."""
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    server = OtlpReceiver()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", server.url)
    yield server
    server.server.shutdown()


def test_a_crawl_under_faults_is_one_trace_of_task_trees_whose_outcomes_match_the_database(
    db: Database, database_url: str, sandbox_factory: Any, receiver: OtlpReceiver
) -> None:
    travel = sorted(p for p, b in TRUTH.items() if b.category == "Travel")
    site = sandbox_factory(faults=Faults(error_rate=0.15, reset_rate=0.05, scripted={p: ["404"] for p in travel[:2]}))
    config = sandbox_config(site.url, categories=("Travel", "Mystery"), workers=2, concurrency=4)
    run = begin(database_url, config, run_id="a-dagster-run")
    report = finish(database_url, *work(database_url, run))
    assert run.opened is not None
    trace_id, root_id = tracing.crawl_span_ids(run.opened)

    spans = receiver.spans
    assert {s.trace_id for s in spans} == {trace_id}  # every span of the crawl in the crawl's trace
    assert {s.version for s in spans} == {__version__}  # service.version, on every process's resource
    [root] = [s for s in spans if s.name == "crawl"]
    assert (root.span_id, root.parent_id) == (root_id, None)
    assert root.attributes["book_pipeline.crawl.pages"] == report.run.pages
    assert root.attributes["book_pipeline.run.id"] == "a-dagster-run"

    tasks = [s for s in spans if s.name.startswith("task ")]
    fetches = [s for s in spans if s.name == "GET"]
    assert len(tasks) + len(fetches) == len(spans) - 1
    _assert_one_client_span_per_fetch(tasks, fetches, site.url)
    assert {s.parent_id for s in tasks} == {root_id}  # the crawl's tree: its root, one span per task attempt
    workers = {s.pid for s in tasks}
    assert len(workers) == 2 and os.getpid() not in workers  # the drain's two forked worker processes
    assert {s.instance for s in tasks} == {f"{socket.gethostname()}:{pid}" for pid in workers}  # the worker ids
    for task in tasks:  # the seconds of each stage it went through, adding up to the span's duration
        stages = {
            k.removeprefix("book_pipeline.task.").removesuffix("_s"): v
            for k, v in task.attributes.items()
            if k.endswith("_s")
        }
        assert (
            {"claim", "politeness_wait", task.attributes["book_pipeline.task.stage"]}
            <= set(stages)
            <= set(tracing.Stage)
        )
        assert sum(stages.values()) == pytest.approx(task.duration_ns / 1e9, abs=1e-6)
        if task.attributes["book_pipeline.task.outcome"] == "completed":
            assert {"fetch", "parse", "store"} <= set(stages) and task.attributes["book_pipeline.task.stage"] == "store"

    outcomes = Counter(s.attributes["book_pipeline.task.outcome"] for s in tasks)
    assert outcomes["completed"] == report.run.pages
    assert outcomes["failed"] == report.run.failed == 2
    assert outcomes["retried"] == report.run.retries > 0  # the faults hit, and every retry is a span
    assert set(outcomes) <= {"completed", "failed", "retried"}

    failing = [s for s in tasks if s.attributes["book_pipeline.task.outcome"] != "completed"]
    assert all(s.error and ErrorKind(s.attributes["error.type"]) for s in failing)
    assert not any(s.error or "error.type" in s.attributes for s in tasks if s not in failing)
    by_outcome = {
        o: [s.attributes["error.type"] for s in failing if s.attributes["book_pipeline.task.outcome"] == o]
        for o in outcomes
    }
    assert Counter(by_outcome["failed"]) == Counter(report.failed_by_reason)
    assert all(ErrorKind(kind).retryable for kind in by_outcome["retried"])

    rows = db.query("SELECT id, status FROM tasks WHERE status IN ('completed', 'failed')")
    final = {(s.attributes["book_pipeline.task.id"], s.attributes["book_pipeline.task.outcome"]) for s in tasks}
    assert {(r["id"], r["status"]) for r in rows} <= final  # each task's last span says what the queue says


def _assert_one_client_span_per_fetch(tasks: list[ReceivedSpan], fetches: list[ReceivedSpan], site_url: str) -> None:
    """Each task span that fetched has one child client span by OpenTelemetry's HTTP client conventions, its
    status and its error as the task saw them: 5xx answers among them."""
    by_task = {t.span_id: t for t in tasks}
    assert all(f.parent_id in by_task and f.kind == SpanKind.CLIENT.value + 1 for f in fetches)  # proto: +1
    children = Counter(f.parent_id for f in fetches)
    assert {t.span_id for t in tasks if "book_pipeline.task.fetch_s" in t.attributes} == set(children)
    assert set(children.values()) == {1}
    site = urlsplit(site_url)
    for fetch in fetches:
        task = by_task[fetch.parent_id]  # type: ignore[index]
        a = fetch.attributes
        assert (a["http.request.method"], a["url.full"]) == ("GET", task.attributes["url.full"])
        assert (a["server.address"], a["server.port"]) == (site.hostname, site.port)
        status = a.get("http.response.status_code")
        if task.attributes["book_pipeline.task.outcome"] == "completed":
            assert status == 200 and "error.type" not in a and not fetch.error
        elif status is not None and status >= 400:
            assert a["error.type"] == str(status) and fetch.error
        elif "error.type" in a:
            assert ErrorKind(a["error.type"]) and fetch.error
    statuses = Counter(f.attributes.get("http.response.status_code") for f in fetches)
    assert statuses[200] and any(s is not None and s >= 500 for s in statuses)


def test_the_task_sampler_keeps_every_attempt_that_did_not_complete_and_its_ratio_of_the_rest(
    db: Database, database_url: str, sandbox_factory: Any, receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "book_pipeline_tasks")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.25")
    site = sandbox_factory(faults=Faults(error_rate=0.15, reset_rate=0.05))
    config = sandbox_config(site.url, categories=("Travel", "Mystery"), workers=2, concurrency=4)
    report = finish(database_url, *work(database_url, begin(database_url, config)))

    tasks = [s for s in receiver.spans if s.name.startswith("task ")]
    fetches = [s for s in receiver.spans if s.name == "GET"]
    assert [s.name for s in receiver.spans if s not in tasks and s not in fetches] == ["crawl"]
    # a fetch's span only under a task span that was kept: one for each kept task that fetched
    fetched = {t.span_id for t in tasks if "book_pipeline.task.fetch_s" in t.attributes}
    assert sorted(f.parent_id or 0 for f in fetches) == sorted(fetched)
    outcomes = Counter(s.attributes["book_pipeline.task.outcome"] for s in tasks)
    assert outcomes["retried"] == report.run.retries > 0  # every attempt that failed is kept
    rows = db.query("SELECT id, attempts FROM tasks WHERE status = 'completed'")
    kept = {r["id"] for r in rows if tracing.keeps_task(r["id"], r["attempts"], "completed", 0.25)}
    completed = {
        s.attributes["book_pipeline.task.id"]
        for s in tasks
        if s.attributes["book_pipeline.task.outcome"] == "completed"
    }
    assert completed == kept  # the same tasks in both workers, by their ids
    assert 0.1 * len(rows) < len(kept) < 0.5 * len(rows)
    assert any(r["attempts"] > 1 for r in rows if r["id"] in kept)  # a task retried keeps its completing attempt


def _task(task_id: int) -> Task:
    url = f"http://127.0.0.1:9/catalogue/book_{task_id}/index.html"
    expires = datetime.now(UTC)
    return Task(task_id, "detail", {"url": url}, 0, "127.0.0.1:9", None, 1, 3, 1, expires, None)


@pytest.mark.parametrize(
    ("sampler", "arg", "kept"),
    [("parentbased_always_on", "", True), ("always_off", "", False), ("parentbased_traceidratio", "0", False)],
)
def test_a_task_span_is_kept_or_dropped_by_the_sampler_the_sdk_is_told_to_use(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, sampler: str, arg: str, kept: bool
) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", sampler)
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", arg)
    traces = tracing.task_traces()
    done, retried = _task(1), _task(2)
    for task in (done, retried):
        traces.begin(task, None)
        traces.stage(task, tracing.Stage.FETCH)
    traces.fetched(done, 304, 0.01, None)
    traces.stage(done, tracing.Stage.STORE)
    traces.fetched(retried, 503, 0.02, ErrorKind.HTTP_5XX)
    traces.fetched(retried, None, 0.03, ErrorKind.TIMEOUT)  # a second fetch of one attempt: no response came
    traces.failed(retried, ErrorKind.HTTP_5XX, FailOutcome.RETRY)
    traces.end(done, tracing.Outcome.COMPLETED)
    traces.end(retried, tracing.Outcome.ABANDONED)
    traces.flush()

    if not kept:
        assert receiver.spans == []  # the fetches' spans with their tasks'
        return
    spans = {s.attributes["book_pipeline.task.id"]: s for s in receiver.spans if s.name != "GET"}
    fetches: dict[int | None, list[ReceivedSpan]] = {}
    for span in sorted((s for s in receiver.spans if s.name == "GET"), key=lambda s: s.duration_ns):
        fetches.setdefault(span.parent_id, []).append(span)
    assert set(fetches) == {spans[1].span_id, spans[2].span_id}
    [ok], [throttled, timed_out] = fetches[spans[1].span_id], fetches[spans[2].span_id]
    assert ok.attributes == {
        "http.request.method": "GET",
        "url.full": done.url,
        "server.address": "127.0.0.1",
        "server.port": 9,
        "http.response.status_code": 304,
    }
    assert not ok.error and ok.duration_ns == pytest.approx(0.01e9, rel=1e-3)
    assert throttled.attributes["http.response.status_code"] == 503 and throttled.attributes["error.type"] == "503"
    assert throttled.error and timed_out.error and timed_out.attributes["error.type"] == "timeout"
    assert "http.response.status_code" not in timed_out.attributes
    assert [s.name for s in spans.values()] == ["task detail", "task detail"]
    assert all(s.parent_id is None and s.pid == os.getpid() for s in spans.values())  # no crawl: traces of their own
    assert spans[1].attributes["book_pipeline.task.outcome"] == "completed" and not spans[1].error
    assert spans[1].attributes["book_pipeline.task.stage"] == "store"
    assert spans[1].attributes["url.full"] == done.url
    assert spans[2].attributes["book_pipeline.task.outcome"] == "retried" and spans[2].error
    assert (spans[2].attributes["error.type"], spans[2].attributes["book_pipeline.task.stage"]) == ("http_5xx", "fetch")
    for span in spans.values():
        stages = sum(v for k, v in span.attributes.items() if k.endswith("_s"))
        assert stages == pytest.approx(span.duration_ns / 1e9, abs=1e-6)


class _Seen(SpanProcessor):
    """A span processor of a user's own: what it was handed at each span's start and end."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.ended: list[ReadableSpan] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.started.append(span.name)

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)


def test_a_span_processor_added_to_the_tracer_provider_sees_each_task_span_from_its_claim_to_its_end(
    receiver: OtlpReceiver,
) -> None:
    seen = _Seen()
    tracing.tracer_provider().add_span_processor(seen)
    traces = tracing.task_traces()
    done, retried = _task(1), _task(2)
    claimed = time.monotonic()
    for task in (done, retried):
        traces.begin(task, claimed)
        traces.stage(task, tracing.Stage.FETCH)
    traces.failed(retried, ErrorKind.HTTP_5XX, FailOutcome.DEAD)
    traces.end(retried, tracing.Outcome.ABANDONED)
    traces.stage(done, tracing.Stage.STORE)
    traces.end(done, tracing.Outcome.COMPLETED)
    traces.flush()

    assert seen.started == ["task detail", "task detail"]
    spans = {span.attributes["book_pipeline.task.id"]: span for span in seen.ended if span.attributes}
    assert set(spans) == {1, 2}
    for span in spans.values():
        assert span.kind is SpanKind.CONSUMER and span.instrumentation_scope is not None
        assert span.instrumentation_scope.name == tracing.SCOPE and span.parent is None
        assert span.start_time is not None and span.end_time is not None and span.attributes is not None
        stages = sum(float(v) for k, v in span.attributes.items() if k.endswith("_s") and isinstance(v, float))
        assert stages == pytest.approx((span.end_time - span.start_time) / 1e9, abs=1e-6)
    assert spans[1].status.status_code is StatusCode.UNSET
    assert (spans[2].status.status_code, spans[2].status.description) == (StatusCode.ERROR, "http_5xx")
    assert spans[2].attributes is not None and spans[2].attributes["book_pipeline.task.outcome"] == "failed"
    assert sorted(s.attributes["book_pipeline.task.id"] for s in receiver.spans) == [1, 2]  # and the exporter's


def test_the_task_sampler_is_the_sdks_public_sampler_found_by_its_entry_point(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    [entry] = entry_points(group="opentelemetry_traces_sampler", name=tracing.TASK_SAMPLER)
    made = entry.load()("0.25")
    assert isinstance(made, Sampler) and made.get_description() == "book_pipeline_tasks{0.25}"

    monkeypatch.setenv("OTEL_TRACES_SAMPLER", tracing.TASK_SAMPLER)
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.25")
    sampler = tracing.tracer_provider().sampler
    assert isinstance(sampler, Sampler) and sampler.get_description() == "book_pipeline_tasks{0.25}"
    kept = next(i for i in range(1, 100) if tracing.keeps_task(i, 1, "completed", 0.25))
    dropped = next(i for i in range(1, 100) if not tracing.keeps_task(i, 1, "completed", 0.25))

    def decision(task_id: int, outcome: str) -> Decision:
        attributes: dict[str, int | str] = {
            "book_pipeline.task.id": task_id,
            "book_pipeline.task.attempt": 1,
            "book_pipeline.task.outcome": outcome,
        }
        return sampler.should_sample(None, 1, "task detail", SpanKind.CONSUMER, attributes).decision

    assert decision(kept, "completed") is Decision.RECORD_AND_SAMPLE
    assert decision(dropped, "completed") is Decision.DROP
    assert decision(dropped, "retried") is Decision.RECORD_AND_SAMPLE
    crawl = sampler.should_sample(None, 1, "crawl", attributes={"book_pipeline.crawl.id": 1})
    assert crawl.decision is Decision.RECORD_AND_SAMPLE


def test_a_sampler_that_is_not_installed_is_one_error_line_before_any_worker_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "jaeger_remote")
    with pytest.raises(ConfigError, match=r"^OTEL_TRACES_SAMPLER: no sampler 'jaeger_remote' is installed"):
        tracing.environment()


def test_the_task_samplers_choice_depends_on_the_task_alone() -> None:
    first = [i for i in range(1, 10_001) if tracing.keeps_task(i, 1, "completed", 0.25)]
    assert 2_400 < len(first) < 2_600
    assert first == [i for i in range(1, 10_001) if tracing.keeps_task(i, 1, "completed", 0.25)]
    assert not any(tracing.keeps_task(i, 1, "completed", 0.0) for i in range(1, 1_001))
    assert all(tracing.keeps_task(i, 1, "completed", 1.0) for i in range(1, 1_001))
    assert all(tracing.keeps_task(i, 1, outcome, 0.0) for i in range(1, 101) for outcome in ("retried", "failed"))
    assert all(tracing.keeps_task(i, 2, "completed", 0.0) for i in range(1, 101))


@pytest.mark.parametrize("arg", ["lots", "1.5", "-0.1"])
def test_a_task_sample_ratio_that_is_not_one_is_one_error_line_before_any_worker_starts(
    monkeypatch: pytest.MonkeyPatch, arg: str
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "book_pipeline_tasks")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", arg)
    with pytest.raises(ConfigError, match=rf"^OTEL_TRACES_SAMPLER_ARG={arg}: the book_pipeline_tasks sampler takes"):
        tracing.environment()


def test_a_crawls_trace_ids_are_the_same_wherever_its_row_is_read() -> None:
    started = datetime(2026, 12, 2, 3, 0, 0, 123456, tzinfo=UTC)
    elsewhere = started.astimezone(timezone(timedelta(hours=-5)))  # another session TimeZone, the same instant
    assert tracing.crawl_span_ids(OpenCrawl(7, started)) == tracing.crawl_span_ids(OpenCrawl(7, elsewhere))
    assert tracing.crawl_span_ids(OpenCrawl(7, started)) != tracing.crawl_span_ids(OpenCrawl(8, started))
    again = started + timedelta(microseconds=1)  # a database made again numbers its crawls from 1 again
    assert tracing.crawl_span_ids(OpenCrawl(7, started)) != tracing.crawl_span_ids(OpenCrawl(7, again))
    trace_id, span_id = tracing.crawl_span_ids(OpenCrawl(7, started))
    assert tracing.traceparent(OpenCrawl(7, started)) == f"00-{trace_id:032x}-{span_id:016x}-01"


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, False),
    ],
)
def test_traces_are_on_only_when_the_sdks_own_variables_say_so(env: dict[str, str], on: bool) -> None:
    assert tracing.enabled(env) is on


def test_an_exporter_that_is_not_installed_is_one_error_line_before_any_worker_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    with pytest.raises(ConfigError, match=r"^OTEL_TRACES_EXPORTER: no span exporter 'zipkin' is installed"):
        tracing.environment()
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    with pytest.raises(ConfigError, match=r"^OTEL_EXPORTER_OTLP_PROTOCOL=http/json: not an OTLP protocol"):
        tracing.environment()


def test_with_traces_off_a_worker_imports_nothing_of_opentelemetry() -> None:
    code = (
        "import sys\n"
        "from book_assets.crawl.pipeline import finish\n"
        "from book_assets.crawl.worker import Worker\n"
        "from book_assets.observe.tracing import TaskTraces, task_traces\n"
        "assert type(task_traces()) is TaskTraces\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_dagster_runs_crawl_span_carries_the_run_id(
    db: Database, database_url: str, sandbox: Any, receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dagster as dg

    from book_assets.defs.crawl.steps import drain_queue, report_crawl, seed_queue, share_work
    from book_assets.defs.resources import DatabaseResource, FetcherResource, SchedulingResource, SiteResource

    monkeypatch.setenv("BOOK_PIPELINE_CATEGORIES", "Travel")

    @dg.job(
        resource_defs={
            "database": DatabaseResource(url=database_url),
            "site": SiteResource(base_url=f"{sandbox.url}/", allowed_domains=[sandbox.host]),
            "fetcher": FetcherResource(fetch_mode="http", workers=1, concurrency=4),
            "scheduling": SchedulingResource(),
        }
    )
    def crawl_job() -> None:
        shared, steps = share_work(seed_queue())
        report_crawl(shared=shared, drained=steps.map(drain_queue).collect())

    result = crawl_job.execute_in_process()
    assert result.success
    [root] = [s for s in receiver.spans if s.name == "crawl"]
    assert root.attributes["book_pipeline.run.id"] == result.run_id
