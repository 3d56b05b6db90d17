"""The task sampler, ``OTEL_TRACES_SAMPLER=book_pipeline_tasks``: an OpenTelemetry SDK sampler that keeps the
task attempts worth a look and a ratio of the rest.

It keeps every span that is not a task span (the crawl's root, any instrumentation's), every task attempt that
did not complete (a retry, a failure, a lost lease), every later attempt of a task, and ``ratio`` of the tasks
that completed at their first attempt, chosen by a hash of the task id
(:func:`~book_assets.observe.tracing.keeps_task`), so every process and host keeps the same tasks. The SDK's
ratio samplers decide by trace id, and a crawl is one trace: they keep all of it or none.

A task span is started once its task has ended (:mod:`book_assets.observe.tracing`), so its outcome is among
the attributes the sampler is asked with. The SDK finds the sampler by the name of its entry point (group
``opentelemetry_traces_sampler``, ``pyproject.toml``); :func:`task_sampler` is the factory it calls, with
``OTEL_TRACES_SAMPLER_ARG``. This module imports the SDK: it is imported only when traces are on.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

from book_assets.observe.tracing import TASK_ATTEMPT, TASK_ID, TASK_OUTCOME, TASK_SAMPLER, keeps_task, sample_ratio


class TaskSampler(Sampler):
    """Keeps a task span by :func:`~book_assets.observe.tracing.keeps_task` (read from the attributes it is
    started with) and every other span."""

    def __init__(self, ratio: float) -> None:
        self.ratio = ratio

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        task_id = attributes.get(TASK_ID) if attributes else None
        if attributes is None or not isinstance(task_id, int):
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)
        attempt, outcome = attributes.get(TASK_ATTEMPT), attributes.get(TASK_OUTCOME)
        if keeps_task(task_id, attempt if isinstance(attempt, int) else 1, str(outcome), self.ratio):
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)
        return SamplingResult(Decision.DROP)

    def get_description(self) -> str:
        return f"{TASK_SAMPLER}{{{self.ratio}}}"


def task_sampler(arg: str | None) -> TaskSampler:
    """The entry point's factory: the sampler at the ratio ``OTEL_TRACES_SAMPLER_ARG`` gives (all when unset);
    a ratio that is not a number from 0 to 1 is a one-line :class:`~book_assets.settings.ConfigError`."""
    return TaskSampler(sample_ratio(arg))
