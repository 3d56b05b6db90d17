"""`dg check defs`: the dg project's definitions load and validate the way `dg dev` and the daemon load them.

Run as a subprocess of the project's own ``dg`` (from ``dagster-dg-cli``), with a temporary ``DAGSTER_HOME``
(an empty dagster.yaml: Dagster's own storage in that folder) so the check needs no Dagster database.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from book_assets.settings import PROJECT_ROOT
from book_assets_tests.conftest import child_env

pytestmark = pytest.mark.slow

DG = Path(sys.executable).parent / "dg"


def dg_check_defs(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    home = tmp_path / "dagster_home"
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    environment = child_env(DAGSTER_HOME=str(home), VIRTUAL_ENV=str(Path(sys.executable).parent.parent), **env)
    return subprocess.run(
        [str(DG), "check", "defs"], cwd=PROJECT_ROOT, env=environment, capture_output=True, text=True, timeout=300
    )


def test_dg_check_defs_passes(tmp_path: Path) -> None:
    result = dg_check_defs(tmp_path)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert "All definitions loaded successfully" in result.stdout + result.stderr


def test_dg_check_defs_fails_on_a_bad_cron_naming_the_setting(tmp_path: Path) -> None:
    result = dg_check_defs(tmp_path, BOOK_PIPELINE_SCHEDULE_CRON="every day at 3")
    assert result.returncode != 0
    assert "invalid setting schedule_cron (BOOK_PIPELINE_SCHEDULE_CRON)" in result.stdout + result.stderr
