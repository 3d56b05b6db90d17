"""A host that goes down under a crawl: the daemon, its code server, the run worker and the crawl's workers all
SIGKILLed while the run's step holds the ``crawl`` pool's one slot, then ``book-pipeline daemon`` started again.

The run must not stay STARTED until its max runtime: run monitoring (its timers cut to seconds, as in
:mod:`book_assets_tests.dagster.test_daemon`) fails it, its pool slot is freed, and run retries re-execute it
to success. The step is held in the pool by the site: with a deep budget the listing pages are drained in
``share_work`` (in the pool) before the split, and the start page's first request hangs for an hour, so the
step holds the slot for as long as the test needs, on any machine; the retry's request is served.

Every wait is bounded and generous: the verdict is whether it happens, not how soon.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from book_assets.db.connection import Database
from book_assets.sandbox import Faults
from book_assets.sandbox.server import SandboxServer
from book_assets.settings import PROJECT_ROOT
from book_assets_tests.dagster.test_daemon import BIN, DagsterRuns, _dagster_url, _wait
from book_assets_tests.dagster.test_daemon import daemon_env as daemon_env  # the fixture, with this file's site

pytestmark = pytest.mark.slow

#: Books of the three categories the daemon's code location crawls (test_daemon.CATEGORIES).
BOOKS = 62


@pytest.fixture
def site(sandbox_factory: Any) -> SandboxServer:
    """The sandbox, whose start page's first request hangs for an hour (the crawl's timeout is longer)."""
    server: SandboxServer = sandbox_factory(faults=Faults(latency_s=0.1, hang_s=3600, scripted={"/": ["hang"]}))
    return server


@pytest.fixture
def env(daemon_env: dict[str, str]) -> dict[str, str]:
    """The daemon's environment with a deep budget (its listing pass runs in ``share_work``), a crawl timeout
    longer than the hang, and short leases (the retry reclaims the start page a dead worker held)."""
    return {
        **daemon_env,
        "BOOK_PIPELINE_DEEP_BUDGET": "1000",
        "BOOK_PIPELINE_TIMEOUT_S": "7200",
        "BOOK_PIPELINE_LEASE_S": "15",
    }


class Host:
    """``book-pipeline daemon`` on the test's instance, which the test can bring down as a power cut would."""

    def __init__(self, env: dict[str, str], folder: Path) -> None:
        self.env, self.folder, self.starts = env, folder, 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.folder / f"daemon-{self.starts}.log"

    def start(self) -> None:
        self.starts += 1
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [str(BIN / "book-pipeline"), "daemon"],
                env=self.env,
                cwd=self.folder,
                stdout=out,
                stderr=subprocess.STDOUT,
                process_group=0,
            )

    def power_cut(self) -> None:
        """SIGKILL the daemon's process group, then every process of this instance left (the run worker and
        the crawl's workers, wherever their group): nothing gets to report anything."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        victims = []
        for process in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                if process.environ().get("DAGSTER_HOME") == self.env["DAGSTER_HOME"]:
                    process.kill()
                    victims.append(process)
        _gone, alive = psutil.wait_procs(victims, timeout=60)
        assert alive == [], f"processes of the instance survived SIGKILL: {alive}"


@pytest.fixture
def host(env: dict[str, str], tmp_path: Path) -> Iterator[Host]:
    machine = Host(env, tmp_path)
    try:
        yield machine
    finally:
        machine.power_cut()


def _slot_holders(dagster: Database) -> list[dict[str, Any]]:
    """The claimed slots of the ``crawl`` pool: which run's step holds each."""
    return dagster.query(
        "SELECT run_id, step_key FROM concurrency_slots WHERE concurrency_key = 'crawl' AND run_id IS NOT NULL"
    )


def _retries_of(dagster: Database, run_id: str) -> list[str]:
    rows = dagster.query("SELECT run_id FROM run_tags WHERE key = 'dagster/parent_run_id' AND value = %s", (run_id,))
    return [r["run_id"] for r in rows]


def test_a_run_cut_off_with_its_daemon_while_holding_the_pool_is_failed_freed_and_retried_after_a_restart(
    db: Database, database_url: str, site: SandboxServer, env: dict[str, str], host: Host
) -> None:
    runs = DagsterRuns(_dagster_url(database_url))
    dagster = runs.db
    host.start()
    launched = subprocess.run(
        [str(BIN / "dagster"), "job", "launch", "-j", "full_refresh_job", "-w", str(PROJECT_ROOT / "workspace.yaml")],
        env=env,
        cwd=host.folder,  # not the project folder: its .env would point dagster at the project's instance
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert launched.returncode == 0, launched.stdout + launched.stderr

    # The run's share_work step holds the pool's slot, its listing pass waiting on the hanging start page
    # (requested once: the hang is this run's, and the retry's request is served).
    holders = _wait(
        "a full_refresh_job step holding the crawl pool while its start page hangs",
        lambda: (
            site.stats().hits.get("/", 0) >= 1
            and [h for h in _slot_holders(dagster) if h["step_key"].endswith("share_work")]
        ),
        300,
        host.log,
    )
    victim = holders[0]["run_id"]
    assert victim in runs.with_status("full_refresh_job", "STARTED")

    host.power_cut()
    assert victim in runs.with_status("full_refresh_job", "STARTED")  # nothing was left to report its end
    host.start()

    _wait(
        "the cut-off run marked failed",
        lambda: victim in runs.with_status("full_refresh_job", "FAILURE"),
        300,
        host.log,
    )
    _wait(
        "the cut-off run's pool slot freed",
        lambda: all(h["run_id"] != victim for h in _slot_holders(dagster)),
        300,
        host.log,
    )
    retried = _wait(
        "a retry of the cut-off run succeeded",
        lambda: [r for r in _retries_of(dagster, victim) if r in runs.with_status("full_refresh_job", "SUCCESS")],
        600,
        host.log,
    )
    assert len(retried) == 1
    assert db.query("SELECT count(*) AS n FROM books")[0]["n"] == BOOKS
