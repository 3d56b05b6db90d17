"""The daily pipeline as the real Dagster daemon runs it: ``book-pipeline daemon`` on the project's
``dagster.yaml`` (PostgreSQL storage, the run queue, pools, run retries, run monitoring with its timers cut
to seconds), a one-minute cron.

One daemon, three things an operator relies on, in the order a day brings them:

1. a schedule tick launches ``full_refresh_job`` and the run succeeds;
2. a pile of failures, three transient (5xx) and five permanent (404), makes ``failed_tasks_sensor`` request
   one ``recrawl_failed_job``: the transient pages are fetched again and stored, the 404s are left alone, and
   no second requeue follows on later ticks;
3. a crawling run whose run worker is SIGKILLed is marked failed, its crawl workers stop and release their pages,
   and a later run (the retry, or the next tick's) succeeds: the dead run's pool slot does not block the day.

The code location reads its settings from the environment: the test database, three categories of the sandbox
(62 books) served a fifth of a second per page, plain HTTP, two worker processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psutil
import pytest
import yaml

from book_assets.crawl.config import DETAIL, TASK_TYPES
from book_assets.db.connection import Database
from book_assets.queue import TaskQueue
from book_assets.sandbox import Faults
from book_assets.sandbox.server import SandboxServer
from book_assets.settings import PROJECT_ROOT
from book_assets_tests.conftest import _admin, _admin_and_name, child_env

pytestmark = pytest.mark.slow

CATEGORIES = ("Travel", "Mystery", "Poetry")
BIN = Path(sys.executable).parent


def _wait(what: str, predicate: Callable[[], Any], timeout_s: float, log: Path) -> Any:
    """``predicate()`` once it is truthy; fails naming ``what`` and the daemon's last lines after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found := predicate():
            return found
        time.sleep(1.0)
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:]) if log.exists() else ""
    pytest.fail(f"{what}: not within {timeout_s:.0f}s\n--- daemon log ---\n{tail}")


class DagsterRuns:
    """The runs table of the daemon's instance (its PostgreSQL database), read directly."""

    def __init__(self, url: str) -> None:
        self.db = Database(url, application_name="daemon-test")

    def runs(self, job: str) -> list[dict[str, Any]]:
        return self.db.query(
            "SELECT run_id, status FROM runs WHERE pipeline_name = %s ORDER BY create_timestamp, id", (job,)
        )

    def with_status(self, job: str, status: str) -> list[str]:
        return [r["run_id"] for r in self.runs(job) if r["status"] == status]

    def worker(self, run_id: str) -> psutil.Process | None:
        """The run worker of a started run: the process its RUN_START event names."""
        rows = self.db.query(
            "SELECT event FROM event_logs WHERE run_id = %s AND dagster_event_type IN ('RUN_START', 'PIPELINE_START')",
            (run_id,),
        )
        found = re.search(r'"pid": (\d+)', rows[0]["event"]) if rows else None
        if found is None:
            return None
        with contextlib.suppress(psutil.NoSuchProcess):
            return psutil.Process(int(found[1]))
        return None


def _dagster_url(database_url: str) -> str:
    parts = urlsplit(database_url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "_dagster"))


@pytest.fixture
def site(sandbox_factory: Any) -> SandboxServer:
    """The sandbox, a fifth of a second per page: a crawl of the three categories lasts a few seconds."""
    server: SandboxServer = sandbox_factory(faults=Faults(latency_s=0.2))
    return server


@contextlib.contextmanager
def daemon_environment(database_url: str, tmp_path: Path, **settings: str) -> Iterator[dict[str, str]]:
    """The environment of the daemon and the ``dagster`` CLI: a DAGSTER_HOME with the project's dagster.yaml,
    the instance in a fresh ``<test database>_dagster`` database, and the pipeline's ``settings``."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    # The project's instance settings, with run monitoring's timers shortened from minutes to seconds.
    config = yaml.safe_load((PROJECT_ROOT / "dagster.yaml").read_text(encoding="utf-8"))
    assert config["run_monitoring"]["enabled"] and config["run_monitoring"]["free_slots_after_run_end_seconds"]
    config["run_monitoring"].update(poll_interval_seconds=5, free_slots_after_run_end_seconds=5)
    (home / "dagster.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    env = child_env(
        DATABASE_URL=database_url,
        DAGSTER_HOME=str(home),
        BOOK_PIPELINE_DATA_DIR=str(tmp_path / "data"),
        **settings,
    )
    # A fresh instance: the session's other Dagster tests may have used the same database for theirs.
    admin, _name = _admin_and_name()
    dagster_db = urlsplit(_dagster_url(database_url)).path.strip("/")
    _admin(admin, f'DROP DATABASE IF EXISTS "{dagster_db}" WITH (FORCE)')
    probe = (
        "import json; from book_assets.dagster_instance import dagster_environment; "
        "from book_assets.settings import load_settings; print(json.dumps(dagster_environment(load_settings())))"
    )
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    env.update(json.loads(out))  # DAGSTER_PG_*: dagster_environment made the database
    yield env
    _admin(admin, f'DROP DATABASE IF EXISTS "{dagster_db}" WITH (FORCE)')


@pytest.fixture
def daemon_env(database_url: str, tmp_path: Path, site: SandboxServer) -> Iterator[dict[str, str]]:
    """The daemon's environment for the books: three categories of the sandbox, two workers, a one-minute cron."""
    with daemon_environment(
        database_url,
        tmp_path,
        BOOK_PIPELINE_BASE_URL=site.url + "/",
        BOOK_PIPELINE_FETCH_MODE="http",
        BOOK_PIPELINE_MIN_INTERVAL_S="0",
        BOOK_PIPELINE_CATEGORIES=",".join(CATEGORIES),
        BOOK_PIPELINE_WORKERS="2",
        BOOK_PIPELINE_CONCURRENCY="2",
        BOOK_PIPELINE_SCHEDULE_CRON="* * * * *",
        BOOK_PIPELINE_FAILED_TASKS_THRESHOLD="3",
        BOOK_PIPELINE_REQUEUE_BACKOFF_S="0",
        BOOK_PIPELINE_SNAPSHOT_BUDGET="10",
    ) as env:
        yield env


@contextlib.contextmanager
def running_daemon(env: dict[str, str], tmp_path: Path) -> Iterator[Path]:
    """``book-pipeline daemon`` running with ``env`` (its own process group); yields its log file."""
    log = tmp_path / "daemon.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(BIN / "book-pipeline"), "daemon"],
            env=env,
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            process_group=0,
        )
    try:
        yield log
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        home = env["DAGSTER_HOME"]
        for process in psutil.process_iter():  # whatever the daemon started that outlived it (run workers)
            with contextlib.suppress(psutil.Error):
                if process.environ().get("DAGSTER_HOME") == home:
                    process.kill()


@pytest.fixture
def daemon(daemon_env: dict[str, str], tmp_path: Path) -> Iterator[Path]:
    """``book-pipeline daemon`` running on that instance; yields its log file."""
    with running_daemon(daemon_env, tmp_path) as log:
        yield log


def start_schedule(name: str, env: dict[str, str], cwd: Path) -> None:
    """``dagster schedule start NAME`` on the daemon's instance."""
    started = subprocess.run(
        [str(BIN / "dagster"), "schedule", "start", name, "-w", str(PROJECT_ROOT / "workspace.yaml")],
        env=env,
        cwd=cwd,  # not the project folder: its .env would point dagster at the project's instance
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert started.returncode == 0, started.stdout + started.stderr


def _fail(db: Database, urls: list[str], kind: str) -> None:
    """Tasks for ``urls`` failed for good with ``kind`` through the queue's API, as a crawl's workers would."""
    queue = TaskQueue(db, task_types=TASK_TYPES, default_interval_s=0)
    for url in urls:
        queue.enqueue(DETAIL, {"url": url, "category": "Fantasy"}, group="Fantasy", max_attempts=1)
    for task in queue.claim("daemon-test", len(urls), task_types=[DETAIL]).tasks:
        queue.fail(task, f"{kind}: injected", kind=kind, retryable=kind == "http_5xx")


def test_the_daemon_runs_the_schedule_requeues_transient_failures_once_and_gets_past_a_killed_run(
    db: Database, database_url: str, site: SandboxServer, daemon_env: dict[str, str], daemon: Path
) -> None:
    workspace = str(PROJECT_ROOT / "workspace.yaml")
    start_schedule("daily_full_refresh", daemon_env, daemon.parent)
    runs = DagsterRuns(_dagster_url(database_url))

    # 1. A tick's run succeeds.
    first = _wait(
        "a scheduled full_refresh_job run succeeded",
        lambda: runs.with_status("full_refresh_job", "SUCCESS"),
        240,
        daemon,
    )
    stored = {r["url"] for r in db.query("SELECT url FROM books")}
    assert len(stored) == 62

    # 2. Failures pile up: three pages that can succeed (their site had a bad moment), five that cannot. They
    # are books of a category the daily crawl leaves out, so only a requeue fetches them again.
    fantasy = sorted(p for p, book in site.catalogue.ground_truth().items() if book.category == "Fantasy")
    transient = [site.url_for(path) for path in fantasy[:3]]
    permanent = [site.url_for(f"/catalogue/no-such-book_{n}/index.html") for n in range(5)]
    _fail(db, transient, "http_5xx")
    _fail(db, permanent, "http_404")

    # 3. The next crawling run is killed: SIGKILL of its run worker mid-crawl.
    def crawling_run() -> tuple[str, psutil.Process] | None:
        for run_id in runs.with_status("full_refresh_job", "STARTED"):
            in_progress = db.query("SELECT count(*) AS n FROM tasks WHERE status = 'in_progress'")[0]["n"]
            worker = runs.worker(run_id)
            if run_id not in first and in_progress and worker is not None and len(worker.children()) >= 2:
                return run_id, worker
        return None

    victim, worker = _wait("a later full_refresh_job run crawling", crawling_run, 240, daemon)
    crawlers = worker.children(recursive=True)  # the crawl's two worker processes (and spawn's helper)
    worker.kill()
    _gone, alive = psutil.wait_procs(crawlers, timeout=60)
    assert alive == [], f"crawl workers of the killed run still running: {alive}"
    # They released what they held when they lost their parent: no lease of theirs is left to expire.
    ids = [f"{socket.gethostname()}:{p.pid}" for p in crawlers]
    held = db.query("SELECT id FROM tasks WHERE status = 'in_progress' AND worker_id = ANY(%s)", (ids,))
    assert held == [], f"tasks still leased by the killed run's workers: {held}"
    _wait(
        "the killed run marked failed", lambda: victim in runs.with_status("full_refresh_job", "FAILURE"), 240, daemon
    )
    _wait(
        "a full_refresh_job run after the killed one succeeded",
        lambda: len(runs.with_status("full_refresh_job", "SUCCESS")) > len(first),
        420,
        daemon,
    )

    # The sensor waits while a crawl run is in progress, which a one-minute cron keeps nearly all the time:
    # stopping the schedule leaves it a tick with none.
    stopped = subprocess.run(
        [str(BIN / "dagster"), "schedule", "stop", "daily_full_refresh", "-w", workspace],
        env=daemon_env,
        cwd=daemon.parent,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    # The sensor requested one requeue: the transient pages are stored again, the 404s left alone.
    requeues = _wait(
        "recrawl_failed_job succeeded", lambda: runs.with_status("recrawl_failed_job", "SUCCESS"), 240, daemon
    )
    newest = {
        r["url"]: (r["status"], r["requeues"])
        for r in db.query(
            "SELECT DISTINCT ON (payload->>'url') payload->>'url' AS url, status, requeues FROM tasks "
            "ORDER BY payload->>'url', id DESC"
        )
    }
    assert all(newest[url][0] == "completed" for url in transient), {u: newest[u] for u in transient}
    assert {url: newest[url] for url in permanent} == dict.fromkeys(permanent, ("failed", 0))
    assert len(runs.runs("recrawl_failed_job")) == len(requeues) == 1, runs.runs("recrawl_failed_job")
