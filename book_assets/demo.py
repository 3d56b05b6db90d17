"""``book-pipeline demo``: the whole pipeline, end to end, through Dagster, against the local replica.

1. The project's PostgreSQL (``DATABASE_URL`` or the embedded server) and the Dagster instance on it
   (``dagster.yaml``; the environment comes from :func:`book_assets.dagster_instance.dagster_environment`).
2. The sandbox replica of books.toscrape.com, in this process, on a fixed port (8800 by default) so that
   book URLs are the same from one demo to the next: a re-run finds the same books "unchanged", and
   ``--day 1`` serves the next simulated day, whose changed prices become new book versions and whose
   removed books are marked removed.
3. One run of ``full_refresh_job``: ``listing_discovery`` → ``book_details`` → ``category_balanced_snapshot``
   and ``book_changes``, ``raw_archive`` (the day's WARC files indexed) and their checks, recorded in the
   project's instance, so ``make ui`` shows the run, metadata and checks.
4. A summary computed from the database (not from the run's own counters) and the run's metadata.

Data is kept between demos on purpose; ``make clean`` removes it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from book_assets.crawl.config import TASK_TYPES
from book_assets.crawl.drain import TICK_S
from book_assets.crawl.pipeline import ProgressBar
from book_assets.crawl.storage import book_counts
from book_assets.dagster_instance import dagster_environment
from book_assets.db.connection import Database, mask_url
from book_assets.db.migrations import migrate
from book_assets.defs.crawl.jobs import full_refresh_job, publish_job
from book_assets.defs.resources import (
    ArchiveResource,
    DatabaseResource,
    FetcherResource,
    SchedulingResource,
    SiteResource,
    crawl_config,
)
from book_assets.queue import TaskQueue
from book_assets.sandbox.server import SandboxServer
from book_assets.settings import Settings
from book_assets.sql import load_queries

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


def _metadata(results: list[dg.ExecuteInProcessResult], asset: str) -> dict[str, Any]:
    for result in results:
        for event in result.get_asset_materialization_events():
            mat = event.step_materialization_data.materialization
            if mat.asset_key == dg.AssetKey(asset):
                return {k: getattr(v, "value", v) for k, v in mat.metadata.items()}
    return {}


def demo_resources(sandbox: SandboxServer, overrides: dict[str, Any]) -> dict[str, dg.ConfigurableResource]:
    """The demo's resources: the sandbox as the site, and the database by reference to ``DATABASE_URL``.

    Why a reference: a resource built with the URL itself (``DatabaseResource(url=url)``) puts the URL, and
    its password, into the job snapshot that Dagster stores with every run and shows in the UI;
    ``EnvVar`` is stored as the variable's name and read when the step runs.
    """
    return {
        "database": DatabaseResource(url=dg.EnvVar("DATABASE_URL")),
        "site": SiteResource(base_url=f"{sandbox.url}/", allowed_domains=[sandbox.host]),
        "fetcher": FetcherResource(**{k: v for k, v in overrides.items() if v is not None}),
        "scheduling": SchedulingResource(),
        "archive": ArchiveResource(),
    }


#: The run's console shows warnings and errors only: the event log stays in the UI and the compute logs.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def _run_full_refresh(resources: dict[str, dg.ConfigurableResource]) -> list[dg.ExecuteInProcessResult]:
    """The project's full_refresh_job, then publish_job for today, bound to the sandbox's resources and
    recorded on the project's instance under their real job names and tags (no publishing after a failed
    crawl)."""
    from book_assets.definitions import ASSET_CHECKS, ASSETS

    demo_defs = dg.Definitions(
        assets=ASSETS,
        asset_checks=ASSET_CHECKS,
        jobs=[full_refresh_job, publish_job],
        resources=resources,
        executor=dg.in_process_executor,
    )
    results = []
    with dg.DagsterInstance.get() as instance:
        for name in ("full_refresh_job", "publish_job"):
            job = demo_defs.resolve_job_def(name)
            partitions = job.partitions_def
            results.append(
                job.execute_in_process(
                    run_config=QUIET,
                    instance=instance,
                    tags={"book-pipeline/demo": "true"},
                    partition_key=partitions.get_last_partition_key() if partitions is not None else None,
                    raise_on_error=False,
                )
            )
            if not results[-1].success:
                break
    return results


@contextmanager
def _progress_bar(url: str, resources: dict[str, Any]) -> Iterator[None]:
    """A progress bar on stderr fed by the queue's counters while the run executes."""
    config = crawl_config(resources["site"], resources["fetcher"], resources["scheduling"])
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
            resources = demo_resources(sandbox, overrides or {})
            fetcher = resources["fetcher"]
            echo(f"sandbox:  {sandbox.url}/ (day {day}); fetcher {fetcher.settings_overrides() or 'from the settings'}")
            with _progress_bar(url, resources):
                results = _run_full_refresh(resources)
        checks = {
            f"{e.asset_key.to_user_string()}:{e.check_name}": e.passed
            for result in results
            for e in result.get_asset_check_evaluations()
        }
        snapshot_rows = _metadata(results, "category_balanced_snapshot").get("dagster/row_count")
        site = f"{sandbox.url}/"
        stats = TaskQueue(db, task_types=TASK_TYPES).stats()
        return DemoReport(
            run_id=results[0].run_id,
            success=len(results) == 2 and all(result.success for result in results),
            site=site,
            counts=book_counts(db),
            site_counts={k: int(v) for k, v in db.query(CHECKS["site_book_counts"], {"prefix": site})[0].items()},
            failed_tasks=stats.total("failed"),
            pending_tasks=stats.total("pending"),
            this_run=_metadata(results, "book_details"),
            snapshot_rows=int(snapshot_rows) if snapshot_rows is not None else None,
            checks=checks,
            elapsed_s=time.monotonic() - started,
        )
