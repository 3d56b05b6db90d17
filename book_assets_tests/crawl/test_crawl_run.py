"""A crawl run is one frozen value built when it begins; the crawl's end is named steps, composed by ``finish``.

The value's unit tests need no database; the steps' tests use the real one. No test here fetches a page: the
start URL is never requested, its task only queued.
"""

from __future__ import annotations

import dataclasses
import pickle
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from book_assets.crawl.config import DETAIL, LISTING, TASK_TYPES, make_queue
from book_assets.crawl.pipeline import (
    CrawlRun,
    begin,
    begin_retry,
    finish,
    index_archive,
    join,
    settle_removals,
    split_before_details,
)
from book_assets.crawl.stats import WorkerStats
from book_assets.db.connection import Database
from book_assets_tests.crawl.conftest import sandbox_config

#: A start URL no test fetches (port 9, discard).
START = "http://127.0.0.1:9/"


def _run(**overrides: Any) -> CrawlRun:
    return CrawlRun(sandbox_config(START, **overrides), since=datetime(2026, 12, 4, 1, 0, tzinfo=UTC))


def test_a_crawl_run_cannot_be_changed_in_place_and_a_derived_one_leaves_it_as_it_was() -> None:
    run = _run()
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.seeded = True  # type: ignore[misc]
    budgeted = dataclasses.replace(run, quotas={"Travel": 11})
    assert run.quotas == {} and budgeted.quotas == {"Travel": 11}
    assert budgeted.config is run.config and budgeted.since == run.since


def test_a_crawl_run_crosses_processes_whole() -> None:
    run = dataclasses.replace(_run(deep_budget=5), quotas={"Travel": 5}, seeded=True)
    assert pickle.loads(pickle.dumps(run)) == run


def test_a_crawl_run_pickles_without_the_database_url_it_began_with(db: Database, database_url: str) -> None:
    """Dagster keeps every step's output pickled: the run it hands on must not carry the password."""
    password = unquote(urlsplit(database_url).password or "")
    if not password:
        pytest.skip("the test database URL has no password to look for")
    started = begin(database_url, sandbox_config(START, deep_budget=5))
    for run in (started, begin_retry(database_url, started.config), join(database_url, started.config)):
        kept = pickle.dumps(run)
        assert password.encode() not in kept and database_url.encode() not in kept
        assert password not in repr(run)


def test_a_run_indexes_the_archive_from_the_utc_day_it_started() -> None:
    east = timezone(timedelta(hours=2))
    run = dataclasses.replace(_run(), since=datetime(2026, 12, 4, 0, 30, tzinfo=east))
    assert run.started_on == date(2026, 12, 3)


def test_a_run_with_the_archive_off_indexes_nothing() -> None:
    run = _run(warc=False)
    assert run.config.archive_dir is None
    assert index_archive(run) == []


def test_a_run_without_a_deep_budget_leaves_every_task_type_to_share(db: Database, database_url: str) -> None:
    run = join(database_url, sandbox_config(START))
    same, first, left = split_before_details(database_url, run, TASK_TYPES, workers=1)
    assert same is run and left == TASK_TYPES and first == WorkerStats(worker_id="all")


def test_a_budgeted_run_without_detail_pages_to_drain_splits_nothing(db: Database, database_url: str) -> None:
    run = join(database_url, sandbox_config(START, deep_budget=5))
    same, _, left = split_before_details(database_url, run, (LISTING,), workers=1)
    assert same is run and left == (LISTING,)


def test_the_budget_split_derives_a_run_with_its_quotas(db: Database, database_url: str) -> None:
    config = sandbox_config(START, deep_budget=4, weights={"Travel": 1.0, "Poetry": 1.0})
    run = join(database_url, config)
    queue = make_queue(db, config)
    for n in range(3):  # discovery has finished: books of two categories wait
        for category in ("Travel", "Poetry"):
            queue.enqueue(DETAIL, {"url": f"{START}{category}/{n}"}, group=category)
    budgeted, _, left = split_before_details(database_url, run, (DETAIL,), workers=1)
    assert left == (DETAIL,)
    assert dict(budgeted.quotas) == {"Travel": 2, "Poetry": 2} and run.quotas == {}
    assert dataclasses.replace(budgeted, quotas={}) == run


def test_a_retry_of_the_failures_settles_no_removals(db: Database, database_url: str) -> None:
    config = sandbox_config(START)
    run = dataclasses.replace(begin(database_url, config), retrying=True)
    removals = settle_removals(db, make_queue(db, config), run)
    assert not removals.decided and "a retry of the failures" in removals.line()


def test_a_run_that_opened_no_crawl_settles_none(db: Database, database_url: str) -> None:
    config = sandbox_config(START)
    removals = settle_removals(db, make_queue(db, config), join(database_url, config))
    assert not removals.decided and "this run opened no crawl" in removals.line()


def test_a_run_whose_listing_pages_are_still_queued_leaves_its_crawl_open(db: Database, database_url: str) -> None:
    config = sandbox_config(START)
    run = begin(database_url, config)  # the start page queued, not fetched
    removals = settle_removals(db, make_queue(db, config), run)
    assert not removals.decided and "1 listing pages still queued" in removals.line()
    assert run.opened is not None
    assert db.query("SELECT finished_at FROM crawls WHERE id = %s", (run.opened.id,))[0]["finished_at"] is None


def test_finish_reports_what_the_run_began_with_and_reads_the_rest_from_the_database(
    db: Database, database_url: str
) -> None:
    run = begin(database_url, sandbox_config(START, task_retention_days=14))
    report = finish(database_url, run, WorkerStats(worker_id="all"))
    assert report.config is run.config and report.seeded and report.requeued == 0
    assert report.run.pages == 0 and report.counts["total"] == 0 and report.tasks_pruned == 0
    assert report.removals is not None and not report.removals.decided  # the start page is still queued
    assert report.elapsed_s >= 0 and report.quotas == {} and report.budgets == []
