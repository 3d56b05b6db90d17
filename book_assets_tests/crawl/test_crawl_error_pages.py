"""Crawls of a site that answers a listing or its start page with a 200 in its own template that is no page of
the catalogue ("Something went wrong", "Down for maintenance"): the page fails with a kind, its category's
books are never marked removed, and a start page that yields nothing fails the crawl with one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets.defs.crawl.assets import crawl as crawl_asset
from book_assets.defs.resources import DatabaseResource, FetcherResource, SchedulingResource, SiteResource
from book_assets.sandbox.catalogue import Catalogue
from book_assets.sandbox.faults import Faults
from book_assets_tests.conftest import child_env
from book_assets_tests.crawl.conftest import sandbox_config

TRAVEL = "/catalogue/category/books/travel_2/index.html"  # Travel: 11 books on one listing page
CATEGORIES = ("Travel", "Poetry")
START = ("/", "/index.html")


@pytest.mark.parametrize("mode", ["http", pytest.param("browser", marks=pytest.mark.browser)])
def test_a_200_error_page_on_a_category_listing_fails_it_with_a_kind_and_marks_none_of_its_books_removed(
    db: Database, database_url: str, sandbox_factory: Any, mode: str
) -> None:
    poetry_book = sorted(p for p, b in Catalogue().ground_truth().items() if b.category == "Poetry")[0]
    # Served whole on the first crawl, then an error page for every request (a render asks again in browser mode).
    script = ["serve", *["error_page"] * 5]
    server = sandbox_factory(faults=Faults(scripted={TRAVEL: script, poetry_book: script}))
    config = sandbox_config(server.url, mode=mode, categories=CATEGORIES)
    first = crawl(database_url, config)
    assert first.failed_by_reason == {} and first.counts["total"] == 30

    report = crawl(database_url, config)

    assert set(server.stats().responses[TRAVEL]) == {200}
    assert db.query("SELECT count(*) AS n FROM books WHERE removed_at IS NOT NULL")[0]["n"] == 0
    assert db.query("SELECT count(*) AS n FROM book_presence WHERE event = 'removed'")[0]["n"] == 0
    failed = db.query("SELECT payload->>'url' AS url, error_kind FROM tasks WHERE status = 'failed'")
    assert {r["url"]: r["error_kind"] for r in failed} == {
        server.url_for(TRAVEL): "not_a_listing_page",
        server.url_for(poetry_book): "not_a_book_page",
    }
    assert report.failed_by_reason == {"not_a_listing_page": 1, "not_a_book_page": 1}
    lines = report.summary_lines()
    assert any(line.split() == ["failed", "1", "not_a_listing_page"] for line in lines), lines
    assert report.removals is not None and report.removals.complete == 1  # Poetry's listing proved itself
    host = server.url.removeprefix("http://")
    unreached = f"not decided in 1 whose first listing page did not complete (Travel ({host})), 48 not crawled"
    assert report.removals.line().endswith(unreached) and report.removals.line() in lines
    assert db.query("SELECT max(version) AS v FROM books")[0]["v"] == 1  # the error page stored over no book


@pytest.mark.parametrize("fault", ["maintenance", "error_page"])
def test_a_start_page_that_is_no_listing_fails_the_crawl_with_one_line_and_a_non_zero_exit(
    db: Database, database_url: str, sandbox_factory: Any, tmp_path: Path, fault: str
) -> None:
    server = sandbox_factory(faults=Faults(scripted={path: [fault] * 5 for path in START}))
    command = [sys.executable, "-m", "book_assets.cli", "crawl", "--base-url", f"{server.url}/", "--fetch", "http"]
    proc = subprocess.run(
        [*command, "--categories", "Travel", "--no-progress"],
        env=child_env(DATABASE_URL=database_url),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert proc.returncode == 1, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    assert errors[0].startswith(f"error: the start page {server.url}/ yielded nothing: not_a_listing_page"), errors
    assert db.query("SELECT count(*) AS n FROM books")[0]["n"] == 0


def test_a_start_page_that_is_no_listing_fails_the_dagster_crawl(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    server = sandbox_factory(faults=Faults(scripted={path: ["maintenance"] * 5 for path in START}))
    resources = {
        "database": DatabaseResource(url=database_url),
        "site": SiteResource(base_url=f"{server.url}/", allowed_domains=[server.host], categories=["Travel"]),
        "fetcher": FetcherResource(fetch_mode="http", workers=1, concurrency=2),
        "scheduling": SchedulingResource(),
    }
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([crawl_asset], instance=instance, resources=resources, raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    error = failure.step_failure_data.user_failure_data
    assert error is not None and error.description is not None
    assert error.description.startswith(f"the start page {server.url}/ yielded nothing: not_a_listing_page: ")
    assert result.get_asset_materialization_events() == []


def test_a_start_page_whose_links_are_all_filtered_out_fails_the_crawl_naming_why(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    server = sandbox_factory()
    report = crawl(database_url, sandbox_config(server.url, categories=("Cookery",)))  # no such category
    assert report.failure is not None
    assert report.failure.startswith(
        f"the start page {server.url} yielded nothing: not_a_listing_page: a start page with nothing to follow: "
        "none of its 50 category links and 20 book cards"
    ), report.failure
    assert f"RUN FAILED: {report.failure}" in report.summary_lines()
