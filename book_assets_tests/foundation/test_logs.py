"""Logging is configured once per process (book_assets/logs.py): a CLI crawl's lines, its workers' included,
carry a UTC time and a level, INFO is kept, JSON lines parse and carry the Dagster run id when it is known,
and the trace id of the current span when traces are on, without logging ever importing OpenTelemetry."""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from book_assets import logs
from book_assets.db.connection import Database
from book_assets.settings import ConfigError, load_settings
from book_assets_tests.conftest import child_env

TEXT_LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+( \[.*\])?: "
)
RUN_ID = "0f3c9a52-7d1e-4b1a-9a57-5c2f0e8d1b44"


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """The root logger as the test found it, after the test configured it to write into a string."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    stream = io.StringIO()
    yield stream
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)


def test_text_lines_have_a_utc_time_a_level_the_logger_and_the_run_id_when_known(
    captured: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(logs.RUN_ID_ENV, raising=False)
    logs.configure("INFO", "text", captured)
    logging.getLogger("book_assets.crawl.robots").info("robots.txt of %s: allowed", "http://a.example")
    logging.getLogger("book_assets.crawl.robots").debug("not shown at INFO")
    monkeypatch.setenv(logs.RUN_ID_ENV, RUN_ID)
    logging.getLogger("book_assets.queue").warning("lease lost")
    first, second = captured.getvalue().splitlines()
    assert TEXT_LINE.match(first) and first.endswith(
        " INFO book_assets.crawl.robots: robots.txt of http://a.example: allowed"
    )
    assert TEXT_LINE.match(second) and second.endswith(f" WARNING book_assets.queue [run={RUN_ID}]: lease lost")


def test_configuring_again_replaces_its_own_handler_only(captured: io.StringIO) -> None:
    other = logging.StreamHandler(io.StringIO())
    logging.getLogger().addHandler(other)
    logs.configure("INFO", "text", io.StringIO())
    logs.configure("DEBUG", "json", captured)
    logging.getLogger("x").debug("once")
    assert len(captured.getvalue().splitlines()) == 1
    assert other in logging.getLogger().handlers
    logging.getLogger().removeHandler(other)


def test_json_lines_carry_the_trace_id_of_the_current_span(captured: io.StringIO) -> None:
    from opentelemetry import trace

    logs.configure("INFO", "json", captured)
    context = trace.SpanContext(
        trace_id=0x5B8EFFF798038103D269B633813FC60C, span_id=0xEEE19B7EC3C1B174, is_remote=False
    )
    with trace.use_span(trace.NonRecordingSpan(context)):
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            logging.getLogger("book_assets.crawl.worker").exception("page failed")
    logging.getLogger("book_assets.crawl.worker").info("no span now")
    inside, outside = (json.loads(line) for line in captured.getvalue().splitlines())
    assert inside["trace_id"] == "5b8efff798038103d269b633813fc60c" and "RuntimeError: boom" in inside["exception"]
    assert (inside["level"], inside["logger"], inside["message"]) == (
        "ERROR",
        "book_assets.crawl.worker",
        "page failed",
    )
    assert "trace_id" not in outside


def test_logging_never_imports_opentelemetry() -> None:
    script = (
        "import logging, sys\n"
        "from book_assets import logs\n"
        "logs.configure('INFO', 'json')\n"
        "logging.getLogger('x').info('hello')\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')], 'opentelemetry imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stderr)["message"] == "hello"


def test_log_settings_take_any_case_and_refuse_unknown_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOOK_PIPELINE_LOG_LEVEL", "debug")
    monkeypatch.setenv("BOOK_PIPELINE_LOG_FORMAT", "JSON")
    settings = load_settings()
    assert (settings.log_level, settings.log_format) == ("DEBUG", "json")
    monkeypatch.setenv("BOOK_PIPELINE_LOG_FORMAT", "xml")
    with pytest.raises(ConfigError, match="log_format"):
        load_settings()


def _crawl(database_url: str, site: Any, cwd: Path, **variables: str) -> list[str]:
    """A CLI crawl of the site's Poetry books; the lines it wrote to stderr."""
    args = ["crawl", "--base-url", site.url + "/", "--fetch", "http", "--categories", "Poetry", "--no-progress"]
    proc = subprocess.run(
        [sys.executable, "-m", "book_assets.cli", *args],
        env=child_env(DATABASE_URL=database_url, **variables),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stderr.splitlines()


def test_a_cli_crawl_logs_timestamped_levelled_info_lines_from_its_workers(
    db: Database, database_url: str, sandbox_factory: Any, tmp_path: Path
) -> None:
    lines = _crawl(database_url, sandbox_factory(), tmp_path)
    # robots.txt is read by a worker process, forked from the fork server: configured there too.
    (robots,) = [line for line in lines if "robots.txt of" in line]
    assert TEXT_LINE.match(robots) and " INFO book_assets.crawl.robots: " in robots, robots


def test_a_cli_crawl_in_json_writes_lines_that_parse_and_carry_the_run_id(
    db: Database, database_url: str, sandbox_factory: Any, tmp_path: Path
) -> None:
    lines = _crawl(database_url, sandbox_factory(), tmp_path, BOOK_PIPELINE_LOG_FORMAT="json", DAGSTER_RUN_ID=RUN_ID)
    records = [json.loads(line) for line in lines if line.startswith("{")]
    (robots,) = [r for r in records if r["message"].startswith("robots.txt of")]
    assert (robots["level"], robots["logger"], robots["run_id"]) == ("INFO", "book_assets.crawl.robots", RUN_ID)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", robots["time"])
    assert all(r["run_id"] == RUN_ID for r in records)


#: A crawl of the site's Poetry books through the crawl's Dagster steps, in one process (argv: the database URL
#: and the site's URL); prints the run id. Its two workers are forked from the fork server ``seed_queue`` started.
DAGSTER_CRAWL = """
import sys
import dagster as dg
from book_assets.defs.crawl.steps import drain_queue, report_crawl, seed_queue, share_work
from book_assets.defs.resources import DatabaseResource, FetcherResource, SchedulingResource, SiteResource

database_url, site_url, host = sys.argv[1:]

@dg.job(
    resource_defs={
        "database": DatabaseResource(url=database_url),
        "site": SiteResource(base_url=site_url, allowed_domains=[host], categories=["Poetry"]),
        "fetcher": FetcherResource(fetch_mode="http", workers=2, concurrency=4),
        "scheduling": SchedulingResource(),
    }
)
def crawl():
    shared, steps = share_work(seed_queue())
    report_crawl(shared=shared, drained=steps.map(drain_queue).collect())

result = crawl.execute_in_process()
assert result.success
print(result.run_id)
"""


def test_a_dagster_crawls_worker_lines_carry_its_run_id(
    db: Database, database_url: str, sandbox_factory: Any, tmp_path: Path
) -> None:
    """Dagster sets no ``DAGSTER_RUN_ID`` (only the Kubernetes manifests do): the crawl's steps give their run's
    id to the workers they start, forked from a fork server started before the id was known."""
    site = sandbox_factory()
    proc = subprocess.run(
        [sys.executable, "-c", DAGSTER_CRAWL, database_url, site.url + "/", site.host],
        env=child_env(BOOK_PIPELINE_LOG_FORMAT="json"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_id = proc.stdout.strip().splitlines()[-1]
    records = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith('{"time"')]
    (robots,) = [r for r in records if r["message"].startswith("robots.txt of")]
    assert robots.get("run_id") == run_id, robots
    assert all(r.get("run_id") == run_id for r in records)
