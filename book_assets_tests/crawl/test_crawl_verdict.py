"""A crawl whose every book page failed ends as a failed run (exit status 1), never as a quiet success; a quotes
crawl whose every author page failed says so in its own record word."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets.sandbox import Faults
from book_assets.sandbox.quotes import truth
from book_assets.sandbox.quotes.server import QuotesServer
from book_assets_tests.conftest import child_env
from book_assets_tests.sites.quotes.crawling import quotes_config


def test_a_crawl_whose_every_book_page_fails_exits_with_an_error_and_stores_nothing(
    db: Database, database_url: str, sandbox_factory: Any, tmp_path: Path
) -> None:
    plain = sandbox_factory()
    poetry = sorted(p for p, b in plain.catalogue.ground_truth().items() if b.category == "Poetry")
    site = sandbox_factory(faults=Faults(scripted={p: [404] for p in poetry}))
    args = ["crawl", "--base-url", site.url + "/", "--fetch", "http", "--categories", "Poetry", "--no-progress"]
    proc = subprocess.run(
        [sys.executable, "-m", "book_assets.cli", *args],
        env=child_env(DATABASE_URL=database_url),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    failure = f"every book page this run worked on failed ({len(poetry)}): no book was stored"
    assert f"error: {failure}" in proc.stderr
    assert f"RUN FAILED: {failure}" in proc.stdout
    assert db.query("SELECT count(*) AS n FROM books")[0]["n"] == 0
    assert db.query("SELECT count(*) AS n FROM tasks WHERE status = 'failed'")[0]["n"] == len(poetry)


def test_the_crawl_asset_records_a_run_whose_every_book_page_failed_then_fails_it(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    import dagster as dg

    from book_assets.defs.crawl.assets import crawl
    from book_assets.defs.resources import DatabaseResource, FetcherResource, SchedulingResource, SiteResource

    plain = sandbox_factory()
    travel = sorted(p for p, b in plain.catalogue.ground_truth().items() if b.category == "Travel")
    site = sandbox_factory(faults=Faults(scripted={p: [404] for p in travel}))
    resources = {
        "database": DatabaseResource(url=database_url),
        "site": SiteResource(base_url=f"{site.url}/", allowed_domains=[site.host], categories=["Travel"]),
        "fetcher": FetcherResource(fetch_mode="http", workers=1, concurrency=4),
        "scheduling": SchedulingResource(),
    }
    result = dg.materialize([crawl], resources=resources, raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    error = failure.step_failure_data.user_failure_data
    assert error is not None
    assert error.description == f"every book page this run worked on failed ({len(travel)}): no book was stored"
    assert error.metadata["failed"].value == len(travel)
    # Not recorded as a fresh book_details for the snapshot to build on.
    assert result.get_asset_materialization_events() == []


def test_a_quotes_crawl_whose_every_author_page_fails_says_so_in_the_sites_record_word(
    db: Database, database_url: str
) -> None:
    scripted = {f"/author/{slug}/": [404] for slug in truth.authors()}
    with QuotesServer(scripted=scripted) as server:
        report = crawl(database_url, quotes_config(server))
    assert report.failure == f"every author page this run worked on failed ({len(scripted)}): no author was stored"
    assert db.query("SELECT count(*) AS n FROM authors")[0]["n"] == 0
