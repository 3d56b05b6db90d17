"""The quotes' day as the real Dagster daemon runs it: ``book-pipeline daemon`` on the project's ``dagster.yaml``,
the location pointed at the quotes stand-in, ``quotes_daily_full_refresh`` on a one-minute cron.

A tick's ``quotes_full_refresh_job`` run succeeds with its blocking checks, ``publish_after_crawl`` publishes the
day's ``quotes/category_balanced_snapshot`` after it, and nothing of the books runs or is written. What a killed
run does (marked failed, retried, its workers' pages released) is the engine's, the same for every catalogue:
``test_daemon.py`` holds it for the books.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from book_assets.db.connection import Database
from book_assets.sandbox.quotes.server import QuotesServer
from book_assets_tests.dagster.test_daemon import (
    DagsterRuns,
    _dagster_url,
    _wait,
    daemon_environment,
    running_daemon,
    start_schedule,
)

pytestmark = pytest.mark.slow

SNAPSHOT = '["quotes", "category_balanced_snapshot"]'


@pytest.fixture
def quotes_daemon(
    database_url: str, tmp_path: Path, quotes_site: QuotesServer
) -> Iterator[tuple[dict[str, str], Path]]:
    """The daemon with the location's site resource on the quotes stand-in; yields its environment and log."""
    with (
        daemon_environment(
            database_url,
            tmp_path,
            BOOK_PIPELINE_BASE_URL=quotes_site.url + "/",
            BOOK_PIPELINE_FETCH_MODE="http",
            BOOK_PIPELINE_MIN_INTERVAL_S="0",
            BOOK_PIPELINE_WORKERS="1",
            BOOK_PIPELINE_SCHEDULE_CRON="* * * * *",
        ) as env,
        running_daemon(env, tmp_path) as log,
    ):
        yield env, log


def test_the_daemon_crawls_quotes_on_their_schedule_and_publishes_their_day_leaving_the_books_alone(
    db: Database, database_url: str, quotes_daemon: tuple[dict[str, str], Path], tmp_path: Path
) -> None:
    env, log = quotes_daemon
    start_schedule("quotes_daily_full_refresh", env, tmp_path)
    runs = DagsterRuns(_dagster_url(database_url))

    _wait(
        "a scheduled quotes_full_refresh_job run succeeded",
        lambda: runs.with_status("quotes_full_refresh_job", "SUCCESS"),
        240,
        log,
    )
    assert db.query("SELECT count(*) AS n FROM authors")[0]["n"] == 50

    def published() -> list[dict[str, object]]:
        return runs.db.query(
            "SELECT partition, run_id FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION' "
            "AND asset_key = %s",
            (SNAPSHOT,),
        )

    (snapshot,) = _wait("quotes/category_balanced_snapshot published", published, 180, log)
    crawled = runs.db.query(
        "SELECT to_char(timezone('UTC', timestamp), 'YYYY-MM-DD') AS day FROM event_logs "
        "WHERE dagster_event_type = 'ASSET_MATERIALIZATION' AND asset_key = %s ORDER BY id LIMIT 1",
        (json.dumps(["quotes", "details"]),),
    )
    assert snapshot["partition"] == crawled[0]["day"]  # the day of the crawl
    tags = runs.db.query("SELECT key, value FROM run_tags WHERE run_id = %s", (snapshot["run_id"],))
    assert {"key": "dagster/sensor_name", "value": "publish_after_crawl"} in tags
    assert (tmp_path / "data" / "quotes" / "snapshots" / str(snapshot["partition"])).is_dir()

    # Nothing of the books: no run of their jobs, no task of their kinds, no book stored.
    jobs = {row["pipeline_name"] for row in runs.db.query("SELECT DISTINCT pipeline_name FROM runs")}
    assert jobs <= {"quotes_full_refresh_job", "__ASSET_JOB"}, jobs
    assert db.query("SELECT count(*) AS n FROM tasks WHERE task_type IN ('listing', 'detail')")[0]["n"] == 0
    assert db.query("SELECT count(*) AS n FROM books")[0]["n"] == 0
