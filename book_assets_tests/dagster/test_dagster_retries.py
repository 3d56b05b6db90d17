"""Retries: a step retries transient errors by its own policy only, and a run is re-run only after a crash.

The steps here fail on purpose and count their attempts; the policy is the crawl steps' ``TRANSIENT_RETRY``
without its delay (the same number of retries, so the count is the real one). The run-retry decision is
Dagster's own daemon code (``should_retry``) on an instance configured with dagster.yaml's ``run_retries``.
"""

from collections.abc import Iterator
from typing import Any

import dagster as dg
import psycopg2
import pytest
import yaml
from dagster._daemon.auto_run_reexecution.auto_run_reexecution import should_retry

from book_assets.defs.retries import TRANSIENT_RETRY, is_transient, transient_only
from book_assets.settings import PROJECT_ROOT

FAST_RETRY = dg.RetryPolicy(max_retries=TRANSIENT_RETRY.max_retries)


def run_failing_asset(error: Exception, instance: dg.DagsterInstance) -> tuple[int, dg.ExecuteInProcessResult]:
    attempts: list[int] = []

    @dg.asset(retry_policy=FAST_RETRY)
    def flaky(context: dg.AssetExecutionContext) -> None:
        attempts.append(1)
        with transient_only(context.op_execution_context):
            raise error

    result = dg.materialize([flaky], instance=instance, raise_on_error=False)
    return len(attempts), result


@pytest.fixture
def project_retries_instance() -> Iterator[dg.DagsterInstance]:
    config = yaml.safe_load((PROJECT_ROOT / "dagster.yaml").read_text())
    with dg.instance_for_test(overrides={"run_retries": config["run_retries"]}) as instance:
        yield instance


def test_a_transient_error_is_retried_by_the_step_policy(project_retries_instance: dg.DagsterInstance) -> None:
    attempts, result = run_failing_asset(
        psycopg2.OperationalError("server closed the connection"), project_retries_instance
    )
    assert not result.success
    assert attempts == 1 + TRANSIENT_RETRY.max_retries == 4


def test_a_permanent_error_fails_the_step_once(project_retries_instance: dg.DagsterInstance) -> None:
    attempts, result = run_failing_asset(ValueError("invalid setting fetch_mode"), project_retries_instance)
    assert not result.success and attempts == 1
    failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
    error = failure.step_failure_data.error
    assert error is not None and "not transient" in error.message


def test_a_transient_error_of_a_run_being_terminated_is_not_retried(
    project_retries_instance: dg.DagsterInstance,
) -> None:
    attempts: list[int] = []

    @dg.asset(retry_policy=FAST_RETRY)
    def terminated(context: dg.AssetExecutionContext) -> None:
        attempts.append(1)
        run = context.instance.get_run_by_id(context.run.run_id)
        assert run is not None
        context.instance.report_run_canceling(run)  # what a run launcher's terminate does first
        with transient_only(context.op_execution_context):
            raise psycopg2.OperationalError("server closed the connection")

    result = dg.materialize([terminated], instance=project_retries_instance, raise_on_error=False)
    assert not result.success and len(attempts) == 1
    failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
    error = failure.step_failure_data.error
    assert error is not None and "being terminated" in error.message


def test_a_run_whose_step_failed_is_not_re_run_by_the_daemon(project_retries_instance: dg.DagsterInstance) -> None:
    _, result = run_failing_asset(psycopg2.OperationalError("gone"), project_retries_instance)
    run = project_retries_instance.get_run_by_id(result.run_id)
    assert run is not None and not should_retry(run, project_retries_instance)


def test_the_same_failed_run_would_be_re_run_if_step_failures_counted() -> None:
    overrides: dict[str, Any] = {"run_retries": {"enabled": True, "max_retries": 1}}
    with dg.instance_for_test(overrides=overrides) as instance:
        _, result = run_failing_asset(psycopg2.OperationalError("gone"), instance)
        run = instance.get_run_by_id(result.run_id)
        assert run is not None and should_retry(run, instance)


def test_an_error_raised_from_a_lost_connection_counts_as_transient() -> None:
    try:
        try:
            raise psycopg2.InterfaceError("connection already closed")
        except psycopg2.InterfaceError as exc:
            raise RuntimeError("drain failed") from exc
    except RuntimeError as wrapped:
        assert is_transient(wrapped)
    assert not is_transient(KeyError("title"))
