"""Dagster's default run launcher, with the health check that lets run monitoring see a run worker die.

dagster.yaml names :class:`RunLauncher` as the instance's run launcher (the compose stack's instance names
``DockerRunLauncher``, which checks its containers). Why: ``DefaultRunLauncher`` starts each run worker as a
process of a code server and has no health check, so run monitoring only times a STARTED run out at its
``dagster/max_runtime`` (20 hours for a crawl). Until then only the code server that started the run worker
notices its death, and when the code server dies with it (the daemon SIGKILLed, the host rebooted) nothing
does: the run stays STARTED, holding its pool slots and a place among the runs the queue lets run at once.

The check: a run launched through a code server on this host's loopback is tagged with the host's name; its
run worker is the process its ``RUN_START`` event names (the pid), and it is alive while a process of that
pid exists, is not a zombie and was created before that event (after a reboot the pid may be another
process's). A dead run worker makes run monitoring mark the run failed (its reason not a step's, so
``run_retries`` retries it) and, ``free_slots_after_run_end_seconds`` later, free its pool slots. A run this
host cannot judge (launched elsewhere, or not yet started) is reported running and left to its timeouts.
"""

from __future__ import annotations

import json
import socket

import dagster as dg
import psutil
from dagster._core.launcher import CheckRunHealthResult, LaunchRunContext, WorkerStatus
from dagster._core.storage.tags import GRPC_INFO_TAG

__all__ = ["HOST_TAG", "RunLauncher", "worker_alive"]

#: Run tag: the host whose process the run worker is (set when it was launched through a loopback code server).
HOST_TAG = "book-pipeline/run-worker-host"
#: Code server hosts on the launcher's own machine.
LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})
#: A run worker is created before its RUN_START event; this much later still counts (clock granularity).
CREATE_SLACK_S = 1.0


def worker_alive(pid: int, started_at: float) -> bool:
    """True while process ``pid`` exists, is no zombie and was created by ``started_at`` (a Unix time)."""
    try:
        process = psutil.Process(pid)
        return process.status() != psutil.STATUS_ZOMBIE and process.create_time() <= started_at + CREATE_SLACK_S
    except psutil.NoSuchProcess:
        return False


class RunLauncher(dg.DefaultRunLauncher):
    """``DefaultRunLauncher`` whose run workers on this host are checked by run monitoring (see the module)."""

    def launch_run(self, context: LaunchRunContext) -> None:
        super().launch_run(context)
        run = self._instance.get_run_by_id(context.dagster_run.run_id)
        info = json.loads(run.tags.get(GRPC_INFO_TAG, "{}")) if run is not None else {}
        if info.get("socket") or info.get("host") in LOOPBACK:
            self._instance.add_run_tags(context.dagster_run.run_id, {HOST_TAG: socket.gethostname()})

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        host = run.tags.get(HOST_TAG)
        if host != socket.gethostname():
            where = f"on host {host}" if host else "through a code server on another host"
            return CheckRunHealthResult(WorkerStatus.RUNNING, f"run worker {where}: not checked here")
        records = self._instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.RUN_START, limit=1).records
        event = records[0].event_log_entry if records else None
        pid = event.dagster_event.pid if event is not None and event.dagster_event is not None else None
        if event is None or pid is None:
            return CheckRunHealthResult(WorkerStatus.RUNNING, "the run worker has not started yet")
        if worker_alive(pid, event.timestamp):
            return CheckRunHealthResult(WorkerStatus.RUNNING, f"run worker {pid} is running", run_worker_id=str(pid))
        return CheckRunHealthResult(
            WorkerStatus.FAILED,
            f"run worker {pid} on {host} is gone (its code server or the host stopped)",
            run_worker_id=str(pid),
        )
