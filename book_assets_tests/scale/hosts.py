"""Several hosts on one machine: network namespaces joined by a bridge, and a PostgreSQL they can reach.

Why namespaces: the design promises that workers on different machines share one queue and one politeness
budget per domain, and a worker process beside another on the same loopback proves less than it seems (one
network stack, one ``127.0.0.1``). A network namespace is a host as far as networking goes: its own
interfaces, addresses and routes. Each host here gets a veth pair whose other end is on a bridge in the root
namespace; the bridge carries the one address the root namespace serves PostgreSQL and the sandbox on.

The run makes everything it uses and removes it again (``close``, also from ``atexit``): the bridge, the
namespaces (whose veth ends go with them) and every process started inside them. Namespaces get no default
route, so no traffic leaves the subnet the run chose; names carry the creating process's pid
(``bp<pid>h<i>``, ``bp<pid>br``), and leftovers of a run whose process is gone (killed before its clean-up)
are removed by the next run. Needs root and iproute2's ``ip`` (:func:`unavailable_reason` says why not).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import psycopg2

#: The private /16 the run picks its /24 from (10.213.<n>.0/24, bridge .1, hosts .11, .12, ...).
SUBNET_PREFIX = "10.213"
#: Bound on the hosts one run may create.
MAX_HOSTS = 8
#: How long to wait for one ``ip`` command.
IP_TIMEOUT_S = 20.0
_OURS = re.compile(r"^bp(\d+)(?:h\d+|br)$")


class HostsError(RuntimeError):
    """A namespace, link or server of the run could not be made."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S, stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        raise HostsError(f"ip {' '.join(args)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


@functools.cache
def unavailable_reason() -> str | None:
    """Why this machine cannot make namespace hosts (not root, no ``ip``, namespaces refused); None if it can."""
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    if shutil.which("ip") is None:
        return "iproute2's ip is not installed"
    probe = f"bp{os.getpid()}h0"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"ip netns add refused: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_leftovers() -> list[str]:
    """Delete namespaces and bridges named by this module for a process that no longer runs; their names."""
    removed = []
    namespaces = [line.split()[0] for line in _ip("netns", "list", check=False).stdout.splitlines() if line.strip()]
    bridges = [
        line.split(":")[1].strip().split("@")[0]
        for line in _ip("-o", "link", "show", "type", "bridge", check=False).stdout.splitlines()
        if line.count(":") >= 2
    ]
    for name in namespaces:
        match = _OURS.match(name)
        if match and not _pid_alive(int(match.group(1))):
            _kill_namespace_processes(name, grace_s=0)
            _ip("netns", "del", name, check=False)
            removed.append(name)
    for name in bridges:
        match = _OURS.match(name)
        if match and not _pid_alive(int(match.group(1))):
            _ip("link", "del", name, check=False)
            removed.append(name)
    return removed


def _kill_namespace_processes(namespace: str, *, grace_s: float) -> None:
    """End the processes inside ``namespace`` (only this run's own: the namespace is ours): TERM, then KILL."""

    def pids() -> list[int]:
        out = _ip("netns", "pids", namespace, check=False).stdout
        return [int(p) for p in out.split() if p.isdigit()]

    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = pids()
        if not alive:
            return
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + (grace_s if sig == signal.SIGTERM else 5.0)
        while pids() and time.monotonic() < deadline:
            time.sleep(0.05)


def _used_third_octets() -> set[int]:
    text = _ip("-o", "addr", check=False).stdout + _ip("route", check=False).stdout
    return {int(m) for m in re.findall(rf"\b{re.escape(SUBNET_PREFIX)}\.(\d+)\.", text)}


@dataclass(frozen=True)
class Host:
    """One namespace host: its namespace name and its address on the bridge."""

    name: str
    address: str

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside this host's namespace."""
        return ["ip", "netns", "exec", self.name, *argv]


class NamespaceHosts:
    """``with NamespaceHosts(3) as net:`` — ``net.hosts`` (each its namespace and address), ``net.gateway``.

    The gateway is the bridge's address in the root namespace: bind servers there for the hosts to reach.
    """

    def __init__(self, count: int) -> None:
        if not 1 <= count <= MAX_HOSTS:
            raise ValueError(f"between 1 and {MAX_HOSTS} hosts, not {count}")
        self.count = count
        pid = os.getpid()
        self.bridge = f"bp{pid}br"
        self._prefix = f"bp{pid}"
        self.hosts: list[Host] = []
        self.gateway = ""
        self._closed = False

    def __enter__(self) -> NamespaceHosts:
        remove_leftovers()
        atexit.register(self.close)
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _create(self) -> None:
        used = _used_third_octets()
        free = [n for n in range(20, 250) if n not in used]
        if not free:
            raise HostsError(f"no free /24 left in {SUBNET_PREFIX}.0.0/16")
        octet = free[os.getpid() % len(free)]
        subnet = f"{SUBNET_PREFIX}.{octet}"
        self.gateway = f"{subnet}.1"
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i in range(1, self.count + 1):
            host = Host(name=f"{self._prefix}h{i}", address=f"{subnet}.{10 + i}")
            outer, inner = f"{self._prefix}v{i}", f"{self._prefix}p{i}"
            _ip("netns", "add", host.name)
            self.hosts.append(host)
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            _ip("link", "set", inner, "netns", host.name)
            _ip("link", "set", outer, "master", self.bridge, "up")
            _ip("-n", host.name, "addr", "add", f"{host.address}/24", "dev", inner)
            _ip("-n", host.name, "link", "set", inner, "up")
            _ip("-n", host.name, "link", "set", "lo", "up")
        self._wait_reachable()

    def _wait_reachable(self, timeout_s: float = 10.0) -> None:
        """Until each host can open a TCP connection to the gateway (links come up asynchronously)."""
        with socket.create_server((self.gateway, 0)) as listener:
            port = listener.getsockname()[1]
            probe = f"import socket; socket.create_connection(('{self.gateway}', {port}), timeout=1).close()"
            for host in self.hosts:
                deadline = time.monotonic() + timeout_s
                while True:
                    done = subprocess.run(
                        host.command([sys.executable, "-c", probe]), capture_output=True, text=True, timeout=30
                    )
                    if done.returncode == 0:
                        break
                    if time.monotonic() > deadline:
                        raise HostsError(f"host {host.name} cannot reach {self.gateway}: {done.stderr.strip()}")
                    time.sleep(0.1)

    def close(self) -> None:
        """Stop every process in the hosts, delete the namespaces and the bridge. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for i, host in enumerate(self.hosts, 1):
            _kill_namespace_processes(host.name, grace_s=5.0)
            _ip("link", "del", f"{self._prefix}v{i}", check=False)
            _ip("netns", "del", host.name, check=False)
        _ip("link", "del", self.bridge, check=False)
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)


def _postgres_bin() -> Path | None:
    """The newest Debian PostgreSQL server's bin folder (``/usr/lib/postgresql/<major>/bin``), if any."""
    found = [p.parent for p in Path("/usr/lib/postgresql").glob("*/bin/postgres")]
    return max(found, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0) if found else None


def postgres_unavailable_reason() -> str | None:
    """Why :class:`PostgresOnAddress` cannot run here; None if it can."""
    if _postgres_bin() is None:
        return "no PostgreSQL server binaries under /usr/lib/postgresql (Debian's postgresql package)"
    return None


class PostgresOnAddress:
    """A throw-away PostgreSQL cluster listening on one address only, password (SCRAM) for one subnet only.

    The hosts reach the root namespace only through the bridge, and the project's embedded server listens on
    127.0.0.1, so the run starts a cluster of its own on the bridge address. As root it runs as ``nobody``
    (PostgreSQL refuses root) in a temporary folder; ``close`` stops it (fast shutdown) and deletes it.
    """

    def __init__(self, address: str, *, allow: str, database: str = "bookpipeline") -> None:
        self.address = address
        self.allow = allow
        self.database = database
        self.password = secrets.token_urlsafe(18)
        self.port = 0
        self._root: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def admin_url(self) -> str:
        return self.url_for("postgres")

    @property
    def url(self) -> str:
        return self.url_for(self.database)

    def url_for(self, database: str) -> str:
        return f"postgresql://postgres:{self.password}@{self.address}:{self.port}/{database}"

    def __enter__(self) -> PostgresOnAddress:
        atexit.register(self.close)
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _as_server(self) -> dict[str, object]:
        if os.geteuid() != 0:
            return {}
        return {"user": "nobody", "group": "nogroup", "extra_groups": []}

    def _chown(self, path: Path) -> None:
        if os.geteuid() == 0:
            shutil.chown(path, "nobody", "nogroup")

    def _start(self) -> None:
        bindir = _postgres_bin()
        if bindir is None:
            raise HostsError(postgres_unavailable_reason() or "no PostgreSQL")
        self._root = Path(tempfile.mkdtemp(prefix="book-pipeline-hosts-pg-"))
        self._root.chmod(0o755)
        data = self._root / "data"
        data.mkdir(mode=0o700)
        self._chown(data)
        pwfile = self._root / "pw"
        pwfile.write_text(self.password + "\n")
        pwfile.chmod(0o600)
        self._chown(pwfile)
        done = subprocess.run(
            [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--encoding=utf8", "--no-sync",
             "--auth-local=scram-sha-256", "--auth-host=scram-sha-256", f"--pwfile={pwfile}"],
            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=self._root,
            **self._as_server(),  # type: ignore[arg-type]
        )  # fmt: skip
        pwfile.unlink()
        if done.returncode != 0:
            raise HostsError(f"initdb failed: {done.stderr.strip().splitlines()[-1:]}")
        (data / "pg_hba.conf").write_text(
            "local all all scram-sha-256\n"
            f"host all all {self.allow} scram-sha-256\n"
        )  # fmt: skip
        with socket.create_server((self.address, 0)) as probe:
            self.port = probe.getsockname()[1]
        with (data / "postgresql.conf").open("a") as fh:
            fh.write(
                f"listen_addresses = '{self.address}'\nport = {self.port}\nunix_socket_directories = '{data}'\n"
                "max_connections = 200\nshared_buffers = '128MB'\nlog_min_messages = warning\n"
            )
        log = (self._root / "server.log").open("wb")
        self._proc = subprocess.Popen(
            [str(bindir / "postgres"), "-D", str(data)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=self._root,
            start_new_session=True, **self._as_server(),  # type: ignore[arg-type]
        )  # fmt: skip
        log.close()
        self._wait_ready()
        self.create_database(self.database)

    def _wait_ready(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                psycopg2.connect(self.admin_url, connect_timeout=2).close()
                return
            except psycopg2.OperationalError as exc:
                assert self._proc is not None and self._root is not None
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    tail = (self._root / "server.log").read_text(errors="replace").strip().splitlines()[-3:]
                    raise HostsError(f"PostgreSQL on {self.address} did not start: {exc} {' | '.join(tail)}") from None
                time.sleep(0.1)

    def create_database(self, name: str) -> str:
        """(Re)create database ``name`` empty; its URL."""
        conn = psycopg2.connect(self.admin_url, connect_timeout=10)
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            conn.close()
        return self.url_for(name)

    def close(self) -> None:
        """Fast shutdown (SIGINT), SIGKILL after 20 s; the folder is deleted. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)
