"""A real Prometheus scrapes a crawl of the sandbox with faults on; at the end its figures equal the database's.

Prometheus (Debian's ``prometheus``, installed by ``make setup-tests``) scrapes the drain's worker endpoint
(two worker processes forked from the fork server, summed through prometheus_client's multiprocess folder)
and the queue exporter every second. The verdict waits for a scrape that started after the crawl ended, so
it does not depend on how fast the machine is.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from book_assets.crawl.config import TASK_TYPES, make_queue
from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets.db.embedded import free_port
from book_assets.observe import metrics
from book_assets.queue import FailOutcome
from book_assets.sandbox import Faults
from book_assets.settings import default
from book_assets_tests.crawl.conftest import sandbox_config

#: A bound on waiting for Prometheus, only so a broken set-up fails instead of hanging; never a verdict.
PATIENCE_S = 180.0


def prometheus_binary() -> str:
    found = shutil.which("prometheus") or "/usr/bin/prometheus"
    if not Path(found).exists():
        pytest.skip("prometheus not found (Debian package prometheus): cannot scrape a crawl")
    return found


class Prometheus:
    """A Prometheus server of our own over ``targets`` (job -> host:port), scraping every second."""

    def __init__(self, folder: Path, targets: dict[str, str]) -> None:
        self.port = free_port()
        jobs = "".join(
            f"  - job_name: {job}\n    static_configs:\n      - targets: ['{target}']\n"
            for job, target in targets.items()
        )
        config = folder / "prometheus.yml"
        config.write_text(f"global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n{jobs}")
        self.process = subprocess.Popen(
            [
                prometheus_binary(),
                f"--config.file={config}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(folder / "prometheus.log").open("w"),
        )
        self.url = f"http://127.0.0.1:{self.port}"
        self._until(lambda: httpx.get(f"{self.url}/-/ready", timeout=2).status_code == 200, "ready")

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """``promql`` evaluated now, or at ``at`` (epoch seconds)."""
        params = {"query": promql} if at is None else {"query": promql, "time": str(at)}
        answer = httpx.get(f"{self.url}/api/v1/query", params=params, timeout=10).json()
        assert answer["status"] == "success", answer
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def by(self, promql: str, label: str, at: float | None = None) -> dict[str, int]:
        return {r["metric"].get(label, ""): round(float(r["value"][1])) for r in self.query(promql, at)}

    def scraped_after(self, job: str, moment: float) -> float:
        """Wait for a successful scrape of ``job`` that started after ``moment`` (epoch seconds) to be stored;
        returns when it started. Figures are read at that moment: a later scrape that fails (1 s is a short
        timeout on a busy machine) marks every series of its job stale, and a query of now would find none."""
        scraped: list[float] = []

        def done() -> bool:
            found = self.query(f'timestamp(up{{job="{job}"}} == 1)')
            if found and float(found[0]["value"][1]) > moment:
                scraped.append(float(found[0]["value"][1]))
            return bool(scraped)

        self._until(done, f"a scrape of {job} after the crawl")
        return scraped[0]

    def _until(self, ok: Any, what: str) -> None:
        deadline = time.monotonic() + PATIENCE_S
        while time.monotonic() < deadline:
            try:
                if ok():
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"Prometheus: no {what} within {PATIENCE_S:.0f}s")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


@pytest.fixture
def prometheus_folder(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    metrics.stop_serving(final_scrape=False)


def test_prometheus_figures_of_a_faulty_crawl_equal_the_databases(
    db: Database, database_url: str, sandbox_factory: Any, prometheus_folder: Path
) -> None:
    server = sandbox_factory(faults=Faults(error_rate=0.06, reset_rate=0.03, truncate_rate=0.02))
    worker_port, queue_port = free_port(), free_port()
    config = sandbox_config(
        server.url,
        workers=2,
        max_attempts=2,
        categories=("Travel", "Mystery", "Poetry", "Classics"),
        metrics_port=worker_port,
        metrics_final_scrape_s=0,
    )
    queue = make_queue(db, config)
    # The exporter reads on a connection of its own, as `book-pipeline metrics` does: the test's reads on
    # ``db`` never meet a scrape's on one connection.
    exporter_db = Database(database_url, application_name="book-pipeline-metrics")
    _exporter, stop_exporter = metrics.serve_queue(
        make_queue(exporter_db, config), "127.0.0.1", queue_port, answer_within_s=default("queue_metrics_timeout_s")
    )
    prometheus = Prometheus(
        prometheus_folder, {"workers": f"127.0.0.1:{worker_port}", "queue": f"127.0.0.1:{queue_port}"}
    )
    try:
        since = queue.now()
        crawl(database_url, config)
        ended = time.time()
        at_workers = prometheus.scraped_after("workers", ended)
        at_queue = prometheus.scraped_after("queue", ended)

        stats = queue.stats()
        completed = {t: stats.counts.get(t, {}).get("completed", 0) for t in TASK_TYPES}
        dead = stats.failed_kinds()
        retries = queue.activity_since(since).retries
        assert sum(dead.values()) > 0 and retries > 0, "the faults should have failed and retried pages"

        workers_completed = prometheus.by(
            "sum by (task_type) (book_pipeline_tasks_completed_total)", "task_type", at_workers
        )
        assert workers_completed == completed
        assert (
            prometheus.by(
                f'sum by (error_kind) (book_pipeline_task_failures_total{{outcome="{FailOutcome.DEAD}"}})',
                "error_kind",
                at_workers,
            )
            == dead
        )
        assert prometheus.by(
            f'sum(book_pipeline_task_failures_total{{outcome="{FailOutcome.RETRY}"}})', "", at_workers
        ) == {"": retries}
        # Every page fetched got a response or a kind of failure; successes are what was completed or parsed.
        fetched = prometheus.by("sum(book_pipeline_fetches_total)", "", at_workers)[""]
        assert fetched >= sum(completed.values())

        queue_completed = prometheus.by(
            'sum by (task_type) (book_pipeline_queue_tasks{status="completed"})', "task_type", at_queue
        )
        assert queue_completed == completed
        assert (
            prometheus.by("sum by (error_kind) (book_pipeline_queue_dead_letters) > 0", "error_kind", at_queue) == dead
        )
        assert prometheus.by("book_pipeline_queue_up", "", at_queue) == {"": 1}
        # No label or value names a URL or carries the database's credentials.
        password = urlsplit(database_url).password
        for port in (worker_port, queue_port):
            text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
            assert "book_pipeline_" in text and "://" not in text
            assert password is None or password not in text
        # The workers have ended: their live gauges (workers, pages in flight, memory) went with them.
        assert prometheus.query("book_pipeline_workers", at_workers) == []
        assert prometheus.query("book_pipeline_worker_resident_memory_bytes", at_workers) == []
    finally:
        prometheus.stop()
        stop_exporter()
        exporter_db.close()
