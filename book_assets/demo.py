"""``book-pipeline demo``: the whole pipeline, end to end, through Dagster, against the local replica.

1. The project's PostgreSQL (``DATABASE_URL`` or the embedded server) and the Dagster instance on it
   (``dagster.yaml``; the environment comes from :func:`book_assets.dagster_instance.dagster_environment`).
2. The sandbox replica of books.toscrape.com, in this process, on a fixed port (8800 by default) so that
   book URLs are the same from one demo to the next: a re-run finds the same books "unchanged", and
   ``--day 1`` serves the next simulated day, whose changed prices become new book versions and whose
   removed books are marked removed.
3. Two runs of the code location's own jobs, launched on the project's instance as the UI launches them
   (the location loaded from ``workspace.yaml`` in a code server; the sandbox given as run config):
   ``full_refresh_job`` (``listing_discovery`` → ``book_details`` and their checks), then ``publish_job``
   for today (``category_balanced_snapshot``, ``book_changes``, ``raw_archive`` and the snapshot's check).
   With a daemon running (``make ui``), the runs go through its run queue; otherwise straight to the run
   launcher. Either way they are runs of the location, like a scheduled one: run-status sensors (the
   failure alert) see them, and the daemon's run retries and the UI's re-execution can re-run them.
4. A summary computed from the database (not from the runs' own counters) and the runs' metadata.

Data is kept between demos on purpose; ``make clean`` removes it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import dagster as dg

from book_assets.crawl.config import make_queue
from book_assets.crawl.drain import TICK_S
from book_assets.crawl.pipeline import ProgressBar
from book_assets.dagster_instance import dagster_environment
from book_assets.db.connection import Database, mask_url
from book_assets.db.migrations import migrate
from book_assets.defs.resources import (
    FetcherResource,
    SchedulingResource,
    SiteResource,
    crawl_config,
)
from book_assets.sandbox.server import SandboxServer
from book_assets.settings import PROJECT_ROOT, Settings
from book_assets.sql import load_queries
from book_assets.store.books import book_counts

DEMO_PORT = 8800
CHECKS = load_queries("checks")


@dataclass
class DemoReport:
    """What the demo did and what the database holds afterwards."""

    run_id: str
    success: bool
    site: str
    counts: dict[str, int]
    site_counts: dict[str, int]
    failed_tasks: int
    pending_tasks: int
    this_run: dict[str, Any]
    snapshot_rows: int | None
    checks: dict[str, bool] = field(default_factory=dict)
    elapsed_s: float = 0.0

    def summary_lines(self) -> list[str]:
        c = self.counts
        r = self.this_run
        passed = sum(self.checks.values())
        s = self.site_counts
        lines = [
            f"Dagster run {self.run_id} {'succeeded' if self.success else 'FAILED'} in {self.elapsed_s:.1f}s",
            f"books:     {s['total']} stored from {self.site}, {s['unique_urls']} unique URLs, "
            f"{s['with_html']} with raw HTML",
        ]
        if c["total"] != s["total"]:
            lines.append(f"           ({c['total']} books in the database in all, from every site crawled)")
        lines += [
            f"versions:  {c.get('versions', 0)} book versions recorded in all",
            f"this run:  {r.get('books_new', 0)} new, {r.get('books_changed', 0)} changed, "
            f"{r.get('books_unchanged', 0)} unchanged, {r.get('failed', 0)} failed pages "
            f"({r.get('pages_per_s', 0)} pages/s)",
            f"queue:     {self.failed_tasks} failed task(s), {self.pending_tasks} still pending",
            f"snapshot:  {self.snapshot_rows if self.snapshot_rows is not None else '-'} rows",
            f"checks:    {passed}/{len(self.checks)} passed"
            + "".join(f"\n           FAILED {name}" for name, ok in sorted(self.checks.items()) if not ok),
        ]
        return lines


#: The code location, as workspace.yaml names it.
LOCATION = "book_assets"
#: How often the demo looks at its run's status.
POLL_S = 0.5


@dataclass
class DemoRun:
    """A finished run of the demo: its id, whether it succeeded, its materializations' metadata and checks."""

    run_id: str
    success: bool
    metadata: dict[str, dict[str, Any]]
    checks: dict[str, bool]


def sandbox_run_config(sandbox: SandboxServer, overrides: dict[str, Any]) -> dict[str, Any]:
    """Run config that points the location's resources at the sandbox (and the fetcher's overrides); the
    console logger shows warnings and errors only: the event log stays in the UI and the compute logs."""
    fetcher = {k: v for k, v in overrides.items() if v is not None}
    return {
        "resources": {
            "site": {"config": {"base_url": f"{sandbox.url}/", "allowed_domains": [sandbox.host]}},
            "fetcher": {"config": fetcher},
        },
        "loggers": {"console": {"config": {"log_level": "WARNING"}}},
    }


#: How late a daemon's heartbeat may be for the demo to count on it (it beats every 30 s). Dagster's own
#: tolerance is 30 minutes, for a UI's health page: a daemon stopped ten minutes ago would get the demo's runs
#: and leave them queued for good.
HEARTBEAT_TOLERANCE_S = 60.0


def _queue_is_served(instance: dg.DagsterInstance) -> bool:
    """Whether a daemon dequeues runs now (its heartbeat is recent and healthy)."""
    from dagster._daemon.controller import get_daemon_statuses
    from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon

    daemon = QueuedRunCoordinatorDaemon.daemon_type()
    statuses = get_daemon_statuses(
        instance, [daemon], ignore_errors=True, heartbeat_tolerance_seconds=HEARTBEAT_TOLERANCE_S
    )
    return statuses[daemon].healthy is True


def _launch(
    instance: dg.DagsterInstance, workspace: Any, job_name: str, run_config: dict[str, Any], tags: dict[str, str]
) -> str:
    """Create a run of the location's job ``job_name`` and hand it to the daemon's run queue when one is
    served, else to the instance's run launcher; returns its id."""
    location = workspace.get_code_location(LOCATION)
    repository = location.get_repository("__repository__")
    remote_job = repository.get_full_job(job_name)
    plan = location.get_execution_plan(
        remote_job, run_config, step_keys_to_execute=None, known_state=None, instance=instance
    )
    run = instance.create_run(
        job_name=job_name,
        run_id=None,
        run_config=run_config,
        resolved_op_selection=None,
        step_keys_to_execute=plan.execution_plan_snapshot.step_keys_to_execute,
        op_selection=None,
        status=None,
        root_run_id=None,
        parent_run_id=None,
        tags=tags,
        job_snapshot=remote_job.job_snapshot,
        execution_plan_snapshot=plan.execution_plan_snapshot,
        parent_job_snapshot=remote_job.parent_job_snapshot,
        remote_job_origin=remote_job.get_remote_origin(),
        job_code_origin=remote_job.get_python_origin(),
        asset_selection=None,
        asset_check_selection=None,
        asset_graph=repository.asset_graph,
    )
    if _queue_is_served(instance):
        instance.submit_run(run.run_id, workspace)
    else:
        instance.launch_run(run.run_id, workspace)
    return run.run_id


def _finished(instance: dg.DagsterInstance, run_id: str) -> DemoRun:
    """``run_id`` once it has finished, with what it recorded."""
    while True:
        run = instance.get_run_by_id(run_id)
        if run is not None and run.is_finished:
            break
        time.sleep(POLL_S)
    metadata: dict[str, dict[str, Any]] = {}
    checks: dict[str, bool] = {}
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None:
            continue
        if event.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION:
            mat = event.step_materialization_data.materialization
            metadata[mat.asset_key.to_user_string()] = {k: getattr(v, "value", v) for k, v in mat.metadata.items()}
        elif event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
            check = event.asset_check_evaluation_data
            checks[f"{check.asset_key.to_user_string()}:{check.check_name}"] = check.passed
    return DemoRun(run_id, run.is_success, metadata, checks)


def _run_jobs(sandbox: SandboxServer, overrides: dict[str, Any]) -> list[DemoRun]:
    """``full_refresh_job``, then (if it succeeded) ``publish_job`` for today, each a run of the code location
    on the project's instance, waited for."""
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget

    run_config = sandbox_run_config(sandbox, overrides)
    tags = {"book-pipeline/demo": "true"}
    today = datetime.now(UTC).date().isoformat()
    runs: list[DemoRun] = []
    with (
        dg.DagsterInstance.get() as instance,
        WorkspaceProcessContext(
            instance,
            WorkspaceFileTarget(paths=[str(PROJECT_ROOT / "workspace.yaml")]),
            code_server_log_level="WARNING",  # the console stays the progress bar and the summary
        ) as ctx,
    ):
        workspace = ctx.create_request_context()
        errors = workspace.get_code_location_error(LOCATION)
        if errors is not None:
            raise RuntimeError(f"the code location {LOCATION} did not load: {errors.message}")
        for job_name, job_tags in (
            ("full_refresh_job", tags),
            ("publish_job", {**tags, "dagster/partition": today}),
        ):
            runs.append(_finished(instance, _launch(instance, workspace, job_name, run_config, job_tags)))
            if not runs[-1].success:
                break
    return runs


@contextmanager
def _progress_bar(url: str, site: SiteResource, fetcher: FetcherResource) -> Iterator[None]:
    """A progress bar on stderr fed by the queue's counters while the runs execute."""
    config = crawl_config(site, fetcher, SchedulingResource())
    done = threading.Event()

    def show() -> None:
        with ProgressBar(url, config) as bar:
            while not done.wait(TICK_S):
                bar.update()
            bar.update()

    thread = threading.Thread(target=show, name="demo-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=10)


def run_demo(
    settings: Settings,
    *,
    port: int = DEMO_PORT,
    day: int = 0,
    overrides: dict[str, Any] | None = None,
    echo: Callable[[str], None] = print,
) -> DemoReport:
    """Run the demo and return its report (``echo`` receives progress lines).

    ``overrides``: settings of the fetcher (``fetch_mode``, ``workers``, ``concurrency``) for this demo.
    """
    started = time.monotonic()
    env = dagster_environment(settings)
    os.environ.update(env)  # dagster.yaml reads DAGSTER_PG_*; DagsterInstance.get() reads DAGSTER_HOME
    url = env["DATABASE_URL"]
    with Database(url, application_name="book-pipeline demo") as db:
        migrate(db)
        echo(f"database: {mask_url(url)}; Dagster instance: {env['DAGSTER_HOME']}/dagster.yaml")
        with SandboxServer(day=day, port=port) as sandbox:
            fetcher = FetcherResource(**{k: v for k, v in (overrides or {}).items() if v is not None})
            echo(f"sandbox:  {sandbox.url}/ (day {day}); fetcher {fetcher.settings_overrides() or 'from the settings'}")
            site_resource = SiteResource(base_url=f"{sandbox.url}/", allowed_domains=[sandbox.host])
            with _progress_bar(url, site_resource, fetcher):
                runs = _run_jobs(sandbox, overrides or {})
        metadata = {asset: values for run in runs for asset, values in run.metadata.items()}
        checks = {name: passed for run in runs for name, passed in run.checks.items()}
        snapshot_rows = metadata.get("category_balanced_snapshot", {}).get("dagster/row_count")
        site = f"{sandbox.url}/"
        stats = make_queue(db).stats()
        return DemoReport(
            run_id=runs[0].run_id,
            success=len(runs) == 2 and all(run.success for run in runs),
            site=site,
            counts=book_counts(db),
            site_counts={k: int(v) for k, v in db.query(CHECKS["site_book_counts"], {"prefix": site})[0].items()},
            failed_tasks=stats.total("failed"),
            pending_tasks=stats.total("pending"),
            this_run=metadata.get("book_details", {}),
            snapshot_rows=int(snapshot_rows) if snapshot_rows is not None else None,
            checks=checks,
            elapsed_s=time.monotonic() - started,
        )
