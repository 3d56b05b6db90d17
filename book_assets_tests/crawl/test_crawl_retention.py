"""Retention: a crawl's report prunes the finished tasks older than ``task_retention_days``, so a daily crawl's
task rows do not pile up for ever; the books, their versions and the pages are data and stay."""

from __future__ import annotations

from typing import Any

from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets.defs.crawl.metadata import details_metadata
from book_assets.store.books import book_counts
from book_assets_tests.crawl.conftest import sandbox_config


def _tasks(db: Database) -> int:
    return int(db.query("SELECT count(*) AS n FROM tasks")[0]["n"])


def test_a_crawl_prunes_the_tasks_of_crawls_older_than_the_retention_and_keeps_the_books(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    server = sandbox_factory()
    config = sandbox_config(server.url, categories=("Travel",), task_retention_days=14)
    first = crawl(database_url, config)
    assert first.tasks_pruned == 0
    first_tasks = _tasks(db)
    assert first_tasks == 1 + 1 + 11  # the start page, Travel's listing, its books
    # Three weeks pass: the first crawl's tasks are older than the retention when the next crawl reports.
    db.query("UPDATE tasks SET completed_at = completed_at - interval '21 days'")
    books_before = book_counts(db)

    second = crawl(database_url, config)
    assert second.tasks_pruned == first_tasks
    assert _tasks(db) == first_tasks  # only the second crawl's own
    assert book_counts(db) == books_before  # data stays: the books and their versions
    assert f"queue: {first_tasks} finished tasks older than 14 days pruned" in second.summary_lines()
    assert details_metadata(second)["tasks_pruned"] == first_tasks

    db.query("UPDATE tasks SET completed_at = completed_at - interval '21 days'")
    keep_all = crawl(database_url, sandbox_config(server.url, categories=("Travel",), task_retention_days=0))
    assert keep_all.tasks_pruned == 0 and _tasks(db) == 2 * first_tasks
