"""The compose stack as deployed: the image, the compose layout Dagster documents, and the stack run for real.

The end-to-end test runs scripts/compose_e2e.py (a Docker engine of its own in its own namespaces, base-image
stand-ins when no registry answers, the unchanged Dockerfile and docker-compose.yml, the daily job through the
stack's Dagster, a daemon kill mid-run, Terminate, ``down -v``). The other tests check the files it relies on.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "compose_e2e.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("compose_e2e", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["compose_e2e"] = module
    spec.loader.exec_module(module)
    return module


def _compose() -> dict[str, object]:
    loaded = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_the_compose_instance_is_the_projects_instance_plus_the_docker_run_launcher() -> None:
    project = yaml.safe_load((ROOT / "dagster.yaml").read_text())
    stack = yaml.safe_load((ROOT / "deploy" / "docker" / "dagster.yaml").read_text())
    launcher = stack.pop("run_launcher")
    local = project.pop("run_launcher")
    assert stack == project  # the same storage, queue, pools, monitoring and retries
    assert (local["module"], local["class"]) == ("book_assets.dagster_launcher", "RunLauncher")
    assert (launcher["module"], launcher["class"]) == ("dagster_docker", "DockerRunLauncher")
    config = launcher["config"]
    compose = _compose()
    assert config["network"] == compose["networks"]["default"]["name"]  # type: ignore[index]
    (volume,) = config["container_kwargs"]["volumes"]
    name, path = volume.split(":")
    assert name == compose["volumes"]["pipeline-data"]["name"]  # type: ignore[index]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f"BOOK_PIPELINE_DATA_DIR={path}" in dockerfile
    # Every variable the launcher hands to run containers is set on the services that launch runs.
    app_env = compose["x-app"]["environment"]  # type: ignore[index]
    assert set(config["env_vars"]) <= set(app_env)


def test_webserver_and_daemon_load_the_code_location_from_the_user_code_server() -> None:
    services = _compose()["services"]
    assert isinstance(services, dict)
    workspace = yaml.safe_load((ROOT / "deploy" / "docker" / "workspace.yaml").read_text())
    (entry,) = workspace["load_from"]
    server = entry["grpc_server"]
    code = services["user-code"]
    assert server["host"] == "user-code" and str(server["port"]) in code["command"]
    assert code["environment"]["DAGSTER_CURRENT_IMAGE"] == code["image"]  # runs use the code's image
    for name in ("dagster-webserver", "dagster-daemon"):
        service = services[name]
        assert "/app/deploy/docker/workspace.yaml" in service["command"], name
        assert "/var/run/docker.sock:/var/run/docker.sock" in service["volumes"], name  # launch and terminate
        assert service["depends_on"]["user-code"]["condition"] == "service_healthy", name
    # The local workspace keeps loading the module in-process, for `book-pipeline ui` and `dg dev`.
    local = yaml.safe_load((ROOT / "workspace.yaml").read_text())
    assert local["load_from"][0]["python_module"]["module_name"] == "book_assets.definitions"
    assert set(services["prometheus"]["profiles"]) == set(services["grafana"]["profiles"]) == {"monitoring"}


def test_the_image_is_layered_for_caching_and_runs_unprivileged_under_an_init() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    instructions = re.sub(r"\\\n", " ", re.sub(r"(?m)^\s*#.*\n", "", dockerfile)).splitlines()
    steps = [line for line in instructions if re.match(r"^(RUN|COPY|USER|ENTRYPOINT)\b", line)]
    first = {kind: next(i for i, s in enumerate(steps) if kind in s) for kind in ("chromium", "uv.lock", "book_assets")}
    assert first["chromium"] < first["uv.lock"] < first["book_assets"]  # browser, then the lock, then the code
    assert "playwright install" not in dockerfile  # Debian's headless shell: nothing downloaded at build or run
    assert steps[-2] == "USER app" and "tini" in steps[-1]
    # Every path the Dockerfile copies is let through by .dockerignore, and nothing else of the repository.
    allowed = {line.lstrip("!").rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.startswith("!")}  # fmt: skip
    copied = {p.rstrip("/") for s in steps if s.startswith("COPY") for p in s.split()[1:-1]}
    assert copied == allowed


def test_the_build_proxy_forwards_only_the_registry_ports() -> None:
    script = _script()
    proxy = script._Proxy(("127.0.0.1", 0), script._ProxyHandler)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        replies = []
        for request in (b"CONNECT 127.0.0.1:5432 HTTP/1.1\r\n\r\n", b"GET http://127.0.0.1:22/ HTTP/1.1\r\n\r\n"):
            with socket.create_connection(proxy.server_address, timeout=10) as client:
                client.sendall(request)
                replies.append(client.recv(100))
        assert all(reply.startswith(b"HTTP/1.1 403") for reply in replies), replies
    finally:
        proxy.shutdown()
        proxy.server_close()


def test_postgres_standin_links_are_hydrated_relative_to_their_folder(tmp_path: Path) -> None:
    script = _script()
    lib = tmp_path / "native" / "lib"
    lib.mkdir(parents=True)
    (lib / "libicuuc.so.60.2").write_text("lib")
    (tmp_path / "native" / "pg-symlinks.json").write_text(
        json.dumps([{"source": "native/lib/libicuuc.so.60.2", "target": "native/lib/libicuuc.so.60"}])
    )
    script.hydrate_symlinks(tmp_path)
    link = lib / "libicuuc.so.60"
    assert link.is_symlink() and os.readlink(link) == "libicuuc.so.60.2" and link.read_text() == "lib"


def test_every_service_of_the_projects_image_drops_every_capability_and_gains_no_privilege() -> None:
    services = _compose()["services"]
    assert isinstance(services, dict)
    ours = {name: service for name, service in services.items() if service.get("image") == "book-pipeline:latest"}
    assert {"migrate", "user-code", "dagster-webserver", "dagster-daemon", "worker", "metrics"} <= set(ours)
    for name, service in ours.items():
        assert service.get("cap_drop") == ["ALL"], name
        assert "no-new-privileges:true" in service.get("security_opt", []), name


def test_the_monitoring_profile_the_stack_test_brings_up_is_the_compose_files() -> None:
    """The stand-in is built under the image name the compose file gives Prometheus, the worker service can be
    scaled (no fixed name or host port), and what the test leaves out belongs to the ``monitoring`` profile."""
    script = _script()
    services = _compose()["services"]
    assert isinstance(services, dict)
    assert services["prometheus"]["image"] == script.PROMETHEUS_IMAGE
    worker = services["worker"]
    assert "container_name" not in worker and "ports" not in worker
    monitoring = {name for name, service in services.items() if "monitoring" in service.get("profiles", ())}
    assert set(script.LEFT_OUT) < monitoring


def _waits_for(services: dict[str, dict[str, Any]], name: str) -> set[str]:
    """The services ``name`` is started after, directly or through the ones it depends on."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        depends = services[todo.pop()].get("depends_on") or {}
        for dependency in depends:
            if dependency not in seen:
                seen.add(dependency)
                todo.append(dependency)
    return seen


def test_only_the_migration_mounts_a_fresh_data_volume_every_other_service_waits_for_it() -> None:
    """Docker fills a fresh named volume with the image's files at its first mount; two containers created at
    once both fill it and one fails (``mkdir .../dagster/storage: file exists``). So the migration is the one
    service of the shared data volume that compose creates first, and the rest are created once it is done."""
    services = _compose()["services"]
    assert isinstance(services, dict)
    mounting = {
        name
        for name, service in services.items()
        if any(str(volume).startswith("pipeline-data:") for volume in service.get("volumes", ()))
    }
    assert {"migrate", "user-code", "dagster-webserver", "dagster-daemon", "worker", "metrics"} <= mounting
    assert "migrate" not in _waits_for(services, "migrate")
    for name in mounting - {"migrate"}:
        assert "migrate" in _waits_for(services, name), name
    for name, service in services.items():
        depends = service.get("depends_on") or {}
        if "migrate" in depends:
            assert depends["migrate"] == {"condition": "service_completed_successfully"}, name


def _missing_tools() -> list[str]:
    tools = ("dockerd", "debootstrap", "npm", "ip", "nsenter", "unshare", "tar")
    return [tool for tool in tools if shutil.which(tool) is None]


@pytest.mark.compose
@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_compose_stack_runs_the_daily_job_through_a_daemon_kill_terminates_runs_and_is_scraped_by_prometheus() -> None:
    if os.geteuid() != 0:
        pytest.skip("the compose stack needs root (a network namespace and a Docker engine of its own)")
    if _missing_tools():
        pytest.skip(f"missing {_missing_tools()}: `make setup-tests` installs them (as root)")
    result = subprocess.run(
        [sys.executable, str(SCRIPT)], cwd=ROOT, capture_output=True, text=True, timeout=7000, check=False
    )
    assert result.returncode == 0, result.stderr[-8000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    daily = figures["daily_run"]
    assert (daily["status"], daily["container_exit"], daily["books"]) == ("SUCCESS", 0, 200), figures
    assert figures["terminated_run"]["status"] == "CANCELED", figures
    up = figures["monitoring"]["targets_up"]
    assert (up["book-pipeline-queue"], up["book-pipeline-worker"]) == (1, 2), figures
