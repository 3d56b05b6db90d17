"""One crawl of a catalogue at a time: while a crawl run is in progress (a run record STARTED on a real
instance), a tick of ``daily_full_refresh`` is skipped with a reason naming the run, and
``failed_tasks_sensor`` waits, keeping its cursor; once the run ended, both request their run. Another
catalogue's crawl holds neither catalogue's schedule back."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from book_assets.db.connection import Database
from book_assets.defs.crawl.assets import CRAWL_RUN_TAGS, crawl_run_tags
from book_assets.defs.crawl.schedules import daily_full_refresh_schedule, full_refresh_schedule
from book_assets.sites.registry import site_named
from book_assets_tests.dagster.test_dagster_sensors import THRESHOLD, evaluate, fail_tasks, skip_message

TICK = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test(temp_dir=str(tmp_path)) as inst:
        yield inst


def crawl_started(instance: dg.DagsterInstance, tags: dict[str, str] = CRAWL_RUN_TAGS) -> dg.DagsterRun:
    """A crawl run of the queue jobs, STARTED (its run worker draining the queue)."""
    return instance.create_run_for_job(
        dg.GraphDefinition(name="full_refresh_job").to_job(), tags=tags, status=dg.DagsterRunStatus.STARTED
    )


def schedule_tick(
    instance: dg.DagsterInstance, schedule: dg.ScheduleDefinition | None = None
) -> tuple[list[dg.RunRequest], str | None]:
    schedule = schedule or daily_full_refresh_schedule("0 3 * * *")
    with dg.build_schedule_context(instance=instance, scheduled_execution_time=TICK) as context:
        data = schedule.evaluate_tick(context)
    return list(data.run_requests or []), data.skip_message


def test_a_schedule_tick_while_a_crawl_runs_is_skipped_with_the_running_crawl_named(
    instance: dg.DagsterInstance,
) -> None:
    run = crawl_started(instance)
    requests, skipped = schedule_tick(instance)
    assert requests == []
    assert skipped is not None and run.run_id[:8] in skipped and "STARTED" in skipped
    instance.report_run_failed(run)
    requests, skipped = schedule_tick(instance)
    assert len(requests) == 1 and skipped is None


def test_a_catalogues_schedule_waits_for_its_own_crawl_and_not_for_another_catalogues(
    instance: dg.DagsterInstance,
) -> None:
    quotes = full_refresh_schedule(site_named("quotes"), "0 3 * * *")
    assert quotes.name == "quotes_daily_full_refresh" and quotes.job_name == "quotes_full_refresh_job"
    assert quotes.default_status == dg.DefaultScheduleStatus.STOPPED
    books_run = crawl_started(instance)
    requests, skipped = schedule_tick(instance, quotes)
    assert len(requests) == 1 and skipped is None  # the books' crawl holds the quotes' schedule back in nothing
    quotes_run = crawl_started(instance, crawl_run_tags("quotes"))
    requests, skipped = schedule_tick(instance, quotes)
    assert requests == [] and skipped is not None and quotes_run.run_id[:8] in skipped
    instance.report_run_failed(books_run)
    requests, skipped = schedule_tick(instance)
    assert len(requests) == 1 and skipped is None  # and the quotes' crawl the books' in nothing


def test_the_failed_tasks_sensor_waits_while_a_crawl_runs(
    db: Database, database_url: str, instance: dg.DagsterInstance
) -> None:
    fail_tasks(db, THRESHOLD)
    run = crawl_started(instance)
    waiting = evaluate(database_url, instance, "earlier-cursor")
    assert not waiting.run_requests and waiting.cursor == "earlier-cursor"
    assert run.run_id[:8] in skip_message(waiting) and "wait" in skip_message(waiting)
    instance.report_run_failed(run)
    after = evaluate(database_url, instance, "earlier-cursor")
    assert after.run_requests and len(after.run_requests) == 1
