"""Project files a user or CI meets first: compose file, Dagster definitions, quick start."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _compose_command() -> list[str] | None:
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True)
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def test_compose_file_is_valid_for_the_compose_client() -> None:
    command = _compose_command()
    assert command is not None, "no compose client: `make setup` installs one (docker-compose)"
    result = subprocess.run([*command, "config", "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_compose_file_has_the_seed_database_and_a_scalable_worker() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    db = services["db"]
    assert db["image"] == "postgres:16"
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])
    assert any(v.startswith("pgdata:") for v in db["volumes"]) and "pgdata" in compose["volumes"]
    assert "scraper_pass" in db["environment"]["POSTGRES_PASSWORD"]  # the seed's default, overridable
    worker = services["worker"]
    # A service that scales cannot pin a container name or a host port.
    assert "container_name" not in worker and "ports" not in worker
    assert {"dagster-webserver", "dagster-daemon"} <= set(services)
    for published in services["dagster-webserver"].get("ports", []):
        assert published.startswith("127.0.0.1:")


def test_dagster_yaml_uses_psycopg2_scheme_and_postgres_storage() -> None:
    config = yaml.safe_load((ROOT / "dagster.yaml").read_text())
    for storage in ("run_storage", "event_log_storage", "schedule_storage"):
        assert config[storage]["config"]["postgres_db"]["scheme"] == "postgresql+psycopg2"


def test_definitions_load() -> None:
    from book_assets.definitions import build_definitions

    repo = build_definitions().get_repository_def()
    assert repo is not None


def test_ci_runs_make_test_and_readme_shows_the_two_commands() -> None:
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme


def test_the_environment_is_installed_with_its_bytecode_so_no_process_compiles_its_imports() -> None:
    """Every worker, CLI child and Dagster step is a fresh interpreter. Where PYTHONDONTWRITEBYTECODE is set
    (this machine; most Python images) nothing writes the .pyc files, so each process would compile what it
    imports again: about 3 s of CPU for Dagster alone. Set-up installs the bytecode (uv --compile-bytecode)."""
    import importlib.util

    missing = []
    for module in ("dagster", "playwright", "psycopg2", "httpx", "pandas", "warcio", "protego"):
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None, module
        if not Path(importlib.util.cache_from_source(spec.origin)).exists():
            missing.append(module)
    assert not missing, f"installed without bytecode: {missing}"
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "UV_COMPILE_BYTECODE=1" in dockerfile


def test_no_tracked_file_holds_a_merge_conflict_marker() -> None:
    tracked = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    )
    markers = ("<<<<<<< ", ">>>>>>> ")
    found = []
    for name in filter(None, tracked):
        path = ROOT / name
        if not path.is_file() or path.suffix in {".jl", ".gz", ".warc"}:
            continue
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            continue
        found += [f"{name}:{i}" for i, line in enumerate(lines, 1) if line.startswith(markers)]
    assert found == [], f"merge conflict markers left in: {found}"
