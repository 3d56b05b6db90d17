"""PostgreSQL killed with SIGKILL while workers claim: after crash recovery no lease token and no politeness
slot that a worker was given is ever given again (claims commit synchronously, so an acknowledged claim is
in the WAL before the worker hears of it)."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import psutil
import pytest

from book_assets.db import embedded
from book_assets.db.connection import Database
from book_assets.db.migrations import migrate
from book_assets.queue import NewTask, TaskQueue
from book_assets_tests.reliability.conftest import wait_until

pytestmark = pytest.mark.chaos

INTERVAL_S = 0.005

#: Claims tasks for ever and writes every lease it was handed (id, token, slot) to a file, one line each.
CLAIMER = """
import json, sys, time
from book_assets.db.connection import Database
from book_assets.db.migrations import migrate
from book_assets.queue import TaskQueue
queue = TaskQueue(Database(sys.argv[1], reconnect_for_s=120), task_types=["detail"], lease_s=600,
                  default_interval_s=INTERVAL_S)
with open(sys.argv[2], "a", buffering=1) as out:
    while True:
        result = queue.claim(sys.argv[3], 4)
        for t in result.tasks:
            out.write(json.dumps([t.id, t.lease_token, t.slot_at.timestamp() if t.slot_at else None]) + "\\n")
        if not result.tasks:
            time.sleep(min(result.retry_in_s or 0.01, 0.05))
""".replace("INTERVAL_S", str(INTERVAL_S))


def _leases(folder: Path) -> list[tuple[int, int, float]]:
    rows = []
    for path in folder.glob("claims-*.jsonl"):
        for line in path.read_text().splitlines():
            if line.strip():
                task_id, token, slot = json.loads(line)
                rows.append((task_id, token, slot))
    return rows


def _server(pgdata: Path) -> psutil.Process:
    pid = embedded.status(pgdata).pid
    assert pid is not None
    return psutil.Process(pid)


def _stall_wal_writer(pgdata: Path) -> None:
    """SIGSTOP the WAL writer, the process that writes out asynchronously committed transactions."""
    (writer,) = [p for p in _server(pgdata).children() if "walwriter" in " ".join(p.cmdline())]
    writer.send_signal(signal.SIGSTOP)


def _kill_server(pgdata: Path) -> None:
    """SIGKILL the postmaster and every backend at once: no shutdown checkpoint, no WAL flush."""
    server = _server(pgdata)
    for proc in [*server.children(recursive=True), server]:
        with contextlib.suppress(psutil.NoSuchProcess):  # a backend that was exiting anyway
            proc.send_signal(signal.SIGKILL)
    psutil.wait_procs([server], timeout=30)


def test_a_killed_postmaster_never_hands_out_a_lease_token_or_a_politeness_slot_twice(
    private_database: tuple[Path, str], tmp_path: Path
) -> None:
    pgdata, url = private_database
    db = Database(url)
    migrate(db)
    queue = TaskQueue(db, task_types=["detail"], default_interval_s=INTERVAL_S)
    queue.enqueue_many([NewTask("detail", {"url": f"http://books.example/{i}"}) for i in range(20_000)])
    db.close()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIMER, url, str(tmp_path / f"claims-{i}.jsonl"), f"c{i}"], cwd=tmp_path
        )
        for i in range(2)
    ]
    try:
        assert wait_until(lambda: len(_leases(tmp_path)) >= 300, 60)
        # The WAL writer stalls (a process like any other) while claims go on, then the server dies:
        # whatever was acknowledged without being written to the WAL is lost in the crash.
        _stall_wal_writer(pgdata)
        stalled_at = len(_leases(tmp_path))
        assert wait_until(lambda: len(_leases(tmp_path)) >= stalled_at + 100, 60)
        _kill_server(pgdata)
        before = len(_leases(tmp_path))
        embedded.up(pgdata)
        assert wait_until(lambda: len(_leases(tmp_path)) >= before + 300, 120)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=30)
    leases = _leases(tmp_path)
    tokens = [token for _, token, _ in leases]
    assert len(tokens) == len(set(tokens)), f"{len(tokens) - len(set(tokens))} lease tokens handed out twice"
    slots = sorted(slot for _, _, slot in leases if slot is not None)
    closest = min(b - a for a, b in pairwise(slots))
    assert closest >= INTERVAL_S * 0.999, f"two request slots {closest * 1000:.2f} ms apart (interval 5 ms)"
    print(f"\n{len(leases)} leases, {before} before the kill; closest slots {closest * 1000:.2f} ms apart")
