"""Soak: the daily pipeline through the real Dagster daemon, a one-minute cron for many ticks, while the
sandbox moves to its next simulated day between runs and faults are injected. Prints one JSON object.

What runs: ``book-pipeline sandbox serve`` (a process of its own, with a per-page latency so a crawl lasts
long enough to be hit), ``book-pipeline daemon`` on the project's ``dagster.yaml`` (run monitoring's poll and
slot-freeing cut to seconds, as a minute stands for a day), ``daily_full_refresh`` switched on with the cron
``* * * * *``, the failed-tasks sensor with a low threshold and short requeue back-off, a task retention of a
few minutes, and an alert webhook that this script receives. The databases ``bookpipeline_soak`` and
``bookpipeline_soak_dagster`` live on an embedded server of the soak's own (``.data/soak``, made anew), or
on the server ``DATABASE_URL`` names (then PostgreSQL is not restarted).

Between runs (nothing queued or running, the last run succeeded) the sandbox is asked for its next day
(``POST /__sandbox__/day``), so every simulated day is crawled whole by at least one run. Faults, each at the
tick given, while that tick's run is crawling: the run worker SIGKILLed (``--kill-at``), PostgreSQL restarted
(``--pg-restart-at``, embedded server only), a burst of 5xx (``--burst-at``, ``POST /__sandbox__/faults``),
the host's power cut (``--daemon-restart-at``: the daemon, its code server, the run worker and the crawl's
workers SIGKILLed, then ``book-pipeline daemon`` started again; run monitoring must fail the cut-off run and
run retries re-execute it).

At the end, with the schedule off and every run finished, it accounts:

- ``ticks``: each tick's run succeeded, or failed and a later run of the job succeeded;
- ``unfinished_runs``: runs left queued, starting or started (must be none);
- ``books``: the stored books that are not removed against the sandbox's ground truth for its last day;
- ``versions`` and ``removed``: stored book versions and removal marks against the changes the sandbox made;
- ``tasks``: the queue's rows after each run, against a bound from the retention;
- ``alerts``: the failed runs against the run-failure alerts received.

``ok`` is true when every one of those holds.

Usage: python benchmarks/soak.py [--ticks 20] [--latency 0.3] [--kill-at 4] [--pg-restart-at 8] [--burst-at 12]
       [--daemon-restart-at 16]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import psutil
import psycopg2
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from book_assets.crawl.config import TASK_TYPES
from book_assets.dagster_instance import dagster_environment
from book_assets.db import embedded
from book_assets.db.connection import Database, resolve_database_url
from book_assets.db.migrations import migrate
from book_assets.queue import TaskQueue
from book_assets.queue.failures import RequeuePolicy, failing_now
from book_assets.sandbox.catalogue import Catalogue
from book_assets.sandbox.truth import changes_by_day, stored_vs_truth
from book_assets.settings import PROJECT_ROOT, load_settings
from book_assets.supervise import stop_groups

SOAK_DB = "bookpipeline_soak"
JOB = "full_refresh_job"
SCHEDULE = "daily_full_refresh"
BIN = Path(sys.executable).parent


UNFINISHED = ("QUEUED", "NOT_STARTED", "STARTING", "STARTED", "CANCELING")
#: The tag the daemon puts on a failed run: whether run retries will run it again.
WILL_RETRY = "dagster/will_retry"
#: Seconds between two looks at the runs.
POLL_S = 2.0


def _say(message: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class AlertReceiver:
    """A webhook on loopback that keeps every alert posted to it."""

    def __init__(self) -> None:
        alerts: list[dict[str, Any]] = []
        self.alerts = alerts

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
                with contextlib.suppress(ValueError):
                    alerts.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"


@dataclass(frozen=True)
class Run:
    run_id: str
    job_name: str
    status: str
    tags: dict[str, str]
    created: float
    started: float | None


def is_tick(run: Run) -> bool:
    """A run the schedule requested (the daemon's retry of a crashed run copies its tags, but names its parent)."""
    return run.tags.get("dagster/schedule_name") == SCHEDULE and "dagster/parent_run_id" not in run.tags


def unsettled(runs: list[Run]) -> list[Run]:
    """The runs still under way: unfinished, or failed with the daemon's retry still to come (tagged to be
    retried, or not yet tagged either way, and no run names it as its parent). Between a run's failure and its
    retry's start nothing is unfinished, yet its crawl is not over: the sandbox's day must not move then."""
    parents = {run.tags.get("dagster/parent_run_id") for run in runs}
    return [
        run
        for run in runs
        if run.status in UNFINISHED
        or (run.status == "FAILURE" and run.tags.get(WILL_RETRY, "true") == "true" and run.run_id not in parents)
    ]


class Runs:
    """The daemon's runs, read through the Dagster instance (its PostgreSQL storage)."""

    def __init__(self) -> None:
        from dagster import DagsterInstance

        self.instance = DagsterInstance.get()

    def all(self) -> list[Run]:
        """Every run, oldest first; an empty list while the database is away (a restart under way)."""
        try:
            records = self.instance.get_run_records()
        except Exception:  # the storage is restarting; the next look sees it again
            return []
        return [
            Run(
                run_id=r.dagster_run.run_id,
                job_name=r.dagster_run.job_name,
                status=r.dagster_run.status.value,
                tags=dict(r.dagster_run.tags),
                created=r.create_timestamp.timestamp(),
                started=r.start_time,
            )
            for r in reversed(records)
        ]

    def worker(self, run_id: str) -> psutil.Process | None:
        """The run worker of a started run: the process its RUN_START event came from."""
        from dagster import DagsterEventType

        with contextlib.suppress(Exception):
            records = self.instance.get_records_for_run(run_id, of_type=DagsterEventType.RUN_START).records
            if records and records[0].event_log_entry.dagster_event is not None:
                pid = records[0].event_log_entry.dagster_event.pid
                if pid:
                    return psutil.Process(pid)
        return None


def _scratch(admin: str, *names: str) -> None:
    conn = psycopg2.connect(admin)
    conn.autocommit = True
    with conn.cursor() as cur:
        for name in names:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            cur.execute(f'CREATE DATABASE "{name}"')
    conn.close()


def _with_name(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


@contextlib.contextmanager
def _process(command: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A child in a process group of its own, in the log's folder (not the project's, whose ``.env`` fills in
    what the environment leaves unset), stopped with whatever it started on the way out."""
    with log.open("wb") as out:
        proc = subprocess.Popen(command, env=env, cwd=log.parent, stdout=out, stderr=subprocess.STDOUT, process_group=0)
    try:
        yield proc
    finally:
        stop_groups([proc], grace_s=60)


class Daemon:
    """``book-pipeline daemon`` in a process group of its own, which the soak can bring down as a power cut
    would and start again; each start logs to a file of its own."""

    def __init__(self, env: dict[str, str], folder: Path) -> None:
        self.env, self.folder, self.starts = env, folder, 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.starts += 1
        with (self.folder / f"daemon-{self.starts}.log").open("wb") as out:
            self.proc = subprocess.Popen(
                [str(BIN / "book-pipeline"), "daemon"],
                env=self.env,
                cwd=self.folder,
                stdout=out,
                stderr=subprocess.STDOUT,
                process_group=0,
            )

    def power_cut(self) -> int:
        """SIGKILL the daemon and everything it started (its code server, the run worker and the crawl's workers,
        wherever their process group), all at once: nothing gets to report anything. Not the database server,
        which the soak itself runs (and restarts). Returns how many processes died."""
        if self.proc is None:
            return 0
        victims = [psutil.Process(self.proc.pid)]
        with contextlib.suppress(psutil.Error):
            victims += victims[0].children(recursive=True)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        for process in victims:
            with contextlib.suppress(psutil.Error):
                process.kill()
        self.proc.wait()
        psutil.wait_procs(victims, timeout=60)
        return len(victims)

    def stop(self) -> None:
        if self.proc is not None:
            stop_groups([self.proc], grace_s=60)


def _sandbox_url(log: Path, deadline_s: float = 60) -> str:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for token in log.read_text(errors="replace").split():
            if token.startswith("http://"):
                return token.rstrip("/") + "/"
        time.sleep(0.2)
    raise SystemExit(f"soak: the sandbox printed no URL: {log.read_text(errors='replace')[-500:]}")


class Soak:
    """One soak: the loop that watches runs, moves the sandbox's day and injects faults, then the accounting."""

    def __init__(
        self, args: argparse.Namespace, env: dict[str, str], site: str, pg_dir: Path | None, daemon: Daemon
    ) -> None:
        self.args = args
        self.env = env
        self.daemon = daemon
        self.site = site
        self.pg_dir = pg_dir
        self.runs = Runs()
        self.day = 0
        #: Days the pipeline saw whole: with nothing running, a successful crawl started after the day was
        #: served and no page is failing now (a page that failed in the crawl was stored by a later requeue),
        #: so every change of the day had its chance to become a version before the next day was served.
        self.crawled_days: set[int] = set()
        self.crawled_since_day = False
        self.day_set_at = time.time()
        self.faults: list[dict[str, Any]] = []
        self.pending_faults = {
            args.kill_at: self._kill,
            args.pg_restart_at: self._restart_pg,
            args.burst_at: self._burst,
            args.daemon_restart_at: self._restart_daemon,
        }
        self.pending_faults.pop(0, None)
        self.tasks_after_run: list[int] = []
        self.counted: set[str] = set()
        #: Since when no run has been unfinished (None while one is).
        self.quiet_since: float | None = None

    # --- faults ------------------------------------------------------------------------------------------

    def _crawling(self, run: Any) -> psutil.Process | None:
        """The run worker of ``run`` while it is crawling: its crawl workers are up and the site is serving."""
        worker = self.runs.worker(run.run_id)
        if worker is None:
            return None
        with contextlib.suppress(psutil.Error):
            if len(worker.children(recursive=True)) >= 2 and self._site_requests_grow():
                return worker
        return None

    def _site_requests_grow(self) -> bool:
        first = httpx.get(self.site + "__sandbox__/stats", timeout=10).json()["total_requests"]
        time.sleep(1.0)
        return bool(httpx.get(self.site + "__sandbox__/stats", timeout=10).json()["total_requests"] > first)

    def _kill(self, run: Any, worker: psutil.Process) -> str:
        worker.kill()
        return f"SIGKILL of run worker {worker.pid} of run {run.run_id[:8]}"

    def _restart_pg(self, run: Any, worker: psutil.Process) -> str:
        if self.pg_dir is None:
            return "skipped: DATABASE_URL names a server this script does not manage"
        embedded.down(self.pg_dir)
        time.sleep(3)
        embedded.up(self.pg_dir)
        return f"PostgreSQL restarted while run {run.run_id[:8]} crawled"

    def _burst(self, run: Any, worker: psutil.Process) -> str:
        seconds = self.args.burst_seconds
        answer = httpx.post(self.site + f"__sandbox__/faults?error_rate=0.5&seconds={seconds}", timeout=10)
        return f"5xx burst (half the pages for {seconds:g} s) while run {run.run_id[:8]} crawled: {answer.json()}"

    def _restart_daemon(self, run: Any, worker: psutil.Process) -> str:
        killed = self.daemon.power_cut()
        time.sleep(3)
        self.daemon.start()
        return f"power cut ({killed} processes SIGKILLed) while run {run.run_id[:8]} crawled; daemon started again"

    def _maybe_inject(self, tick: int, tick_run: Any) -> None:
        fault = self.pending_faults.get(tick)
        if fault is None or tick_run.status != "STARTED":
            return
        worker = self._crawling(tick_run)
        if worker is None:
            return
        del self.pending_faults[tick]
        what = fault(tick_run, worker)
        _say(f"tick {tick}: {what}")
        self.faults.append({"tick": tick, "run_id": tick_run.run_id, "fault": fault.__name__.strip("_"), "what": what})

    # --- the day -------------------------------------------------------------------------------------------

    def _after_success(self, runs: list[Any]) -> None:
        """Note the newest successful crawls, and the queue's rows after each."""
        for run in runs:
            if run.job_name != JOB or run.status != "SUCCESS" or run.run_id in self.counted:
                continue
            self.counted.add(run.run_id)
            if run.started is not None and run.started >= self.day_set_at:
                self.crawled_since_day = True
            with contextlib.suppress(psycopg2.Error), Database(self.env["DATABASE_URL"], application_name="soak") as db:
                queue = TaskQueue(db, task_types=TASK_TYPES, default_interval_s=0)
                counts = queue.stats(top_failures=0).counts
                self.tasks_after_run.append(sum(sum(by_status.values()) for by_status in counts.values()))

    def _day_seen_whole(self, runs: list[Any]) -> bool:
        if not self.crawled_since_day or unsettled(runs):
            return False
        try:
            with Database(self.env["DATABASE_URL"], application_name="soak") as db:
                failing = failing_now(db, RequeuePolicy.of((), 0, 0)).failing
        except psycopg2.Error:
            return False
        if failing == 0:
            self.crawled_days.add(self.day)
        return failing == 0

    def _next_day_if_quiet(self, runs: list[Any], ticks_left: bool) -> None:
        """Serve the next day once the pipeline saw this one whole, while ticks are left to crawl it."""
        if not ticks_left or not self._day_seen_whole(runs):
            return
        answer = httpx.post(self.site + "__sandbox__/day", timeout=10).json()
        self.day, self.day_set_at, self.crawled_since_day = answer["day"], time.time(), False
        _say(f"sandbox: day {self.day} ({answer['books']} books)")

    # --- the loop ------------------------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        """Tick until ``--ticks`` runs were requested, then with the schedule off until every run has ended."""
        started = time.monotonic()
        self._dagster("schedule", "start", SCHEDULE)
        scheduling, last_tick = True, 0
        while time.monotonic() - started < self.args.timeout_min * 60:
            runs = self.runs.all()
            ticks = [r for r in runs if is_tick(r)]
            if len(ticks) > last_tick:
                last_tick = len(ticks)
                _say(f"tick {last_tick}: run {ticks[-1].run_id[:8]} requested")
            if ticks:
                self._maybe_inject(len(ticks), ticks[-1])
            self._after_success(runs)
            self._next_day_if_quiet(runs, ticks_left=len(ticks) < self.args.ticks)
            if scheduling and len(ticks) >= self.args.ticks:
                self._dagster("schedule", "stop", SCHEDULE)
                scheduling = False
                _say("schedule stopped; waiting for every run to end")
            if not scheduling and self._quiet_for(90):
                self._day_seen_whole(self.runs.all())
                break
            time.sleep(POLL_S)
        return {"elapsed_s": round(time.monotonic() - started, 1)}

    def _quiet_for(self, seconds: float) -> bool:
        """No run unfinished for ``seconds`` (the sensors may still launch a requeue after the last tick)."""
        runs = self.runs.all()
        if not runs or unsettled(runs):
            self.quiet_since = None
            return False
        self._after_success(runs)
        if self.quiet_since is None:
            self.quiet_since = time.monotonic()
        return time.monotonic() - self.quiet_since >= seconds

    @staticmethod
    def _wait_until(predicate: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(POLL_S)
        return False

    def _dagster(self, *args: str) -> None:
        command = [str(BIN / "dagster"), *args, "-w", str(PROJECT_ROOT / "workspace.yaml")]
        folder = Path(self.env["DAGSTER_HOME"]).parent  # not the project's folder, as for _process
        done = subprocess.run(command, env=self.env, cwd=folder, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise SystemExit(f"soak: {' '.join(args)} failed: {done.stderr.strip()[-500:]}")


def _account(soak: Soak, alerts: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    runs = soak.runs.all()
    by_job: dict[str, dict[str, int]] = {}
    for run in runs:
        by_job.setdefault(run.job_name, {}).setdefault(run.status, 0)
        by_job[run.job_name][run.status] += 1
    ticks = []
    for n, run in enumerate((r for r in runs if is_tick(r)), 1):
        later = [r for r in runs if r.job_name == JOB and r.created > run.created]
        followed = next((r.run_id for r in later if r.status == "SUCCESS"), None)
        ok = run.status == "SUCCESS" or (run.status == "FAILURE" and followed is not None)
        ticks.append(
            {"tick": n, "run_id": run.run_id[:8], "status": run.status, "ok": ok}
            | ({} if run.status == "SUCCESS" else {"followed_by_success": (followed or "")[:8]})
        )
    unfinished = [(r.run_id[:8], r.job_name, r.status) for r in runs if r.status in UNFINISHED]

    url = soak.env["DATABASE_URL"]
    with Database(url, application_name="soak") as db:
        present = db.query("SELECT * FROM books WHERE removed_at IS NULL ORDER BY id")
        versions = db.query("SELECT count(*) AS n FROM book_versions")[0]["n"]
        removed = db.query("SELECT count(*) AS n FROM book_presence WHERE event = 'removed'")[0]["n"]
    truth = Catalogue(seed=seed, day=soak.day).ground_truth()
    problems = stored_vs_truth(present, truth, soak.site)
    days = changes_by_day(seed, soak.day)
    expected_versions = len(Catalogue(seed=seed, day=0)) + sum(len(d.added) + len(d.changed) for d in days)
    expected_removed = sum(len(d.removed) for d in days)

    pages = len(truth) + len(Catalogue(seed=seed, day=soak.day).listing_paths())
    retention_s = soak.args.retention_s
    # Pruned when a crawl reports: what finished within the retention, at most one crawl a tick, and the crawl
    # under way (with a requeue run's few pages) on top.
    tasks_bound = pages * (math.ceil(retention_s / 60) + 2)
    failed_runs = {r.run_id for r in runs if r.status == "FAILURE"}
    alerted = {a.get("run_id") for a in alerts if a.get("run_id") in failed_runs}
    result: dict[str, Any] = {
        "ticks": ticks,
        "runs": by_job,
        "unfinished_runs": unfinished,
        "days": {"last": soak.day, "crawled": sorted(soak.crawled_days)},
        "books": {"present": len(present), "truth": len(truth), "problems": problems[:10]},
        "versions": {"stored": versions, "expected": expected_versions},
        "removed": {"stored": removed, "expected": expected_removed},
        "tasks": {
            "after_each_run": soak.tasks_after_run,
            "max": max(soak.tasks_after_run, default=0),
            "bound": tasks_bound,
            "without_retention": pages * len([r for r in runs if r.job_name == JOB]),
        },
        "alerts": {
            "received": len(alerts),
            "failed_runs": len(failed_runs),
            "failed_runs_alerted": len(alerted),
            "not_alerted": sorted(r[:8] for r in failed_runs - alerted),
        },
        "faults": soak.faults,
        "faults_not_injected": sorted(soak.pending_faults),
    }
    result["ok"] = (
        len(ticks) >= soak.args.ticks
        and all(t["ok"] for t in ticks)
        and not unfinished
        and not problems
        and soak.day in soak.crawled_days
        and versions == expected_versions
        and removed == expected_removed
        and result["tasks"]["max"] <= tasks_bound
        and alerted == failed_runs
        and not soak.pending_faults
    )
    return result


def _dagster_home(folder: Path) -> Path:
    """A DAGSTER_HOME with the project's dagster.yaml, run monitoring's timers cut from minutes to seconds."""
    home = folder / "dagster_home"
    home.mkdir()
    config = yaml.safe_load((PROJECT_ROOT / "dagster.yaml").read_text(encoding="utf-8"))
    config["run_monitoring"].update(poll_interval_seconds=5, free_slots_after_run_end_seconds=5)
    (home / "dagster.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return home


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ticks", type=int, default=20, help="schedule ticks (one a minute)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.3, help="sandbox delay per page (s)")
    parser.add_argument("--kill-at", type=int, default=4, help="tick whose run worker is SIGKILLed (0: none)")
    parser.add_argument("--pg-restart-at", type=int, default=8, help="tick during which PostgreSQL restarts (0: none)")
    parser.add_argument("--burst-at", type=int, default=12, help="tick of a 5xx burst (0: none)")
    parser.add_argument("--daemon-restart-at", type=int, default=16, help="tick of the host's power cut (0: none)")
    parser.add_argument("--burst-seconds", type=float, default=20.0)
    parser.add_argument("--retention-s", type=float, default=180.0, help="task retention (a few minutes)")
    parser.add_argument("--timeout-min", type=float, default=60.0)
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs) and print its path")
    args = parser.parse_args()

    configured = load_settings()
    # An embedded server of its own (restarted by a fault), unless DATABASE_URL names one.
    data_dir = configured.data_dir / "soak"
    shutil.rmtree(data_dir, ignore_errors=True)
    settings = load_settings(data_dir=data_dir)
    pg_dir = None if settings.database_url else settings.pg_dir
    base = resolve_database_url(settings)
    _scratch(_with_name(base, "postgres"), SOAK_DB, f"{SOAK_DB}_dagster")
    url = _with_name(base, SOAK_DB)
    with Database(url) as db:
        migrate(db)
    folder = Path(tempfile.mkdtemp(prefix="book-pipeline-soak-"))
    receiver = AlertReceiver()
    os.environ["DAGSTER_HOME"] = str(_dagster_home(folder))
    instance = dagster_environment(load_settings(database_url=url, data_dir=data_dir))
    os.environ.update(instance)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BOOK_PIPELINE_", "DATABASE_"))}
    env.update(
        DATABASE_URL=url,
        BOOK_PIPELINE_DATA_DIR=str(data_dir),
        BOOK_PIPELINE_FETCH_MODE="http",
        BOOK_PIPELINE_MIN_INTERVAL_S="0",
        BOOK_PIPELINE_WORKERS="2",
        BOOK_PIPELINE_CONCURRENCY="16",
        BOOK_PIPELINE_SCHEDULE_CRON="* * * * *",
        BOOK_PIPELINE_FAILED_TASKS_THRESHOLD="3",
        BOOK_PIPELINE_REQUEUE_BACKOFF_S="30",
        BOOK_PIPELINE_TASK_RETENTION_DAYS=repr(args.retention_s / 86400),
        BOOK_PIPELINE_ALERT_WEBHOOK_URL=receiver.url,
    )
    sandbox_log = folder / "sandbox.log"
    serve = [str(BIN / "book-pipeline"), "sandbox", "serve", "--port", "0", "--seed", str(args.seed)]
    with _process([*serve, "--latency", str(args.latency)], env, sandbox_log):
        site = _sandbox_url(sandbox_log)
        env["BOOK_PIPELINE_BASE_URL"] = site
        daemon = Daemon(env, folder)
        daemon.start()
        try:
            soak = Soak(args, env, site, pg_dir, daemon)
            timing = soak.run()
            failed = {r.run_id for r in soak.runs.all() if r.status == "FAILURE"}
            soak._wait_until(lambda: failed <= {a.get("run_id") for a in receiver.alerts}, 180)
            result = {**timing, **_account(soak, receiver.alerts, args.seed)}
        finally:
            daemon.stop()
    result["settings"] = {
        "ticks": args.ticks,
        "latency_s": args.latency,
        "retention_s": args.retention_s,
        "run_monitoring": "poll 5 s, slots freed 5 s after a run ends",
    }
    if pg_dir is not None:
        embedded.down(pg_dir)
    if args.keep:
        result["work_folder"] = str(folder)
    else:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(data_dir, ignore_errors=True)
    print(json.dumps(result, default=str))
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
