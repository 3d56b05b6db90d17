"""A crawl run that is terminated stops: no step asks for a retry and the run ends CANCELED.

The run is launched as the stack's ``DockerRunLauncher`` launches it: ``dagster api execute_run`` in a process
of its own (the run worker; the multiprocess executor runs each step in a child process of it), on an on-disk
instance. It is terminated as that launcher terminates it: the run is reported CANCELING, then the run worker
gets SIGTERM (``docker stop`` through tini). The run worker takes SIGTERM as SIGINT and tells its step
processes to stop; each raises ``DagsterExecutionInterruptedError`` in the op, which Dagster turns into a
retry request for an op with a retry policy. The sandbox answers slowly, so the drain steps are mid-crawl.

The verdict is read from the run's events, never from a clock: no ``STEP_UP_FOR_RETRY`` or
``STEP_RESTARTED``, no drain step ending as a success (its share is not drained), and the run worker itself
marks the run CANCELED (run monitoring, which would end a run stuck in CANCELING after its cancel timeout,
is not running here). The deadlines only keep a broken run from hanging the suite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster._grpc.types import ExecuteRunArgs

from book_assets.db.connection import Database
from book_assets.defs.crawl.assets import crawl
from book_assets.defs.crawl.checks import BOOK_CHECKS, LISTING_CHECKS
from book_assets.defs.crawl.fan_out import crawl_run_config, queue_jobs
from book_assets.defs.resources import DatabaseResource, FetcherResource, SchedulingResource, SiteResource
from book_assets.sandbox.faults import Faults
from book_assets.sandbox.server import SandboxServer
from book_assets.sandbox.testing import SandboxFactory

pytestmark = pytest.mark.slow

#: Every page of the sandbox takes this long: the drain is mid-crawl for minutes when the run is terminated.
LATENCY_S = 0.5
#: Generous bounds that only keep a broken run from hanging the suite; the verdict is read from events.
START_DEADLINE_S = 240.0
STOP_DEADLINE_S = 240.0

RETRY_EVENTS = (dg.DagsterEventType.STEP_UP_FOR_RETRY, dg.DagsterEventType.STEP_RESTARTED)


def crawl_queue_job() -> dg.JobDefinition:
    """The project's ``crawl_queue_job`` under the multiprocess executor, its resources from this test's
    environment: the run worker reconstructs it by this function's name."""
    resources = {
        "database": DatabaseResource(url=os.environ["TEST_TERMINATE_DATABASE_URL"]),
        "site": SiteResource(
            base_url=f"{os.environ['TEST_TERMINATE_SITE']}/",
            allowed_domains=[os.environ["TEST_TERMINATE_HOST"]],
            min_interval_s=0,
        ),
        "fetcher": FetcherResource(fetch_mode="http", workers=2, concurrency=2),
        "scheduling": SchedulingResource(),
    }
    definitions = dg.Definitions(
        assets=[crawl],
        asset_checks=[*LISTING_CHECKS, *BOOK_CHECKS],
        jobs=queue_jobs("multiprocess"),
        resources=resources,
    )
    return definitions.resolve_job_def("crawl_queue_job")


@pytest.fixture
def slow_site(sandbox_factory: SandboxFactory) -> SandboxServer:
    return sandbox_factory(faults=Faults(latency_s=LATENCY_S))


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[dg.DagsterInstance]:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        yield instance


def _wait(what: str, predicate: Callable[[], Any], deadline_s: float, worker: subprocess.Popen[bytes]) -> Any:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        if worker.poll() is not None and not predicate():
            pytest.fail(f"the run worker exited ({worker.returncode}) before {what}")
        time.sleep(0.5)
    pytest.fail(f"no {what} within {deadline_s:.0f}s")


def _event_types(instance: dg.DagsterInstance, run_id: str) -> list[dg.DagsterEventType]:
    return [e.dagster_event.event_type for e in instance.all_logs(run_id) if e.dagster_event is not None]


@pytest.mark.parametrize(
    "step_per_worker",
    [
        pytest.param(False, id="one_drain_step_with_worker_processes"),
        pytest.param(True, id="a_drain_step_per_worker_in_its_process"),
    ],
)
def test_a_terminated_crawl_run_is_canceled_without_asking_for_a_step_retry(
    db: Database,
    database_url: str,
    slow_site: SandboxServer,
    instance: dg.DagsterInstance,
    tmp_path: Path,
    step_per_worker: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = {
        **os.environ,
        "TEST_TERMINATE_DATABASE_URL": database_url,
        "TEST_TERMINATE_SITE": slow_site.url,
        "TEST_TERMINATE_HOST": slow_site.host,
    }
    for name in ("TEST_TERMINATE_DATABASE_URL", "TEST_TERMINATE_SITE", "TEST_TERMINATE_HOST"):
        monkeypatch.setenv(name, env[name])  # the job is built here too, to create the run
    recon = dg.reconstructable(crawl_queue_job)
    job = recon.get_definition()
    run = instance.create_run_for_job(
        job_def=job,
        run_config=crawl_run_config(step_per_worker=step_per_worker),
        job_code_origin=recon.get_python_origin(),
    )
    command = ExecuteRunArgs(
        job_origin=recon.get_python_origin(), run_id=run.run_id, instance_ref=instance.get_ref()
    ).get_command_args()
    log = (tmp_path / "run_worker.log").open("w")
    worker = subprocess.Popen(
        [sys.executable, "-m", *command], env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT
    )
    try:

        def drain_crawling() -> bool:
            started = [
                e.step_key
                for e in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_START)
                if e.step_key is not None and e.step_key.startswith("crawl.drain_queue")
            ]
            pages = db.query("SELECT count(*) AS n FROM tasks WHERE status = 'completed'")[0]["n"]
            return bool(started) and pages >= 3

        _wait("drain step crawling", drain_crawling, START_DEADLINE_S, worker)

        # What the DockerRunLauncher's terminate does: the run is CANCELING, then its worker gets SIGTERM.
        instance.report_run_canceling(instance.get_run_by_id(run.run_id))  # type: ignore[arg-type]
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=STOP_DEADLINE_S)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(timeout=30)
        log.close()

    events = _event_types(instance, run.run_id)
    retries = [e for e in events if e in RETRY_EVENTS]
    assert not retries, f"a terminated run's step asked for a retry: {retries}"
    drained = [
        e.step_key
        for e in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_SUCCESS)
        if e.step_key is not None and e.step_key.startswith("crawl.drain_queue")
    ]
    assert not drained, f"a drain step stopped by the termination ended as a success: {drained}"
    ended = instance.get_run_by_id(run.run_id)
    assert ended is not None
    assert ended.status == dg.DagsterRunStatus.CANCELED, (
        ended.status,
        (tmp_path / "run_worker.log").read_text()[-3000:],
    )
