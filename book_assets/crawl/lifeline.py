"""A process's lifeline to the process that started it: SIGTERM to itself once that process is gone.

A crawl's worker processes are started by a drain (the CLI's, or a Dagster step's), which a Dagster run
worker started in turn. When one of them dies without a word (SIGKILL, the OOM killer, a lost node), its
children would keep crawling: leases held, slots of the site's politeness spent, books written for a run the
orchestrator already marked failed and will run again. Each such child watches the process that started it
instead and, once it is gone, sends itself SIGTERM: a worker then stops claiming, finishes or releases its
pages within its grace period, and exits (``Worker.run``), and a drain interrupted so tells its own workers
to do the same (``Drain``).

The watch waits on ``multiprocessing``'s parent sentinel (a pipe whose write end only the starting process
holds, so it reads end-of-file the moment that process is gone), on a daemon thread. Not the parent pid:
a worker forked by a fork server (``drain.worker_context``) is the fork server's child, and the fork server
lives as long as any worker does. Not Linux's ``PR_SET_PDEATHSIG``, which fires when the *thread* that
started the process ends, not the process.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from multiprocessing.process import BaseProcess

_following: threading.Thread | None = None


def follow_parent() -> threading.Thread | None:
    """In a process started by ``multiprocessing`` (a drain's worker, a step of Dagster's multiprocess
    executor): SIGTERM to itself once the process that started it has gone. Returns the watch thread (one per
    process, however often called), or None elsewhere: a process that a shell, a service manager or Dagster's
    code server started keeps its own lifetime."""
    global _following
    parent = multiprocessing.parent_process()
    if parent is None:
        return None
    if _following is None or not _following.is_alive():
        _following = stop_with(parent)
    return _following


def stop_with(parent: BaseProcess) -> threading.Thread:
    """Send this process SIGTERM once ``parent`` has gone (returns the watch thread)."""

    def watch() -> None:
        parent.join()  # returns when the parent's sentinel reads end-of-file: the parent is gone
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=watch, name="book-pipeline lifeline", daemon=True)
    thread.start()
    return thread
