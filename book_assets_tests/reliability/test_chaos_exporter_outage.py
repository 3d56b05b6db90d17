"""The queue exporter while PostgreSQL is down or frozen (a private cluster): it answers ``queue_up 0`` within
its bound, so Prometheus stores the outage within its scrape timeout and BookPipelineQueueUnreadable can fire."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg2
import pytest

from book_assets.db import embedded
from book_assets.db.embedded import free_port
from book_assets_tests.conftest import child_env

pytestmark = pytest.mark.chaos

#: Twice Prometheus' default scrape timeout (10 s): a generous client, well under the 60 s a reconnecting
#: read would hold the scrape (and a read of a frozen server holds it for ever).
CLIENT_TIMEOUT_S = 20.0
UP, DOWN = "book_pipeline_queue_up 1.0", "book_pipeline_queue_up 0.0"


@contextmanager
def _exporter(url: str, cwd: Path) -> Iterator[str]:
    """``book-pipeline metrics`` on the database ``url``: its scrape URL, the process stopped at the end."""
    port = free_port()
    command = [sys.executable, "-m", "book_assets.cli", "metrics", "--port", str(port)]
    process = subprocess.Popen(command, env=child_env(DATABASE_URL=url), cwd=cwd, stderr=subprocess.PIPE, text=True)
    scrape = f"http://127.0.0.1:{port}/metrics"
    try:
        assert process.stderr is not None
        assert f"queue metrics on {scrape}" in process.stderr.readline()
        yield scrape
    finally:
        process.terminate()
        assert process.wait(timeout=60) == 0


def _scrape(url: str, timeout_s: float = CLIENT_TIMEOUT_S) -> str:
    return httpx.get(url, timeout=timeout_s).text


def test_the_queue_exporter_answers_queue_up_0_while_postgresql_is_stopped(
    private_database: Any, tmp_path: Path
) -> None:
    pgdata, url = private_database
    with _exporter(url, tmp_path) as scrape:
        assert UP in _scrape(scrape, 60)
        embedded.down(pgdata)
        assert DOWN in _scrape(scrape) and DOWN in _scrape(scrape)
        embedded.up(pgdata)
        assert UP in _scrape(scrape, 60)


def test_concurrent_scrapes_answer_queue_up_0_while_the_exporters_session_is_frozen(
    private_database: Any, tmp_path: Path
) -> None:
    _pgdata, url = private_database
    with _exporter(url, tmp_path) as scrape:
        assert UP in _scrape(scrape, 60)
        with psycopg2.connect(url, connect_timeout=10) as conn, conn.cursor() as cur:
            cur.execute(  # the exporter's session: the only other client of this private database
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
                " AND backend_type = 'client backend'"
            )
            backends = [pid for (pid,) in cur.fetchall()]
        conn.close()
        assert len(backends) == 1, backends
        (backend,) = backends
        os.kill(backend, signal.SIGSTOP)  # the server process of the exporter's session: its read never returns
        try:
            with ThreadPoolExecutor(2) as pool:
                answers = list(pool.map(lambda _: _scrape(scrape), range(2)))
        finally:
            os.kill(backend, signal.SIGCONT)
        assert all(DOWN in answer for answer in answers)
        assert UP in _scrape(scrape, 60)
