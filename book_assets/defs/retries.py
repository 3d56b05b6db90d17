"""Step retries for transient errors only.

A crawl step fails as a whole only for a reason outside the page it was fetching (single pages are retried by
the task queue): a lost database, a worker process that died, a network that went away. Those are worth
another try, and a retried step resumes the same queue instead of starting over. Anything else (a bad
setting, no Chromium, a newer schema, a bug) fails the same way every time, so :func:`transient_only` turns
it into a ``dg.Failure`` that bypasses the step's :data:`TRANSIENT_RETRY` policy: the step fails once, at once.
The asset checks and the publishing assets carry the same policy around their database work: a server that
refuses one connection (restarting, a pooler recycling) would otherwise fail a blocking check of a sound crawl
or cost the day's publication (the database's own reconnect covers a connection lost after it was made).

A run being terminated is not a transient error. Dagster tells a terminated run's steps to stop by raising
``DagsterExecutionInterruptedError`` in the op, and an op with a retry policy answers that interrupt with a
retry request (``op_execution_error_boundary``: "respect retry policy when interrupts occur"), as it answers
any exception the step's work raises while it is being torn down (a worker stopped, a connection closed).
:func:`stop_on_termination` turns both into a ``dg.Failure`` without retries, so the step ends and the run
worker marks the run CANCELED instead of waiting out the retry.

Run retries (dagster.yaml ``run_retries``) cover the other case, a run whose worker crashed, and never
re-run a run whose step failed, so one permanent error costs one attempt, not ``(1 + run retries) x
(1 + step retries)``.
"""

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
import httpx
import psycopg2

from book_assets.crawl.drain import WorkersLost
from book_assets.db.connection import DatabaseUnavailable
from book_assets.queue.errors import LeaseLost

#: For steps that touch the network: a few tries, exponentially spaced, jittered so retries do not align.
TRANSIENT_RETRY = dg.RetryPolicy(max_retries=3, delay=10, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS)

#: Errors that may not happen again: the database or network went away, a worker process died, a lease moved.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    psycopg2.OperationalError,
    psycopg2.InterfaceError,
    DatabaseUnavailable,
    WorkersLost,
    LeaseLost,
    httpx.TransportError,
    ConnectionError,
    TimeoutError,
)


def is_transient(exc: BaseException) -> bool:
    """True when ``exc``, or an exception it was raised from, is one of :data:`TRANSIENT_ERRORS`."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, TRANSIENT_ERRORS):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


#: The statuses of a run that is being, or has been, terminated.
STOPPING = frozenset({dg.DagsterRunStatus.CANCELING, dg.DagsterRunStatus.CANCELED})


def run_is_stopping(context: dg.OpExecutionContext | None) -> bool:
    """True when the step's run is being terminated (or was): nothing it raises is worth a retry."""
    run = context.instance.get_run_by_id(context.run_id) if context is not None else None
    return run is not None and run.status in STOPPING


@contextmanager
def stop_on_termination(context: dg.OpExecutionContext | None) -> Iterator[None]:
    """End the step without a retry when its run is terminated: on the interrupt Dagster raises in the op,
    and on any error raised while the run is being terminated. Other errors pass through as they are.
    Without a ``context`` (an asset check's query helper) only the interrupt is known to be one."""
    try:
        yield
    except dg.Failure:
        raise
    except (dg.DagsterExecutionInterruptedError, KeyboardInterrupt) as exc:
        raise dg.Failure(
            description="the run is being terminated: the step stops (not retried)", allow_retries=False
        ) from exc
    except Exception as exc:
        if run_is_stopping(context):
            raise dg.Failure(
                description=f"{type(exc).__name__}: {exc} (the run is being terminated: the step is not retried)",
                allow_retries=False,
            ) from exc
        raise


@contextmanager
def transient_only(context: dg.OpExecutionContext | None) -> Iterator[None]:
    """Let transient errors through to the step's retry policy; fail at once, without retries, on any other,
    and on any at all when the run is being terminated (:func:`stop_on_termination`)."""
    with stop_on_termination(context):
        try:
            yield
        except dg.Failure:
            raise
        except Exception as exc:
            if is_transient(exc):
                raise
            raise dg.Failure(
                description=f"{type(exc).__name__}: {exc} (not transient: the step is not retried)",
                allow_retries=False,
            ) from exc
