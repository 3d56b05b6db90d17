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
:class:`~book_assets.scraper.errors.ErrorKind` and an error status. Each fetch of the task is a child span
``GET`` (span kind client) following OpenTelemetry's HTTP client conventions: ``http.request.method``,
``url.full``, ``server.address``, ``server.port``, ``http.response.status_code`` when a response came, and
``error.type`` (the status code of a 4xx or 5xx, else the fetch's error kind: ``timeout``, ``soft_block``)
with an error status; so 304s and 429s are visible per request. The worker is the span's resource
(``service.instance.id``, ``host:pid``, the worker's id; ``service.version``, the package's) and the crawl its
trace (the root carries the crawl's id and the orchestrator's run id): what every span of a process or of a
crawl shares is not repeated on each.

**Sampling** is the lever for what traces cost. Every task span is kept by default; the SDK's samplers
(``OTEL_TRACES_SAMPLER``) apply as to any span, and ``OTEL_TRACES_SAMPLER=book_pipeline_tasks`` with
``OTEL_TRACES_SAMPLER_ARG=<ratio>`` keeps the crawl's root, every attempt that did not complete and every later
attempt of a task, and that ratio of the tasks that completed at their first attempt (:func:`keeps_task`,
:mod:`book_assets.observe.sampling`). A fetch's span is built only under a task span that was kept, so
sampling the tasks samples their fetches too. A span the sampler drops is never built; ``docs/observability.md``
("Cost") has what a kept and a dropped one cost a crawl.

**Through the SDK's public API.** Task spans are started and ended through the SDK's tracer and exported by its
batch span processor and OTLP exporter, so a span processor anyone adds to :func:`tracer_provider` sees every
task span, as it sees any other.

Why attributes and not a child span or an event per stage: the SDK's cost is per span and per event, not per
attribute (``benchmarks/observe_bench.py --shapes-only`` measures the shapes); attributes are also what a
backend's queries filter and aggregate on (``{ span.book_pipeline.task.politeness_wait_s > 1 }``). The fetch
is the one stage that is a span as well: a client span is what backends' HTTP views and the semantic
conventions look for, and a task retried after a 429 shows its requests as such.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from book_assets import __version__
from book_assets.queue import FailOutcome, Task
from book_assets.scraper.errors import ErrorKind
from book_assets.settings import ConfigError
from book_assets.store.lifecycle import OpenCrawl, running_crawl

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import Sampler
    from opentelemetry.trace import Tracer

    from book_assets.db.connection import Database

log = logging.getLogger(__name__)

#: The variables that turn traces on by naming where they go (``OTEL_TRACES_EXPORTER`` does too, unless ``none``).
ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
#: The SDK's entry-point group of span exporters: ``OTEL_TRACES_EXPORTER`` names are looked up there.
EXPORTER_GROUP = "opentelemetry_traces_exporter"
#: The SDK's entry-point group of samplers: an ``OTEL_TRACES_SAMPLER`` name the SDK does not know is looked up there.
SAMPLER_GROUP = "opentelemetry_traces_sampler"
#: The samplers the SDK's tracer provider makes from ``OTEL_TRACES_SAMPLER`` itself.
SDK_SAMPLERS = frozenset(
    {
        "always_on",
        "always_off",
        "traceidratio",
        "parentbased_always_on",
        "parentbased_always_off",
        "parentbased_traceidratio",
    }
)
#: ``otlp`` by its protocol (``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` / ``OTEL_EXPORTER_OTLP_PROTOCOL``).
OTLP_EXPORTERS = {"http/protobuf": "otlp_proto_http", "grpc": "otlp_proto_grpc"}
#: How often (seconds) a worker reads which crawl is running: a crawl's tasks claimed within this long of its
#: opening by a worker that saw none running are traces of their own.
CRAWL_REFRESH_S = 5.0
#: The service name when neither ``OTEL_SERVICE_NAME`` nor ``OTEL_RESOURCE_ATTRIBUTES`` names one.
SERVICE_NAME = "book-pipeline"
#: The prefix of this pipeline's own span attributes.
NS = "book_pipeline"
#: The crawl root span's attribute naming the crawl (task spans belong to it as its trace).
CRAWL_ID = f"{NS}.crawl.id"
#: The crawl root span's attribute naming the orchestrator's run that opened the crawl (Dagster's run id).
RUN_ID = f"{NS}.run.id"
#: The instrumentation scope of this pipeline's spans.
SCOPE = "book_pipeline"
#: ``OTEL_TRACES_SAMPLER`` naming the task sampler (:func:`keeps_task`); its ratio is ``OTEL_TRACES_SAMPLER_ARG``.
TASK_SAMPLER = "book_pipeline_tasks"
#: A task span's attributes (the ones the task sampler reads first).
TASK_ID = f"{NS}.task.id"
TASK_ATTEMPT = f"{NS}.task.attempt"
TASK_OUTCOME = f"{NS}.task.outcome"
TASK_TYPE = f"{NS}.task.type"
TASK_DOMAIN = f"{NS}.task.domain"
TASK_STAGE = f"{NS}.task.stage"
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
    HANDED_BACK = "handed_back"  #: back to the queue unattempted: its politeness slot went to robots.txt


def keeps_task(task_id: int, attempt: int, outcome: str, ratio: float) -> bool:
    """Whether the task sampler keeps a task attempt's span: always when it did not complete or was not the
    task's first attempt (the pages worth a look), otherwise for ``ratio`` of the task ids, by a hash of the id
    that every process computes alike."""
    if outcome != Outcome.COMPLETED or attempt > 1:
        return True
    return (task_id * _SPREAD) % 2**64 < ratio * 2**64


def sample_ratio(arg: str | None) -> float:
    """The task sampler's ratio from ``OTEL_TRACES_SAMPLER_ARG`` (unset or empty: 1); a ratio that is not a
    number from 0 to 1 is a one-line :class:`ConfigError`."""
    raw = arg if arg else "1"
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


#: The exporters and the sampler this project installs, found without reading every installed package's entry
#: points (about 60 ms a process); any other name is looked up among the entry points, as the SDK looks it up.
KNOWN_EXPORTERS = {
    "otlp_proto_http": ("opentelemetry.exporter.otlp.proto.http.trace_exporter", "OTLPSpanExporter"),
    "console": ("opentelemetry.sdk.trace.export", "ConsoleSpanExporter"),
}
KNOWN_SAMPLERS = {TASK_SAMPLER: ("book_assets.observe.sampling", "task_sampler")}


def _installed(group: str, names: list[str], known: Mapping[str, tuple[str, str]], variable: str) -> list[Any]:
    """What the entry points ``names`` of ``group`` load (``known`` ones imported directly); a name nothing is
    installed for is a one-line :class:`ConfigError` naming ``variable``."""
    from importlib.metadata import entry_points

    if all(name in known for name in names):
        return [getattr(importlib.import_module(known[n][0]), known[n][1]) for n in names]
    installed = {ep.name: ep for ep in entry_points(group=group)}
    for name in names:
        if name not in installed:
            found = ", ".join(sorted(installed))
            what = "span exporter" if group == EXPORTER_GROUP else "sampler"
            raise ConfigError(f"{variable}: no {what} {name!r} is installed (installed: {found})")
    return [installed[name].load() for name in names]


def _exporter_classes(names: list[str]) -> list[Any]:
    """The installed span exporters of ``names``."""
    return _installed(EXPORTER_GROUP, names, KNOWN_EXPORTERS, "OTEL_TRACES_EXPORTER")


def sampler(env: Mapping[str, str]) -> Sampler | None:
    """The sampler ``OTEL_TRACES_SAMPLER`` names, made by its entry point's factory with
    ``OTEL_TRACES_SAMPLER_ARG`` as the SDK documents; None when it names none or one of the SDK's own (the
    tracer provider makes those itself)."""
    name = env.get("OTEL_TRACES_SAMPLER", "").strip().lower()
    if not name or name in SDK_SAMPLERS:
        return None
    [factory] = _installed(SAMPLER_GROUP, [name], KNOWN_SAMPLERS, "OTEL_TRACES_SAMPLER")
    made: Sampler = factory(env.get("OTEL_TRACES_SAMPLER_ARG"))
    return made


def environment() -> dict[str, str]:
    """This process's ``OTEL_*`` variables, for the worker processes it starts (:func:`adopt`).

    A worker forked from the drain's fork server has the environment the fork server started with, which is
    not the drain's when the drain's changed since (a test, an embedding program). Checked here when traces
    are on, so an exporter or a sampler that cannot be made is one error line before any worker starts.
    """
    env = {name: value for name, value in os.environ.items() if name.startswith("OTEL_")}
    if enabled(env):
        _exporter_classes(exporter_names(env))
        sampler(env)
    return env


def preload() -> tuple[str, ...]:
    """What the drain's fork server imports for traces, when they are on: the SDK and the OTLP exporter (about
    0.2 s a worker would otherwise spend importing before its first claim)."""
    if not enabled():
        return ()
    return ("opentelemetry.sdk.trace", "opentelemetry.sdk.trace.export", KNOWN_EXPORTERS["otlp_proto_http"][0])


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


def record_crawl(
    crawl: OpenCrawl,
    attributes: Mapping[str, str | int | float | bool],
    failure: str | None,
    run_id: str | None = None,
) -> None:
    """Record the crawl's root span, from its start until now, with its ids (:func:`crawl_span_ids`); exported
    at once. ``failure``: why the run failed (an error status), or None; ``run_id``: the orchestrator's run
    (Dagster's), or None (the CLI)."""
    if not enabled():
        return
    from opentelemetry.context import Context
    from opentelemetry.trace import Status, StatusCode

    sdk = _current_sdk()
    with sdk.pinned_ids(crawl_span_ids(crawl)):
        span = sdk.tracer.start_span(
            "crawl",
            context=Context(),  # a root, whatever span is current
            start_time=(crawl.started_at - _EPOCH) // timedelta(microseconds=1) * 1000,
            attributes={CRAWL_ID: crawl.id, **attributes, **({RUN_ID: run_id} if run_id else {})},
        )
    if failure is not None:
        span.set_status(Status(StatusCode.ERROR, failure))
    span.end()
    sdk.provider.force_flush()


def _crawl_context(crawl: OpenCrawl) -> Context:
    """A context whose span is the crawl's root (remote: recorded by the process that reports the crawl)."""
    from opentelemetry import trace

    trace_id, span_id = crawl_span_ids(crawl)
    root = trace.SpanContext(trace_id, span_id, is_remote=True, trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
    return trace.set_span_in_context(trace.NonRecordingSpan(root))


# --------------------------------------------------------------------------- the SDK of this process


class _Sdk:
    """This process's tracer provider, made from ``OTEL_*`` on first use: the sampler they name, a batch span
    processor per exporter they name, and an id generator that gives a crawl's root span the ids every worker
    derived (:meth:`pinned_ids`)."""

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
            "service.version": __version__,
            "host.name": host,
            "process.pid": os.getpid(),
            "service.instance.id": f"{host}:{os.getpid()}",
        }
        self.provider: TracerProvider = TracerProvider(
            resource=Resource.create(resource if named else {**resource, "service.name": SERVICE_NAME}),
            id_generator=CrawlIds(),
            sampler=sampler(env),
        )
        for exporter in _exporter_classes(exporter_names(env)):
            self.provider.add_span_processor(BatchSpanProcessor(exporter()))
        if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):  # nobody set one: instrumentations join
            trace.set_tracer_provider(self.provider)
        self.tracer: Tracer = self.provider.get_tracer(SCOPE)

    @contextlib.contextmanager
    def pinned_ids(self, ids: tuple[int, int]) -> Iterator[None]:
        """The next root span started in this thread gets trace id ``ids[0]`` and span id ``ids[1]``."""
        self._pinned.ids = ids
        try:
            yield
        finally:
            self._pinned.ids = None


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


def tracer_provider() -> TracerProvider:
    """This process's tracer provider, made from the current ``OTEL_*`` variables (traces on): a span processor
    added to it (``add_span_processor``) sees every task span and the crawl's root. It is also the process's
    global provider unless one was set before."""
    return _current_sdk().provider


# --------------------------------------------------------------------------- a worker's task spans


class TaskTraces:
    """A worker's hooks for its task spans; these do nothing (traces off), see :func:`task_traces`."""

    def watch(self, db: Database) -> None:
        """On the worker's database thread, before a claim: keep up with which crawl is running."""

    def begin(self, task: Task, claimed_at: float | None) -> None:
        """The worker starts on ``task``, claimed by a statement sent at ``claimed_at`` (``time.monotonic()``)."""

    def stage(self, task: Task, stage: Stage) -> None:
        """``task`` enters ``stage`` (the previous stage ends)."""

    def fetched(self, task: Task, status: int | None, seconds: float, kind: ErrorKind | None) -> None:
        """``task``'s fetch ended after ``seconds``, with a response of ``status`` (None: none came), failed as
        ``kind`` (None: it succeeded)."""

    def failed(self, task: Task, kind: ErrorKind, outcome: FailOutcome) -> None:
        """The queue recorded ``task``'s failure as ``kind``, with ``outcome``."""

    def end(self, task: Task, outcome: Outcome) -> None:
        """``task`` leaves the worker: its span ends, as ``outcome`` unless a failure was recorded (the first
        call counts; later ones do nothing)."""

    def flush(self) -> None:
        """Export what is pending (a worker process is about to exit, without the SDK's exit hook)."""


def task_traces() -> TaskTraces:
    """The worker's task spans: recorded when traces are on (:func:`enabled`), otherwise hooks that do nothing.
    The worker is the process (resource attribute ``service.instance.id``, ``host:pid`` as its worker id)."""
    return _Spans() if enabled() else TaskTraces()


_URL, _ERROR_TYPE = "url.full", "error.type"
_STAGE_KEYS = {stage: f"{NS}.task.{stage}_s" for stage in Stage}


@dataclass(slots=True)
class _Fetch:
    """One fetch of a task: when it started and ended (ns), the response's status, the error kind."""

    start: int
    end: int
    status: int | None
    kind: ErrorKind | None


@dataclass(slots=True)
class _Open:
    """A task the worker is on: the crawl it belongs to (None: a trace of its own), when each stage began (ns),
    its fetches, how it failed."""

    parent: Context | None
    stages: list[tuple[Stage, int]]
    kind: ErrorKind | None = None
    outcome: Outcome | None = None
    fetches: list[_Fetch] | None = None


def http_client_attributes(url: str, status: int | None, kind: ErrorKind | None) -> dict[str, str | int]:
    """A fetch's attributes by OpenTelemetry's HTTP client conventions; ``error.type`` is the status code of a
    4xx or 5xx response, else the fetch's error kind, and absent for a fetch that succeeded."""
    parts = urlsplit(url)
    attributes: dict[str, str | int] = {"http.request.method": "GET", _URL: url, "server.address": parts.hostname or ""}
    with contextlib.suppress(ValueError):  # a port that is not a number: none said (a receiver never raises)
        attributes["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)
    if status is not None:
        attributes["http.response.status_code"] = status
    if status is not None and status >= 400:
        attributes[_ERROR_TYPE] = str(status)
    elif kind is not None:
        attributes[_ERROR_TYPE] = str(kind)
    return attributes


class _Spans(TaskTraces):
    """Task spans through the SDK's tracer: a task's stages are clock readings while it runs, and its span is
    started (at its claim, with every attribute, so the sampler sees its outcome) and ended (at its end) once
    the task has left the worker."""

    def __init__(self) -> None:
        from opentelemetry.context import Context
        from opentelemetry.trace import SpanKind, Status, StatusCode, set_span_in_context

        self._sdk = _current_sdk()
        self._open: dict[int, _Open] = {}
        self._crawl: Context | None = None
        self._read_at = float("-inf")
        self._wall_minus_monotonic_ns = time.time_ns() - time.monotonic_ns()
        self._root: Callable[[], Context] = Context
        self._kind = SpanKind.CONSUMER
        self._client = SpanKind.CLIENT
        self._under = set_span_in_context
        self._error: Callable[[str], Status] = lambda kind: Status(StatusCode.ERROR, kind)

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
        self._crawl = None if crawl is None else _crawl_context(crawl)

    def begin(self, task: Task, claimed_at: float | None) -> None:
        now = time.time_ns()
        start = now if claimed_at is None else round(claimed_at * 1e9) + self._wall_minus_monotonic_ns
        self._open[task.id] = _Open(self._crawl, [(Stage.CLAIM, min(start, now))])

    def stage(self, task: Task, stage: Stage) -> None:
        if (open_ := self._open.get(task.id)) is not None:
            open_.stages.append((stage, time.time_ns()))

    def fetched(self, task: Task, status: int | None, seconds: float, kind: ErrorKind | None) -> None:
        if (open_ := self._open.get(task.id)) is not None:
            ended = time.time_ns()
            fetch = _Fetch(ended - round(seconds * 1e9), ended, status, kind)
            if open_.fetches is None:
                open_.fetches = [fetch]
            else:
                open_.fetches.append(fetch)

    def failed(self, task: Task, kind: ErrorKind, outcome: FailOutcome) -> None:
        if (open_ := self._open.get(task.id)) is not None:
            open_.kind = kind
            open_.outcome = Outcome.RETRIED if outcome is FailOutcome.RETRY else Outcome.FAILED

    def end(self, task: Task, outcome: Outcome) -> None:
        open_ = self._open.pop(task.id, None)
        if open_ is None:
            return
        ended, stages = time.time_ns(), open_.stages
        attributes: dict[str, str | int | float] = {
            TASK_ID: task.id,
            TASK_ATTEMPT: task.attempt,
            TASK_OUTCOME: (open_.outcome or outcome).value,
            TASK_TYPE: task.task_type,
            TASK_DOMAIN: task.domain,
            TASK_STAGE: stages[-1][0].value,
            _URL: str(task.payload.get("url", "")),
        }
        ends = [began for _stage, began in stages[1:]] + [ended]  # a stage lasts until the next begins
        for (stage, began), until in zip(stages, ends, strict=True):
            key = _STAGE_KEYS[stage]
            attributes[key] = float(attributes.get(key, 0.0)) + (until - began) / 1e9
        if open_.kind is not None:
            attributes[_ERROR_TYPE] = str(open_.kind)
        span = self._sdk.tracer.start_span(
            f"task {task.task_type}",
            context=self._root() if open_.parent is None else open_.parent,
            kind=self._kind,
            attributes=attributes,
            start_time=stages[0][1],
        )
        if span.is_recording():
            if open_.kind is not None:
                span.set_status(self._error(str(open_.kind)))
            if open_.fetches is not None:
                self._fetch_spans(span, str(attributes[_URL]), open_.fetches)
        span.end(end_time=ended)

    def _fetch_spans(self, task_span: Any, url: str, fetches: list[_Fetch]) -> None:
        """A client span per fetch, children of the (kept) task span."""
        context = self._under(task_span)
        for fetch in fetches:
            attributes = http_client_attributes(url, fetch.status, fetch.kind)
            span = self._sdk.tracer.start_span(
                "GET", context=context, kind=self._client, attributes=attributes, start_time=fetch.start
            )
            if _ERROR_TYPE in attributes and span.is_recording():
                span.set_status(self._error(str(attributes[_ERROR_TYPE])))
            span.end(end_time=fetch.end)

    def flush(self) -> None:
        self._sdk.provider.force_flush()
