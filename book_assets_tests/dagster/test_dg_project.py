"""The ``dg`` and ``dagster`` CLIs in the project folder: the definitions load and validate the way ``dg dev``
and the daemon load them, and, with the ``.env`` that set-up writes, every command uses the project's instance.

Each test runs the project's own ``dg`` / ``dagster`` (no ``book-pipeline`` wrapper, no ``DAGSTER_*`` variable
in its environment) in a copy of the project folder (its ``pyproject.toml``, ``dagster.yaml`` and
``workspace.yaml``; the package and the virtualenv linked), so the checkout's own ``.env`` is neither read nor
written.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from dotenv import dotenv_values

from book_assets.dagster_instance import BLOCK_END, BLOCK_START, write_env_file
from book_assets.db.connection import Database
from book_assets.settings import PROJECT_ROOT, load_settings
from book_assets_tests.conftest import _admin, child_env

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder that is this dg project: its configuration files copied, its package and virtualenv linked."""
    root = tmp_path / "project"
    root.mkdir()
    for name in ("pyproject.toml", "dagster.yaml", "workspace.yaml"):
        shutil.copy(PROJECT_ROOT / name, root / name)
    (root / "book_assets").symlink_to(PROJECT_ROOT / "book_assets")
    (root / ".venv").symlink_to(Path(sys.executable).parent.parent)
    return root


def run_in(root: Path, *command: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``command`` in ``root`` with no Dagster or pipeline variable of this process (a user's fresh shell)."""
    environment = {k: v for k, v in child_env().items() if not k.startswith("DAGSTER_")}
    environment.update(VIRTUAL_ENV=str(BIN.parent), **env)
    return subprocess.run(list(command), cwd=root, env=environment, capture_output=True, text=True, timeout=300)


def dg_check_defs(project: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``dg check defs`` on Dagster's own storage in a temporary home (no ``.env``, so no Dagster database)."""
    home = project / "dagster_home"
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return run_in(project, str(BIN / "dg"), "check", "defs", DAGSTER_HOME=str(home), **env)


def test_dg_check_defs_passes(project: Path) -> None:
    result = dg_check_defs(project)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert "All definitions loaded successfully" in result.stdout + result.stderr


def test_dg_check_defs_fails_on_a_bad_cron_naming_the_setting(project: Path) -> None:
    result = dg_check_defs(project, BOOK_PIPELINE_SCHEDULE_CRON="every day at 3")
    assert result.returncode != 0
    assert "invalid setting schedule_cron (BOOK_PIPELINE_SCHEDULE_CRON)" in result.stdout + result.stderr


def test_env_file_keeps_the_users_own_lines_and_is_private(
    project: Path, database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    (project / ".env").write_text("BOOK_PIPELINE_RATE=2\n")
    settings = load_settings(database_url=database_url, data_dir=tmp_path / "data")
    try:
        write_env_file(settings, project)
        text = write_env_file(settings, project).read_text()  # a second set-up replaces the block
    finally:
        _admin(database_url, f'DROP DATABASE IF EXISTS "{urlsplit(database_url).path.strip("/")}_dagster" WITH (FORCE)')
    assert text.startswith("BOOK_PIPELINE_RATE=2\n")
    assert text.count(BLOCK_START) == text.count(BLOCK_END) == 1
    assert dotenv_values(project / ".env")["DAGSTER_HOME"] == str(project)
    assert os.stat(project / ".env").st_mode & 0o077 == 0


def test_dg_and_dagster_in_the_project_folder_use_the_projects_instance(
    project: Path, database_url: str, tmp_path: Path
) -> None:
    write_env_file(load_settings(database_url=database_url, data_dir=tmp_path / "data"), project)
    instance_db = f"{urlsplit(database_url).path.strip('/')}_dagster"
    try:
        check = run_in(project, str(BIN / "dg"), "check", "defs")
        assert check.returncode == 0, (check.stdout + check.stderr)[-3000:]

        info = run_in(project, str(BIN / "dagster"), "instance", "info")
        assert info.returncode == 0, (info.stdout + info.stderr)[-3000:]
        assert f"$DAGSTER_HOME: {project}\n" in info.stdout
        assert "class: PostgresRunStorage" in info.stdout

        launch = run_in(project, str(BIN / "dg"), "launch", "--job", "requeue_failed_tasks")
        assert launch.returncode == 0, (launch.stdout + launch.stderr)[-3000:]
        runs = run_in(project, str(BIN / "dagster"), "run", "list")
        assert runs.returncode == 0, (runs.stdout + runs.stderr)[-3000:]
        assert "requeue_failed_tasks" in runs.stdout
        instance_url = urlunsplit(urlsplit(database_url)._replace(path=f"/{instance_db}"))
        with Database(instance_url) as instance:
            recorded = instance.query("SELECT pipeline_name, status FROM runs")
        assert [(r["pipeline_name"], r["status"]) for r in recorded] == [("requeue_failed_tasks", "SUCCESS")]
    finally:
        _admin(database_url, f'DROP DATABASE IF EXISTS "{instance_db}" WITH (FORCE)')


def test_a_dagster_command_handed_another_instance_keeps_it_in_the_project_folder(
    project: Path, database_url: str, tmp_path: Path
) -> None:
    """Dagster's CLI lets the working directory's ``.env`` override the environment; the project's ``.env``
    defers to a variable already set, so a wrapper or a test that hands a command another home keeps it."""
    write_env_file(load_settings(database_url=database_url, data_dir=tmp_path / "data"), project)
    other = tmp_path / "other_home"
    other.mkdir()
    (other / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")

    info = run_in(project, str(BIN / "dagster"), "instance", "info", DAGSTER_HOME=str(other))

    assert info.returncode == 0, (info.stdout + info.stderr)[-3000:]
    assert f"$DAGSTER_HOME: {other}\n" in info.stdout
    assert "class: PostgresRunStorage" not in info.stdout
