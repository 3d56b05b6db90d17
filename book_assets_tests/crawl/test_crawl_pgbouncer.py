"""A full crawl through PgBouncer in transaction pooling mode: the pipeline keeps no session state.

PgBouncer (Debian's ``pgbouncer``) is started on a free port in front of the test database, with
``pool_mode = transaction``: every transaction may get another server connection, and startup options are
refused. ``book-pipeline crawl --workers 2`` runs with ``DATABASE_URL`` at PgBouncer and
``DATABASE_DIRECT_URL`` at the server (migrations take their advisory lock there).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import psycopg2
import pytest

from book_assets.db.connection import Database
from book_assets.db.embedded import free_port
from book_assets.store.books import book_counts
from book_assets_tests.conftest import child_env

pytestmark = pytest.mark.slow

PGBOUNCER = [shutil.which("pgbouncer"), "/usr/sbin/pgbouncer"]
#: When we are root: PgBouncer refuses to run as root, so it runs as the embedded server's user.
RUN_AS = "pgserver"


def _pgbouncer() -> str:
    for candidate in PGBOUNCER:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.skip("pgbouncer not found (Debian package pgbouncer): cannot test a crawl through a pooler")


def _config(server: Any, port: int, folder: Path) -> str:
    return f"""[databases]
* = host={server.hostname} port={server.port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
pool_mode = transaction
auth_type = scram-sha-256
auth_file = {folder / "userlist.txt"}
admin_users = {server.username}
max_client_conn = 200
default_pool_size = 8
logfile = {folder / "pgbouncer.log"}
pidfile = {folder / "pgbouncer.pid"}
"""


@pytest.fixture
def pgbouncer(database_url: str) -> Iterator[str]:
    """PgBouncer in transaction mode in front of the test database; yields the URL that goes through it."""
    binary = _pgbouncer()
    server = urlsplit(database_url)
    folder = Path(tempfile.mkdtemp(prefix="book-pipeline-pgbouncer-"))  # readable by RUN_AS, unlike tmp_path
    port = free_port()
    (folder / "userlist.txt").write_text(f'"{server.username}" "{unquote(server.password or "")}"\n')
    (folder / "pgbouncer.ini").write_text(_config(server, port, folder))
    command = [binary, str(folder / "pgbouncer.ini")]
    if os.geteuid() == 0:
        shutil.chown(folder, RUN_AS)
        for path in folder.iterdir():
            shutil.chown(path, RUN_AS)
        command[1:1] = ["-u", RUN_AS]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    netloc = f"{server.username}:{server.password}@127.0.0.1:{port}"
    url = urlunsplit(server._replace(netloc=netloc))
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "pgbouncer exited"
            try:
                psycopg2.connect(url, connect_timeout=2).close()
                break
            except psycopg2.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        shutil.rmtree(folder, ignore_errors=True)


def _transactions_through(url: str) -> int:
    """Transactions PgBouncer has passed to the server so far (its admin console's SHOW STATS)."""
    parts = urlsplit(url)
    conn = psycopg2.connect(urlunsplit(parts._replace(path="/pgbouncer")), connect_timeout=5)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW STATS")
            names = [c.name for c in cur.description or ()]
            rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    finally:
        conn.close()
    return sum(int(r["total_xact_count"]) for r in rows if r["database"] == parts.path.strip("/"))


def test_a_full_crawl_through_pgbouncer_in_transaction_mode_stores_every_book(
    db: Database, database_url: str, pgbouncer: str, sandbox: Any, tmp_path: Path
) -> None:
    env = child_env(DATABASE_URL=pgbouncer, DATABASE_DIRECT_URL=database_url, BOOK_PIPELINE_MIN_INTERVAL_S="0")
    command = [sys.executable, "-m", "book_assets.cli", "crawl", "--base-url", sandbox.url + "/", "--fetch", "http"]
    crawl = subprocess.run(
        [*command, "--workers", "2", "--concurrency", "4", "--no-progress"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert "Traceback" not in crawl.stderr, crawl.stderr[-3000:]
    counts = book_counts(db)
    assert (counts["total"], counts["unique_urls"], counts["with_html"]) == (1000, 1000, 1000), crawl.stdout
    left = db.query("SELECT count(*) AS n FROM tasks WHERE status <> 'completed'")[0]["n"]
    assert left == 0
    # 1,081 pages' claims, completions and checks: hundreds of transactions however they are batched (a
    # crawl that went around PgBouncer leaves only the set-up's handful).
    assert _transactions_through(pgbouncer) > 300, "the crawl's transactions did not go through PgBouncer"
