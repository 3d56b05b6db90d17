"""The workers' endpoint: off unless a port is set, on loopback by default, and never a reason to stop a crawl."""

from __future__ import annotations

import multiprocessing
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from book_assets.crawl.config import DETAIL, CrawlConfig, make_queue
from book_assets.db.connection import Database
from book_assets.db.embedded import free_port
from book_assets.observe import metrics
from book_assets.settings import default
from book_assets.store.lifecycle import last_successful_crawl
from book_assets_tests.conftest import child_env


@pytest.fixture(autouse=True)
def _no_endpoint_left() -> Iterator[None]:
    yield
    metrics.stop_serving(final_scrape=False)


def test_metrics_are_off_by_default_and_a_worker_then_records_nothing() -> None:
    assert default("metrics_port") is None and default("metrics_host") == "127.0.0.1"
    assert metrics.serve_workers(default("metrics_host"), default("metrics_port"), 0) is None
    recorder = metrics.worker_metrics("http")
    assert type(recorder) is metrics.WorkerMetrics and metrics.directory() is None


def _in_a_fresh_process(scenario: Callable[[int], str]) -> str:
    """What ``scenario(port)`` returns, run in a fresh interpreter as a drain's process: a process writes its
    own values to one multiprocess folder in its life (its first endpoint's), as a CLI or Dagster step does."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        text: str = pool.apply(scenario, (free_port(),))
    return text


def _scrape(port: int) -> str:
    return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text


def _serves_a_completion_and_a_failure(port: int) -> str:
    try:
        endpoint = metrics.serve_workers("127.0.0.1", port, 0)
        assert endpoint is not None and endpoint.server.server_address[0] == "127.0.0.1"
        recorder = metrics.worker_metrics("http")
        recorder.completed("detail", 0.01)
        recorder.failed("detail", "http_5xx", "retry")
        return _scrape(port)
    finally:
        metrics.stop_serving(final_scrape=False)


def test_the_endpoint_serves_a_workers_figures_on_loopback_as_they_are_recorded() -> None:
    text = _in_a_fresh_process(_serves_a_completion_and_a_failure)
    assert 'book_pipeline_tasks_completed_total{mode="http",task_type="detail"} 1.0' in text
    assert 'error_kind="http_5xx",mode="http",outcome="retry",task_type="detail"} 1.0' in text


def test_a_port_in_use_turns_metrics_off_with_a_warning_instead_of_failing(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert metrics.serve_workers("127.0.0.1", port, 0) is None
    assert f"metrics off: cannot serve on 127.0.0.1:{port} (metrics_port)" in caplog.text
    assert type(metrics.worker_metrics("http")) is metrics.WorkerMetrics


def test_the_metrics_command_serves_the_queue_on_loopback_until_stopped(db: Database, database_url: str) -> None:
    queue = make_queue(db, CrawlConfig.resolve(base_url="https://books.example/"))
    queue.enqueue(DETAIL, {"url": "https://books.example/a.html"}, group="Travel")
    port = free_port()
    command = [sys.executable, "-m", "book_assets.cli", "metrics", "--port", str(port)]
    process = subprocess.Popen(command, env=child_env(DATABASE_URL=database_url), stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        assert f"queue metrics on http://127.0.0.1:{port}/metrics" in process.stderr.readline()
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
        assert "book_pipeline_queue_up 1.0" in text
        assert 'book_pipeline_queue_tasks{domain="books.example",status="pending",task_type="detail"} 1.0' in text
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0


def _samples(text: str) -> dict[str, float]:
    """The unlabelled samples of an exposition: name to value."""
    return {line.split()[0]: float(line.split()[1]) for line in text.splitlines() if line and line[0] != "#"}


def test_the_queue_exporter_serves_when_the_latest_successful_crawl_ended(db: Database, database_url: str) -> None:
    queue = make_queue(db, CrawlConfig.resolve(base_url="https://books.example/"))
    port = free_port()
    _served, stop = metrics.serve_queue(
        queue, "127.0.0.1", port, answer_within_s=30, last_success=lambda: last_successful_crawl(db)
    )
    gauge = "book_pipeline_last_successful_crawl_timestamp_seconds"
    try:
        assert _samples(_scrape(port))["book_pipeline_queue_up"] == 1 and gauge not in _samples(_scrape(port))
        db.query(
            "INSERT INTO crawls (site, started_at, finished_at, outcome) VALUES"
            " ('books', '2026-12-01T02:00Z', '2026-12-01T03:00Z', 'decided'),"
            " ('books', '2026-12-02T02:00Z', '2026-12-02T03:00Z', 'undecided'),"
            " ('books', '2026-12-03T02:00Z', '2026-12-03T02:10Z', 'abandoned'),"
            " ('books', '2026-12-04T02:00Z', NULL, NULL) RETURNING id"
        )
        decided = datetime(2026, 12, 1, 3, tzinfo=UTC).timestamp()
        assert _samples(_scrape(port))[gauge] == decided
    finally:
        stop()


@dataclass
class _Stats:
    lost_leases: int = 0
    released: int = 0


@dataclass
class _Fetchers:
    counters: dict[str, int] = field(default_factory=dict)
    browsers: int = 0

    def fetcher_stats(self) -> dict[str, int]:
        return dict(self.counters)


def _samples_counts_kept_elsewhere(port: int) -> str:
    try:
        metrics.serve_workers("127.0.0.1", port, 0)
        recorder = metrics.worker_metrics("browser")
        stats, fetchers = _Stats(lost_leases=1), _Fetchers({"relaunches": 1, "crashes": 1}, browsers=1)
        recorder.sample(3, stats, fetchers, force=True)
        recorder.sample(3, stats, fetchers, force=True)  # nothing new: nothing added
        stats.released, fetchers.counters["crashes"] = 2, 2
        recorder.sample(0, stats, fetchers, force=True)
        return _scrape(port)
    finally:
        metrics.stop_serving(final_scrape=False)


def test_counts_kept_by_the_worker_and_its_fetchers_reach_the_counters_once() -> None:
    lines = _in_a_fresh_process(_samples_counts_kept_elsewhere).splitlines()
    for line in (
        "book_pipeline_browser_starts_total 2.0",
        "book_pipeline_browser_crashes_total 2.0",
        "book_pipeline_lease_losses_total 1.0",
        "book_pipeline_tasks_released_total 2.0",
        "book_pipeline_pages_in_flight 0.0",
        "book_pipeline_workers 1.0",
    ):
        assert line in lines


def _forks_after_recording(port: int) -> str:
    try:
        endpoint = metrics.serve_workers("127.0.0.1", port, 0)
        assert endpoint is not None
        recorder = metrics.worker_metrics("http")
        recorder.completed("detail", 0.01)
        child = os.fork()
        if child == 0:  # the child: one completion of its own, then gone without running the parent's exit hooks
            try:
                recorder.completed("detail", 0.01)
            finally:
                os._exit(0)
        _pid, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        recorder.completed("detail", 0.01)
        assert f"counter_{child}.db" in os.listdir(endpoint.path)  # the child's own file
        return _scrape(port)
    finally:
        metrics.stop_serving(final_scrape=False)


def test_a_process_forked_after_recording_writes_its_own_figures_and_the_endpoint_sums_both() -> None:
    lines = _in_a_fresh_process(_forks_after_recording).splitlines()
    assert 'book_pipeline_tasks_completed_total{mode="http",task_type="detail"} 3.0' in lines


def _records_store_durations(port: int) -> str:
    try:
        metrics.serve_workers("127.0.0.1", port, 0)
        recorder = metrics.worker_metrics("http")
        for seconds in (0.003, 0.01, 7.0, 0.001):  # STORE_BUCKETS: <= 0.005, <= 0.01 (its bound), over 5.0, 0.001
            recorder.completed("detail", seconds)
        return _scrape(port)
    finally:
        metrics.stop_serving(final_scrape=False)


def test_a_workers_store_durations_fall_in_the_store_buckets_by_their_upper_bounds() -> None:
    text = _in_a_fresh_process(_records_store_durations)
    lines = [line for line in text.splitlines() if line.startswith("book_pipeline_store_duration_seconds")]
    for line in (
        'book_pipeline_store_duration_seconds_bucket{le="0.001",task_type="detail"} 1.0',
        'book_pipeline_store_duration_seconds_bucket{le="0.005",task_type="detail"} 2.0',
        'book_pipeline_store_duration_seconds_bucket{le="0.01",task_type="detail"} 3.0',
        'book_pipeline_store_duration_seconds_bucket{le="5.0",task_type="detail"} 3.0',
        'book_pipeline_store_duration_seconds_bucket{le="+Inf",task_type="detail"} 4.0',
        'book_pipeline_store_duration_seconds_count{task_type="detail"} 4.0',
    ):
        assert line in lines
    (total,) = [line for line in lines if line.startswith("book_pipeline_store_duration_seconds_sum")]
    assert float(total.split()[-1]) == pytest.approx(7.014)


@pytest.mark.parametrize(("port", "imported"), [(9464, True), (None, False)])
def test_a_drains_workers_find_prometheus_client_imported_by_the_fork_server_only_when_metrics_are_on(
    port: int | None, imported: bool, tmp_path: Path
) -> None:
    seen = tmp_path / "seen"
    code = (
        "import sys\n"
        "from book_assets.crawl.drain import warm_up, worker_context\n"
        f"warm_up(2, {port})\n"
        f"child = worker_context({port}).Process(target=exec, args=(\n"
        f"    \"import sys; open({str(seen)!r}, 'w').write(str('prometheus_client' in sys.modules))\",))\n"
        "child.start()\n"
        "child.join(60)\n"
        "assert child.exitcode == 0, child.exitcode\n"
    )
    subprocess.run([sys.executable, "-c", code], env=child_env(), check=True, timeout=120)
    assert seen.read_text() == str(imported)
