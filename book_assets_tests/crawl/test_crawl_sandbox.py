"""End-to-end crawls of the sandbox: every stored field equals what the sandbox served."""

from __future__ import annotations

from typing import Any

import pytest

from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets_tests.crawl.conftest import sandbox_config, stored_vs_truth


def test_full_http_crawl_stores_every_book_exactly_and_a_second_crawl_changes_nothing(
    db: Database, database_url: str, sandbox: Any, books_rows: Any
) -> None:
    config = sandbox_config(sandbox.url, mode="http", concurrency=8)
    report = crawl(database_url, config)
    assert (report.counts["total"], report.counts["unique_urls"], report.counts["with_html"]) == (1000, 1000, 1000)
    rows = books_rows()
    assert stored_vs_truth(rows, sandbox.catalogue.ground_truth(), sandbox.url) == []
    assert all("£" in r["raw_html"] and "Â£" not in r["raw_html"] for r in rows)
    assert all(r["http_status"] == 200 and len(r["content_hash"]) == 64 for r in rows)
    assert report.failed_by_reason == {}

    before = {r["url"]: (r["version"], r["updated_at"], r["raw_html"]) for r in rows}
    again = crawl(database_url, config)
    assert again.counts == report.counts
    assert again.run.books_new == 0 and again.run.books_changed == 0 and again.run.books_unchanged == 1000
    # Every category's listings completed, so removals were decided for all 50, and nothing left the site.
    assert again.removals is not None and again.removals.decided
    assert (again.removals.removed, again.removals.complete, again.removals.not_crawled) == (0, 50, 0)
    assert {r["url"]: (r["version"], r["updated_at"], r["raw_html"]) for r in books_rows()} == before


def test_crawl_of_the_next_day_records_exactly_the_changed_books_as_versions(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    # Day 1 changes 17 books of these five categories (260 books) and adds its three new ones (Health, Religion).
    categories = ("Default", "Fiction", "Mystery", "Health", "Religion")
    day0 = sandbox_factory(day=0)
    config0 = sandbox_config(day0.url, mode="http", categories=categories)
    crawl(database_url, config0)
    day0.stop()
    # The next day, served at another port: rewrite stored URLs so both days share one URL space.
    day1 = sandbox_factory(day=1)
    db.query("UPDATE books SET url = replace(url, %s, %s)", (day0.url.rstrip("/"), day1.url.rstrip("/")))
    db.query("UPDATE book_versions SET url = replace(url, %s, %s)", (day0.url.rstrip("/"), day1.url.rstrip("/")))
    report = crawl(database_url, sandbox_config(day1.url, mode="http", categories=categories))

    catalogue = day1.catalogue
    changed = set(catalogue.changed_ids)
    changed_paths = {b.url_path for b in catalogue.books if b.id in changed and b.category in categories}
    assert len(changed_paths) == 17
    rows = db.query("SELECT url FROM books WHERE version = 2")
    recorded = {r["url"].removeprefix(day1.url.rstrip("/") + "/") for r in rows}
    assert recorded == {p.lstrip("/") for p in changed_paths}
    assert report.run.books_changed == len(changed_paths)
    assert report.run.books_new == len(catalogue.added_ids) == 3
    history = db.query("SELECT count(*) AS n FROM book_versions WHERE version = 2")[0]["n"]
    assert history == len(changed_paths)


@pytest.mark.browser
def test_browser_crawl_of_two_categories_matches_ground_truth(
    db: Database, database_url: str, sandbox: Any, books_rows: Any
) -> None:
    config = sandbox_config(sandbox.url, mode="browser", concurrency=4, categories=("Travel", "Poetry"))
    report = crawl(database_url, config)
    truth = {p: b for p, b in sandbox.catalogue.ground_truth().items() if b.category in ("Travel", "Poetry")}
    assert report.counts["total"] == len(truth) == 30
    assert stored_vs_truth(books_rows(), truth, sandbox.url) == []
