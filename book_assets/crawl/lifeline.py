"""A process's lifeline to the process that started it: SIGTERM to itself once that parent is gone.

A crawl's worker processes are started by a drain (the CLI's, or a Dagster step's), which a Dagster run
worker started in turn. When one of them dies without a word (SIGKILL, the OOM killer, a lost node), its
children are adopted by init and would keep crawling: leases held, slots of the site's politeness spent,
books written for a run the orchestrator already marked failed and will run again. Each such child watches
its parent instead and, once the parent's pid is no longer its parent, sends itself SIGTERM: a worker then
stops claiming, finishes or releases its pages within its grace period, and exits (``Worker.run``), and a
drain interrupted so tells its own workers to do the same (``Drain``).

The watch polls ``os.getppid()`` on a daemon thread (every :data:`POLL_S`) rather than using Linux's
``PR_SET_PDEATHSIG``, which fires when the *thread* that started the process ends, not the process.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from typing import Final

#: How often the watch looks at the parent's pid.
POLL_S: Final = 1.0

_following: threading.Thread | None = None


def follow_parent(poll_s: float = POLL_S) -> threading.Thread | None:
    """In a process started by ``multiprocessing`` (a drain's worker, a step of Dagster's multiprocess
    executor): SIGTERM to itself once its parent has gone. Returns the watch thread (one per process, however
    often called), or None elsewhere: a process that a shell, a service manager or Dagster's code server
    started keeps its own lifetime."""
    global _following
    if multiprocessing.parent_process() is None:
        return None
    if _following is None or not _following.is_alive():
        _following = stop_with_parent(poll_s)
    return _following


def stop_with_parent(poll_s: float = POLL_S) -> threading.Thread:
    """Send this process SIGTERM once the process that is its parent now has gone (returns the watch thread)."""
    parent = os.getppid()

    def watch() -> None:
        stop = threading.Event()
        while not stop.wait(poll_s):
            if os.getppid() != parent:
                os.kill(os.getpid(), signal.SIGTERM)
                return

    thread = threading.Thread(target=watch, name="book-pipeline lifeline", daemon=True)
    thread.start()
    return thread
