"""Traces of the crawl through OpenTelemetry: a crawl is one trace, each task attempt a span in it.

**On and off.** Traces are configured as every OpenTelemetry SDK is, by its environment: they are on when
``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set, or ``OTEL_TRACES_EXPORTER``
names an exporter (``otlp``, ``console`` or any installed one; ``none`` is off), and off with
``OTEL_SDK_DISABLED=true``. The SDK reads the rest itself (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``,
``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*``, the exporter's headers and timeouts). ``otlp`` sends OTLP over HTTP
(``OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf``, the default); ``grpc`` needs the gRPC exporter installed. Off,
:func:`task_traces` returns :class:`TaskTraces`, whose hooks return at once, and the SDK is never imported.

**A crawl is one trace, across processes and hosts.** The trace id and the root span's id are derived from the
crawl's row in the ``crawls`` table, its id and its start (:func:`crawl_span_ids`). A worker reads which crawl
is running (:func:`~book_assets.store.lifecycle.running_crawl`, at most every :data:`CRAWL_REFRESH_S` seconds,
on its database thread before a claim) and parents its task spans on that root, so the drain's forked workers,
a Dagster step's worker in a Kubernetes pod and ``book-pipeline work`` on another host all join the crawl's
trace with nothing handed to them. The run that opened the crawl records the root span when it reports
(:func:`record_crawl`), from the crawl's start to its report; a crawl that never reports leaves its task spans
under a root the backend shows as missing. Between crawls (a retry of the failures, a drain of leftovers) each
task span is a trace of its own. The crawl's W3C ``traceparent`` is :func:`traceparent`.

**Spans.** ``crawl`` (the root), then one ``task <type>`` span per claimed task (span kind consumer: a message
taken from a queue and processed) from its claim to its end, with the seconds it spent in each stage
(:class:`Stage`: claim, robots, politeness_wait, fetch, render, parse, store) as ``book_pipeline.task.<stage>_s``
attributes; the stages follow one another, so they add up to the span's duration. The span is made after the
task ended, so a stage costs the worker a clock reading. A task span carries the task's id, type, domain,
attempt and URL, its :class:`Outcome`, the stage it ended in and, when it failed, ``error.type`` = its
:class:`~book_assets.scraper.errors.ErrorKind` and an error status. The worker is the span's resource
(``service.instance.id``, ``host:pid``, the worker's id) and the crawl its trace (the root carries the crawl's
id): what every span of a process or of a crawl shares is not repeated on each.

**Sampling.** Every task span is kept by default. ``OTEL_TRACES_SAMPLER=book_pipeline_tasks`` with
``OTEL_TRACES_SAMPLER_ARG=<ratio>`` keeps the crawl's root, every attempt that did not complete (a retry, a
failure, a lost lease) and every later attempt of a task, and that ratio of the tasks that completed at their
first attempt, chosen by a hash of the task id (:func:`keeps_task`), so every process and host keeps the same
tasks. The SDK's ratio samplers decide by trace id, and a crawl is one trace: they keep all of it or none. A
span the sampler drops costs a dictionary and one call (about 6 µs a task with the stage hooks); a kept one
about 30 µs made, OTLP-encoded (:mod:`book_assets.observe.otlp`) and sent, apart from a crawl; in a crawling
worker, every span kept, traces cost 84 µs a page against about 2 ms (figures in ``docs/observability.md``).

Why attributes and not a child span or an event per stage: the SDK's cost is per span and per event, not per
attribute. Made, batched and OTLP-encoded (``benchmarks/observe_bench.py --shapes-only``), one span with its
stages as attributes cost 15 µs of CPU made as the worker makes it (:class:`_Recording`), 37–43 µs started
and ended through the tracer, with five events instead 59 µs, as five child spans 143 µs. Attributes are also
what a backend's queries filter and aggregate on (``{ span.book_pipeline.task.politeness_wait_s > 1 }``).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from book_assets.queue import FailOutcome, Task
from book_assets.scraper.errors import ErrorKind
from book_assets.settings import ConfigError
from book_assets.store.lifecycle import OpenCrawl, running_crawl

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import SpanContext, Tracer

    from book_assets.db.connection import Database

log = logging.getLogger(__name__)

#: The variables that turn traces on by naming where they go (``OTEL_TRACES_EXPORTER`` does too, unless ``none``).
ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
#: The SDK's entry-point group of span exporters: ``OTEL_TRACES_EXPORTER`` names are looked up there.
EXPORTER_GROUP = "opentelemetry_traces_exporter"
#: ``otlp`` by its protocol (``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` / ``OTEL_EXPORTER_OTLP_PROTOCOL``).
OTLP_EXPORTERS = {"http/protobuf": "otlp_proto_http", "grpc": "otlp_proto_grpc"}
#: How often (seconds) a worker reads which crawl is running: a crawl's tasks claimed within this long of its
#: opening by a worker that saw none running are traces of their own.
CRAWL_REFRESH_S = 5.0
#: A worker makes its task spans in batches of this many ended tasks (:meth:`TaskTraces.tick` makes a smaller
#: batch once its first task ended :data:`SPAN_DELAY_NS` ago, or when the worker goes idle).
SPAN_BATCH = 256
SPAN_DELAY_NS = 1_000_000_000
#: The service name when neither ``OTEL_SERVICE_NAME`` nor ``OTEL_RESOURCE_ATTRIBUTES`` names one.
SERVICE_NAME = "book-pipeline"
#: The prefix of this pipeline's own span attributes.
NS = "book_pipeline"
#: The crawl root span's attribute naming the crawl (task spans belong to it as its trace).
CRAWL_ID = f"{NS}.crawl.id"
#: The instrumentation scope of this pipeline's spans.
SCOPE = "book_pipeline"
#: ``OTEL_TRACES_SAMPLER`` naming the task sampler (:func:`keeps_task`); its ratio is ``OTEL_TRACES_SAMPLER_ARG``.
TASK_SAMPLER = "book_pipeline_tasks"
#: Fibonacci hashing's multiplier: consecutive task ids land far apart in [0, 2**64).
_SPREAD = 0x9E3779B97F4A7C15
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Stage(StrEnum):
    """A stage of a task's processing: it lasts until the next begins; its seconds are an attribute of the
    task's span (``book_pipeline.task.<stage>_s``)."""

    CLAIM = "claim"  #: from the claim statement's start until the worker starts on the task
    ROBOTS = "robots"  #: robots.txt consulted (obey_robots)
    POLITENESS_WAIT = "politeness_wait"  #: until the domain's politeness slot comes
    FETCH = "fetch"  #: the request (or the browser's navigation), its AutoThrottle report
    RENDER = "render"  #: served HTML that did not parse, rendered in the browser
    PARSE = "parse"  #: the page parsed (and archived first, warc on)
    STORE = "store"  #: what the page found enqueued, the page stored and the task completed (one transaction)


class Outcome(StrEnum):
    """How a task span ended; ``completed``, ``retried`` and ``failed`` are what the queue recorded."""

    COMPLETED = "completed"  #: completed, in the transaction that stored its page
    RETRIED = "retried"  #: failed (``error.type`` says why), pending again after its back-off
    FAILED = "failed"  #: failed for good (``error.type`` says why)
    LEASE_LOST = "lease_lost"  #: another worker took it over (this one stalled past its lease)
    ABANDONED = "abandoned"  #: cancelled: the worker stopped and released it, or found its lease gone


def keeps_task(task_id: int, attempt: int, outcome: str, ratio: float) -> bool:
    """Whether the task sampler keeps a task attempt's span: always when it did not complete or was not the
    task's first attempt (the pages worth a look), otherwise for ``ratio`` of the task ids, by a hash of the id
    that every process computes alike."""
    if outcome != Outcome.COMPLETED or attempt > 1:
        return True
    return (task_id * _SPREAD) % 2**64 < ratio * 2**64


def task_sample_ratio(env: Mapping[str, str]) -> float | None:
    """The task sampler's ratio when ``env`` asks for it (``OTEL_TRACES_SAMPLER``), else None; a ratio that is
    not a number from 0 to 1 is a one-line :class:`ConfigError`."""
    if env.get("OTEL_TRACES_SAMPLER", "").strip().lower() != TASK_SAMPLER:
        return None
    raw = env.get("OTEL_TRACES_SAMPLER_ARG", "1")
    try:
        ratio = float(raw)
    except ValueError:
        ratio = -1.0
    if not 0.0 <= ratio <= 1.0:
        raise ConfigError(f"OTEL_TRACES_SAMPLER_ARG={raw}: the {TASK_SAMPLER} sampler takes a ratio from 0 to 1")
    return ratio


def enabled(env: Mapping[str, str] = os.environ) -> bool:
    """Whether ``env`` turns traces on (see the module's doc)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporters:
        return exporters != "none"
    return any(env.get(name) for name in ENDPOINTS)


def exporter_names(env: Mapping[str, str]) -> list[str]:
    """The entry-point names of the span exporters ``env`` asks for (``OTEL_TRACES_EXPORTER``, default otlp)."""
    names = []
    for asked in (env.get("OTEL_TRACES_EXPORTER") or "otlp").split(","):
        name = asked.strip().lower()
        if name in ("", "none"):
            continue
        if name == "otlp":
            variable = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
            variable = variable if env.get(variable) else "OTEL_EXPORTER_OTLP_PROTOCOL"
            protocol = env.get(variable) or "http/protobuf"
            if protocol not in OTLP_EXPORTERS:
                raise ConfigError(f"{variable}={protocol}: not an OTLP protocol ({', '.join(OTLP_EXPORTERS)})")
            name = OTLP_EXPORTERS[protocol]
        names.append(name)
    return names


#: The exporters this project installs, found without reading every installed package's entry points (about
#: 60 ms a process); any other name is looked up among the entry points. OTLP over HTTP is the SDK's exporter
#: with this project's encoder (:mod:`book_assets.observe.otlp`).
KNOWN_EXPORTERS = {
    "otlp_proto_http": ("book_assets.observe.otlp", "OTLPSpanExporter"),
    "console": ("opentelemetry.sdk.trace.export", "ConsoleSpanExporter"),
}


def _exporter_classes(names: list[str]) -> list[Any]:
    """The installed exporters of ``names``; a name none is installed for is a one-line :class:`ConfigError`."""
    import importlib
    from importlib.metadata import entry_points

    if all(name in KNOWN_EXPORTERS for name in names):
        return [getattr(importlib.import_module(KNOWN_EXPORTERS[n][0]), KNOWN_EXPORTERS[n][1]) for n in names]
    installed = {ep.name: ep for ep in entry_points(group=EXPORTER_GROUP)}
    for name in names:
        if name not in installed:
            known = ", ".join(sorted(installed))
            raise ConfigError(f"OTEL_TRACES_EXPORTER: no span exporter {name!r} is installed (installed: {known})")
    return [installed[name].load() for name in names]


def environment() -> dict[str, str]:
    """This process's ``OTEL_*`` variables, for the worker processes it starts (:func:`adopt`).

    A worker forked from the drain's fork server has the environment the fork server started with, which is
    not the drain's when the drain's changed since (a test, an embedding program). Checked here when traces
    are on, so an exporter that cannot be made is one error line before any worker starts.
    """
    env = {name: value for name, value in os.environ.items() if name.startswith("OTEL_")}
    if enabled(env):
        _exporter_classes(exporter_names(env))
        task_sample_ratio(env)
    return env


def preload() -> tuple[str, ...]:
    """What the drain's fork server imports for traces, when they are on: the SDK and the OTLP exporter (about
    0.2 s a worker would otherwise spend importing before its first claim)."""
    if not enabled():
        return ()
    return ("opentelemetry.sdk.trace", "opentelemetry.sdk.trace.export", *_EXPORTER_MODULES)


#: The OTLP exporter's modules (the default exporter, and the HTTP client it makes), imported by the fork server.
_EXPORTER_MODULES = (
    "book_assets.observe.otlp",
    "opentelemetry.exporter.http.transport._requests",
    "requests",
)


def adopt(env: Mapping[str, str]) -> None:
    """In a worker process: the drain's ``OTEL_*`` variables (:func:`environment`) instead of its own."""
    for name in [name for name in os.environ if name.startswith("OTEL_")]:
        del os.environ[name]
    os.environ.update(env)


# --------------------------------------------------------------------------- the crawl's trace


def crawl_span_ids(crawl: OpenCrawl) -> tuple[int, int]:
    """The crawl's trace id and its root span's id: a hash of its id and its start (to the microsecond), the
    same in every process that reads its row, and new for a crawl of a database made again (ids start over)."""
    micros = (crawl.started_at - _EPOCH) // timedelta(microseconds=1)
    digest = hashlib.sha256(f"book-pipeline crawl {crawl.id} {micros}".encode()).digest()
    return int.from_bytes(digest[:16], "big") or 1, int.from_bytes(digest[16:24], "big") or 1


def traceparent(crawl: OpenCrawl) -> str:
    """The crawl's root span as a W3C ``traceparent`` header value (sampled)."""
    trace_id, span_id = crawl_span_ids(crawl)
    return f"00-{trace_id:032x}-{span_id:016x}-01"


def record_crawl(crawl: OpenCrawl, attributes: Mapping[str, str | int | float | bool], failure: str | None) -> None:
    """Record the crawl's root span, from its start until now, with its ids (:func:`crawl_span_ids`); exported
    at once. ``failure``: why the run failed (an error status), or None."""
    if not enabled():
        return
    from opentelemetry.trace import Status, StatusCode

    sdk = _current_sdk()
    with sdk.pinned_ids(crawl_span_ids(crawl)):
        span = sdk.tracer.start_span(
            "crawl",
            start_time=(crawl.started_at - _EPOCH) // timedelta(microseconds=1) * 1000,
            attributes={CRAWL_ID: crawl.id, **attributes},
        )
    if failure is not None:
        span.set_status(Status(StatusCode.ERROR, failure))
    span.end()
    sdk.provider.force_flush()


def _crawl_context(crawl: OpenCrawl) -> tuple[Context, SpanContext]:
    """A context whose span is the crawl's root (remote: recorded by the process that reports the crawl), and
    the root's span context."""
    from opentelemetry import trace

    trace_id, span_id = crawl_span_ids(crawl)
    root = trace.SpanContext(trace_id, span_id, is_remote=True, trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
    return trace.set_span_in_context(trace.NonRecordingSpan(root)), root


# --------------------------------------------------------------------------- the SDK of this process


class _Sdk:
    """This process's tracer provider, made from ``OTEL_*`` on first use, with an id generator that gives a
    crawl's root span the ids every worker derived (:meth:`pinned_ids`)."""

    def __init__(self, env: dict[str, str]) -> None:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

        self.env = env
        pinned = self._pinned = threading.local()

        class CrawlIds(RandomIdGenerator):
            def generate_trace_id(self) -> int:
                ids: tuple[int, int] | None = getattr(pinned, "ids", None)
                return ids[0] if ids else super().generate_trace_id()

            def generate_span_id(self) -> int:
                ids: tuple[int, int] | None = getattr(pinned, "ids", None)
                return ids[1] if ids else super().generate_span_id()

        named = "OTEL_SERVICE_NAME" in env or "service.name=" in env.get("OTEL_RESOURCE_ATTRIBUTES", "")
        host = socket.gethostname()
        resource: dict[str, str | int] = {
            "host.name": host,
            "process.pid": os.getpid(),
            "service.instance.id": f"{host}:{os.getpid()}",
        }
        ratio = task_sample_ratio(env)
        self.provider: TracerProvider = TracerProvider(
            resource=Resource.create(resource if named else {**resource, "service.name": SERVICE_NAME}),
            id_generator=CrawlIds(),
            **({} if ratio is None else {"sampler": _task_sampler(ratio)}),
        )
        self.processors = [BatchSpanProcessor(exporter()) for exporter in _exporter_classes(exporter_names(env))]
        for processor in self.processors:
            self.provider.add_span_processor(processor)
        if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):  # nobody set one: instrumentations join
            trace.set_tracer_provider(self.provider)
        self.tracer: Tracer = self.provider.get_tracer(SCOPE)

    @contextlib.contextmanager
    def pinned_ids(self, ids: tuple[int, int]) -> Any:
        """The next root span started in this thread gets trace id ``ids[0]`` and span id ``ids[1]``."""
        self._pinned.ids = ids
        try:
            yield
        finally:
            self._pinned.ids = None


def _task_sampler(ratio: float) -> Any:
    """The SDK sampler of ``OTEL_TRACES_SAMPLER=book_pipeline_tasks``: a task span by :func:`keeps_task`
    (read from the attributes it is made with), any other span kept."""
    from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult

    class TaskSampler(Sampler):
        def should_sample(
            self,
            parent_context: Any,
            trace_id: int,
            name: str,
            kind: Any = None,
            attributes: Any = None,
            links: Any = None,
            trace_state: Any = None,
        ) -> SamplingResult:
            task_id = attributes.get(_TASK_ID) if attributes else None
            if task_id is None or keeps_task(task_id, attributes[_TASK_ATTEMPT], attributes[_TASK_OUTCOME], ratio):
                return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)
            return SamplingResult(Decision.DROP)

        def get_description(self) -> str:
            return f"{TASK_SAMPLER}{{{ratio}}}"

    return TaskSampler()


_sdk_lock = threading.Lock()
_sdk: _Sdk | None = None


def _current_sdk() -> _Sdk:
    """The SDK set up from the current ``OTEL_*`` variables: made on first use, made again when they changed."""
    global _sdk
    env = {name: value for name, value in os.environ.items() if name.startswith("OTEL_")}
    with _sdk_lock:
        if _sdk is None or _sdk.env != env:
            if _sdk is not None:
                _sdk.provider.shutdown()
            _sdk = _Sdk(env)
        return _sdk


# --------------------------------------------------------------------------- a worker's task spans


class TaskTraces:
    """A worker's hooks for its task spans; these do nothing (traces off), see :func:`task_traces`."""

    def watch(self, db: Database) -> None:
        """On the worker's database thread, before a claim: keep up with which crawl is running."""

    def begin(self, task: Task, claimed_at: float | None) -> None:
        """The worker starts on ``task``, claimed by a statement sent at ``claimed_at`` (``time.monotonic()``)."""

    def stage(self, task: Task, stage: Stage) -> None:
        """``task`` enters ``stage`` (the previous stage ends)."""

    def failed(self, task: Task, kind: ErrorKind, outcome: FailOutcome) -> None:
        """The queue recorded ``task``'s failure as ``kind``, with ``outcome``."""

    def end(self, task: Task, outcome: Outcome) -> None:
        """``task`` leaves the worker: its span ends, as ``outcome`` unless a failure was recorded (the first
        call counts; later ones do nothing)."""

    def tick(self, *, idle: bool = False) -> None:
        """From the worker's loop: make the spans of the tasks ended :data:`SPAN_DELAY_NS` ago or more (all of
        them when ``idle``: the worker is about to wait for work)."""

    def flush(self) -> None:
        """Export what is pending (a worker process is about to exit, without the SDK's exit hook)."""


def task_traces() -> TaskTraces:
    """The worker's task spans: recorded when traces are on (:func:`enabled`), otherwise hooks that do nothing.
    The worker is the process (resource attribute ``service.instance.id``, ``host:pid`` as its worker id)."""
    return _Recording() if enabled() else TaskTraces()


#: A task span's attribute names, made once (a span is made per page).
_TASK_ID = f"{NS}.task.id"
_TASK_TYPE = f"{NS}.task.type"
_TASK_DOMAIN = f"{NS}.task.domain"
_TASK_ATTEMPT = f"{NS}.task.attempt"
_TASK_OUTCOME = f"{NS}.task.outcome"
_TASK_STAGE = f"{NS}.task.stage"
_URL, _ERROR_TYPE = "url.full", "error.type"
_STAGE_KEYS = {stage: f"{NS}.task.{stage}_s" for stage in Stage}


@dataclass(frozen=True, slots=True)
class _Parent:
    """The crawl a task span belongs to: the context its sampler is asked with, and its root span."""

    context: Context
    span: SpanContext


@dataclass(slots=True)
class _Open:
    """A task the worker is on: its crawl, when each stage began (ns), how it failed."""

    parent: _Parent | None
    stages: list[tuple[Stage, int]]
    kind: ErrorKind | None = None
    outcome: Outcome | None = None


class _Recording(TaskTraces):
    """Task spans made after their tasks ended, as finished spans handed straight to the span processors.

    A task that ends is put aside (its task, stages and outcome); the spans of those put aside are made in one
    go once :data:`SPAN_BATCH` have ended, or from the worker's loop (:meth:`tick`) once the first of them
    ended :data:`SPAN_DELAY_NS` ago or the worker goes idle. Made one by one between the pages, the same spans
    cost a crawling worker 37 µs a task; made 256 at a time, 20 µs (the thread's CPU around each call, in a
    crawl of ``observe_bench.py --paired traces``).

    Everything a task span holds is known when the task ends, so the span is not started and ended through
    the SDK's tracer, which builds a live span for it (a lock, each attribute checked and copied into a
    bounded mapping, the processors called at its start and at its end): the worker asks the provider's
    sampler, and when it samples, makes the SDK's :class:`~opentelemetry.sdk.trace.ReadableSpan` (what the
    span processors and exporters take) with the provider's ids, resource and this pipeline's scope, and gives
    it to the batch processors. A span the sampler drops costs its attributes' dictionary and the sampler's
    call. The attributes are this module's own, of the types OTLP carries, well under the SDK's limit of 128.
    """

    def __init__(self) -> None:
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.sdk.trace.sampling import Decision
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

        self._sdk = _current_sdk()
        self._open: dict[int, _Open] = {}
        self._ended: list[tuple[Task, _Open, Outcome, int]] = []  # tasks ended whose spans are not made yet
        self._crawl: _Parent | None = None
        self._read_at = float("-inf")
        self._wall_minus_monotonic_ns = time.time_ns() - time.monotonic_ns()
        self._kind, self._span_context, self._readable = SpanKind.CONSUMER, SpanContext, ReadableSpan
        self._status, self._error, self._unset = Status, StatusCode.ERROR, Status(StatusCode.UNSET)
        self._sample, self._sampled = Decision.RECORD_AND_SAMPLE, TraceFlags(TraceFlags.SAMPLED)
        self._scope = InstrumentationScope(SCOPE)

    def watch(self, db: Database) -> None:
        now = time.monotonic()
        if now - self._read_at < CRAWL_REFRESH_S:
            return
        self._read_at = now
        try:
            crawl = running_crawl(db)
        except Exception:  # traces never stop a claim; the claim that follows meets the same database
            log.warning("could not read the running crawl for traces", exc_info=True)
            return
        self._crawl = None if crawl is None else _Parent(*_crawl_context(crawl))

    def begin(self, task: Task, claimed_at: float | None) -> None:
        now = time.time_ns()
        start = now if claimed_at is None else round(claimed_at * 1e9) + self._wall_minus_monotonic_ns
        self._open[task.id] = _Open(self._crawl, [(Stage.CLAIM, min(start, now))])

    def stage(self, task: Task, stage: Stage) -> None:
        if (open_ := self._open.get(task.id)) is not None:
            open_.stages.append((stage, time.time_ns()))

    def failed(self, task: Task, kind: ErrorKind, outcome: FailOutcome) -> None:
        if (open_ := self._open.get(task.id)) is not None:
            open_.kind = kind
            open_.outcome = Outcome.RETRIED if outcome is FailOutcome.RETRY else Outcome.FAILED

    def end(self, task: Task, outcome: Outcome) -> None:
        open_ = self._open.pop(task.id, None)
        if open_ is None:
            return
        self._ended.append((task, open_, outcome, time.time_ns()))
        if len(self._ended) >= SPAN_BATCH:
            self._make_spans()

    def tick(self, *, idle: bool = False) -> None:
        if self._ended and (idle or time.time_ns() - self._ended[0][3] >= SPAN_DELAY_NS):
            self._make_spans()

    def _make_spans(self) -> None:
        """The spans of the tasks ended since the last call, made and handed to the span processors in one go."""
        ended, self._ended = self._ended, []
        for task, open_, outcome, at in ended:
            self._span(task, open_, outcome, at)

    def _span(self, task: Task, open_: _Open, outcome: Outcome, ended: int) -> None:
        stages = open_.stages
        attributes: dict[str, Any] = {
            _TASK_ID: task.id,
            _TASK_TYPE: task.task_type,
            _TASK_DOMAIN: task.domain,
            _TASK_ATTEMPT: task.attempt,
            _TASK_OUTCOME: (open_.outcome or outcome).value,
            _TASK_STAGE: stages[-1][0].value,
            _URL: str(task.payload.get("url", "")),
        }
        ends = [began for _stage, began in stages[1:]] + [ended]  # a stage lasts until the next begins
        for (stage, began), until in zip(stages, ends, strict=True):
            key = _STAGE_KEYS[stage]
            attributes[key] = attributes.get(key, 0.0) + (until - began) / 1e9
        if open_.kind is not None:
            attributes[_ERROR_TYPE] = str(open_.kind)
        sdk, name, parent = self._sdk, f"task {task.task_type}", open_.parent
        trace_id = sdk.provider.id_generator.generate_trace_id() if parent is None else parent.span.trace_id
        sampling = sdk.provider.sampler.should_sample(
            None if parent is None else parent.context, trace_id, name, self._kind, attributes
        )
        if sampling.decision is not self._sample:
            return
        span = self._readable(
            name,
            self._span_context(
                trace_id,
                sdk.provider.id_generator.generate_span_id(),
                is_remote=False,
                trace_flags=self._sampled,
                trace_state=sampling.trace_state,
            ),
            parent=None if parent is None else parent.span,
            resource=sdk.provider.resource,
            attributes={**attributes, **sampling.attributes},
            kind=self._kind,
            status=self._unset if open_.kind is None else self._status(self._error, str(open_.kind)),
            start_time=stages[0][1],
            end_time=ended,
            instrumentation_scope=self._scope,
        )
        for processor in sdk.processors:
            processor.on_end(span)

    def flush(self) -> None:
        self._make_spans()
        self._sdk.provider.force_flush()
