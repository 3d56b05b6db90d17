"""Logging, configured once per process: the CLI's entry (``book-pipeline ...``) and each crawl worker.

Every line goes to stderr with its UTC time, level and logger, and the Dagster run id and the trace id when
they are known, as text or as one JSON object a line (settings ``log_level`` and ``log_format``). The run id
is ``DAGSTER_RUN_ID`` from the environment (on Kubernetes the run and step pods take it from their
``dagster/run-id`` label, deploy/k8s; elsewhere the crawl's Dagster steps set it for their duration,
:func:`run_id`); the trace id is the current span's, read only when OpenTelemetry was
imported already (traces on): logging never imports the SDK.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TextIO

from book_assets.settings import ConfigError, Settings, load_settings

RUN_ID_ENV = "DAGSTER_RUN_ID"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s%(ids)s: %(message)s"


def _trace_id() -> str | None:
    trace = sys.modules.get("opentelemetry.trace")  # imported by tracing when traces are on, never here
    if trace is None:
        return None
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


class ContextFilter(logging.Filter):
    """Puts ``run_id`` and ``trace_id`` (None when unknown) on every record, and ``ids``, their text form."""

    def filter(self, record: logging.LogRecord) -> bool:
        run_id, trace_id = os.environ.get(RUN_ID_ENV) or None, _trace_id()
        ids = [f"{k}={v}" for k, v in (("run", run_id), ("trace", trace_id)) if v]
        record.__dict__.update(run_id=run_id, trace_id=trace_id, ids=f" [{' '.join(ids)}]" if ids else "")
        return True


class _UtcFormatter(logging.Formatter):
    """Times as ISO 8601 in UTC with milliseconds: 2026-12-04T01:48:22.123Z."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(record.created))}.{int(record.msecs):03d}Z"


class JsonFormatter(_UtcFormatter):
    """One JSON object per record: time, level, logger, message, run_id and trace_id when known, exception."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in ("run_id", "trace_id"):
            if getattr(record, key, None):
                line[key] = getattr(record, key)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler :func:`configure` installs (its class tells it apart from anyone else's)."""


def configure(level: str, fmt: str, stream: TextIO | None = None) -> None:
    """Log records of ``level`` and above to ``stream`` (stderr) as ``fmt`` ("text" or "json"). Called again,
    it replaces its own handler, never another's."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    handler = _Handler(stream if stream is not None else sys.stderr)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else _UtcFormatter(TEXT_FORMAT))
    root.addHandler(handler)
    root.setLevel(level)


@dataclass(frozen=True)
class LogSetup:
    """How a process logs: the level, the format and the run id its lines carry. A drain hands its own to the
    worker processes it starts (:meth:`apply`): a worker forked from the fork server has the environment the
    fork server started with, which is not the drain's once that changed (a Dagster step's run id, a test)."""

    level: str
    fmt: str
    run_id: str | None

    @classmethod
    def current(cls) -> LogSetup:
        """This process's: the ``log_level`` and ``log_format`` settings (their defaults when the settings do
        not load: the command then reports that error itself, as one line) and ``DAGSTER_RUN_ID``."""
        try:
            settings = load_settings()
        except ConfigError:
            settings = Settings.model_construct()
        return cls(settings.log_level, settings.log_format, os.environ.get(RUN_ID_ENV) or None)

    def apply(self) -> None:
        """Log as this setup says, in this process."""
        if self.run_id is None:
            os.environ.pop(RUN_ID_ENV, None)
        else:
            os.environ[RUN_ID_ENV] = self.run_id
        configure(self.level, self.fmt)


def configure_from_settings() -> None:
    """:func:`configure` with the ``log_level`` and ``log_format`` settings (:meth:`LogSetup.current`)."""
    setup = LogSetup.current()
    configure(setup.level, setup.fmt)


@contextlib.contextmanager
def run_id(value: str) -> Iterator[None]:
    """Lines logged in the block, by this process and by the workers it starts meanwhile, carry run id
    ``value`` (a Dagster run's, where nothing set ``DAGSTER_RUN_ID``); the environment is restored after."""
    before = os.environ.get(RUN_ID_ENV)
    os.environ[RUN_ID_ENV] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(RUN_ID_ENV, None)
        else:
            os.environ[RUN_ID_ENV] = before
