"""Run long-lived child programs (dagster-webserver, dagster-daemon) that end with their parent.

Why: a SIGTERM (``kill``, a service manager, a container stop) ends Python at once, without ``finally``
blocks, so children started with a plain ``Popen`` — and the code servers *they* start — would keep running,
holding the port and the database. Here each child gets a process group of its own, and SIGTERM, SIGINT or
SIGHUP to the parent, or the exit of any one child, stops every group: SIGTERM first, SIGKILL after
``grace_s``. A group, not a pid, because the webserver and the daemon each spawn gRPC code servers that would
otherwise be orphaned.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class _Stop(Exception):
    """Raised in the main thread by a stop signal."""


def _raise_stop(signum: int, _frame: FrameType | None) -> None:
    raise _Stop(signum)


def run_together(
    commands: Sequence[Sequence[str]],
    env: Mapping[str, str],
    *,
    grace_s: float = 20.0,
    status_when_stopped: int | None = None,
) -> int:
    """Start every command, wait until a stop signal or until one exits, then stop them all.

    Returns the exit status of the first child that ended by itself; when a signal stopped them,
    ``status_when_stopped``, or by default the shell's ``128 + signal number``.
    """
    previous = {sig: signal.signal(sig, _raise_stop) for sig in STOP_SIGNALS}
    procs: list[subprocess.Popen[bytes]] = []
    status = 0
    try:
        for command in commands:
            procs.append(subprocess.Popen(list(command), env=dict(env), process_group=0))
        while True:
            ended = [p for p in procs if p.poll() is not None]
            if ended:
                status = ended[0].returncode or 0
                break
            time.sleep(0.2)
    except _Stop as stop:
        status = 128 + int(stop.args[0]) if status_when_stopped is None else status_when_stopped
    finally:
        # Our own signals during the shutdown must not cut it short.
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        stop_groups(procs, grace_s)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return status


def stop_groups(procs: Sequence[subprocess.Popen[bytes]], grace_s: float) -> None:
    """SIGTERM each child's process group, SIGKILL what is left after ``grace_s``, and reap the children."""
    for proc in procs:
        _signal_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    for proc in procs:
        # Also for children that exited: their own children (code servers) may still be in the group.
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
