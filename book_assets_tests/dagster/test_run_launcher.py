"""The run launcher's health check: which process counts as a run's live run worker (real processes)."""

import os
import subprocess
import sys
import time

import psutil

from book_assets.dagster_launcher import worker_alive


def test_a_running_process_started_before_the_run_is_its_live_worker() -> None:
    assert worker_alive(os.getpid(), time.time())


def test_a_run_worker_that_exited_is_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    started = time.time()
    child.wait()
    assert not worker_alive(child.pid, started)


def test_a_pid_taken_by_a_process_created_after_the_run_started_is_not_its_worker() -> None:
    # After a reboot the dead worker's pid may belong to a new process: created after the run's RUN_START.
    assert not worker_alive(os.getpid(), psutil.Process().create_time() - 60)
