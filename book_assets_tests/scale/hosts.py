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

from book_assets.db import embedded

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


class PostgresOnAddress:
    """A throw-away cluster of the project's embedded PostgreSQL listening on one address only, password (SCRAM)
    for one subnet only.

    The hosts reach the root namespace only through the bridge, and the project's own cluster listens on
    127.0.0.1, so the run starts a cluster of its own on the bridge address, in a temporary folder, through
    :func:`book_assets.db.embedded.up` (as root the server runs as its user, as every embedded cluster does);
    ``close`` stops it (fast shutdown) and deletes the folder.
    """

    def __init__(self, address: str, *, allow: str, database: str = "bookpipeline") -> None:
        self.address = address
        self.allow = allow
        self.database = database
        self.password = ""
        self.port = 0
        self._root: Path | None = None

    @property
    def admin_url(self) -> str:
        return self.url_for("postgres")

    @property
    def url(self) -> str:
        return self.url_for(self.database)

    def url_for(self, database: str) -> str:
        # The embedded cluster's password is URL-safe text (secrets.token_urlsafe): no quoting needed.
        return f"postgresql://{embedded.SUPERUSER}:{self.password}@{self.address}:{self.port}/{database}"

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

    def _start(self) -> None:
        self._root = Path(tempfile.mkdtemp(prefix="book-pipeline-hosts-pg-"))
        self._root.chmod(0o755)  # the server's own user (as root) reaches its cluster folder inside
        pgdata = self._root / "pg"
        state = embedded.up(pgdata, address=self.address, allow=self.allow)
        assert state.port is not None
        self.port = state.port
        self.password = embedded.password_file(pgdata).read_text().strip()
        self.create_database(self.database)

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
        """Fast shutdown, then the folder is deleted. Idempotent."""
        root, self._root = self._root, None
        if root is not None:
            with contextlib.suppress(embedded.EmbeddedError, subprocess.TimeoutExpired):
                embedded.down(root / "pg", timeout=20)
            shutil.rmtree(root, ignore_errors=True)
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)
