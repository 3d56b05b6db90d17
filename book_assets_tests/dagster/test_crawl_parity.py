"""`book-pipeline crawl` and Dagster's crawl step are one composition: on the same sandbox they interleave
listing and detail pages alike and report the same counts."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from book_assets.db.connection import Database
from book_assets.defs.crawl.assets import crawl
from book_assets.defs.resources import DatabaseResource, FetcherResource, SchedulingResource, SiteResource
from book_assets.sandbox.server import SandboxServer
from book_assets.store.books import book_counts
from book_assets_tests.conftest import child_env, truncate_all

pytestmark = pytest.mark.slow

#: Four categories, 402 books over 22 listing pages: enough listing pages that a crawl in two passes would
#: store no book before the last of them, and a crawl that interleaves stores hundreds.
CATEGORIES = ("Default", "Nonfiction", "Sequential Art", "Fiction")
BOOKS = 402

SUMMARY = re.compile(
    r"this run: (?P<pages>\d+) pages .* (?P<listing_pages>\d+) listing pages, (?P<books_new>\d+) new, "
    r"(?P<books_changed>\d+) changed, (?P<books_unchanged>\d+) unchanged books"
)


def _details_before_last_listing(db: Database) -> int:
    """Detail pages finished before the last listing page: 0 when discovery and details ran as two passes."""
    rows = db.query(
        "SELECT count(*) AS n FROM tasks WHERE task_type = 'detail' AND status = 'completed' AND completed_at < "
        "(SELECT max(completed_at) FROM tasks WHERE task_type = 'listing')"
    )
    return int(rows[0]["n"])


def _cli_crawl(database_url: str, sandbox: SandboxServer, cwd: Path) -> dict[str, int]:
    env = child_env(DATABASE_URL=database_url)
    command = [sys.executable, "-m", "book_assets.cli", "crawl", "--base-url", f"{sandbox.url}/", "--fetch", "http"]
    proc = subprocess.run(
        [*command, "--categories", ",".join(CATEGORIES), "--workers", "2", "--concurrency", "4", "--no-progress"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = SUMMARY.search(proc.stdout)
    assert found, proc.stdout
    return {name: int(value) for name, value in found.groupdict().items()}


def _dagster_crawl(database_url: str, sandbox: SandboxServer) -> dict[str, Any]:
    resources = {
        "database": DatabaseResource(url=database_url),
        "site": SiteResource(base_url=f"{sandbox.url}/", allowed_domains=[sandbox.host], categories=list(CATEGORIES)),
        "fetcher": FetcherResource(fetch_mode="http", workers=2, concurrency=4),
        "scheduling": SchedulingResource(),
    }
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([crawl], instance=instance, resources=resources)
    assert result.success
    metadata: dict[str, Any] = {}
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        metadata.update({k: getattr(v, "value", v) for k, v in materialization.metadata.items()})
    return metadata


def test_the_cli_and_dagster_interleave_discovery_and_details_alike_and_report_the_same_counts(
    db: Database, database_url: str, sandbox: SandboxServer, tmp_path: Path
) -> None:
    cli = _cli_crawl(database_url, sandbox, tmp_path)
    cli_interleaved = _details_before_last_listing(db)
    cli_books = book_counts(db)

    truncate_all(db)
    dagster = _dagster_crawl(database_url, sandbox)
    dagster_interleaved = _details_before_last_listing(db)

    assert cli_books["total"] == book_counts(db)["total"] == BOOKS
    # Both interleave: hundreds of books are stored while listing pages are still being followed.
    assert cli_interleaved > 100 and dagster_interleaved > 100, (cli_interleaved, dagster_interleaved)
    assert {name: dagster[name] for name in cli} == cli


def test_a_runs_config_overrides_budget_and_categories_and_is_recorded_with_the_run(
    db: Database, database_url: str, sandbox: SandboxServer
) -> None:
    resources = {
        "database": DatabaseResource(url=database_url),
        "site": SiteResource(base_url=f"{sandbox.url}/", allowed_domains=[sandbox.host]),
        "fetcher": FetcherResource(fetch_mode="http", workers=1, concurrency=4),
        "scheduling": SchedulingResource(),
    }
    run_config = {"ops": {"crawl": {"config": {"deep_budget": 5, "categories": ["travel"]}}}}
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([crawl], instance=instance, resources=resources, run_config=run_config)
    assert result.success
    assert book_counts(db)["total"] == 5
    [details] = [
        e.step_materialization_data.materialization
        for e in result.get_asset_materialization_events()
        if e.step_materialization_data.materialization.asset_key == dg.AssetKey("book_details")
    ]
    recorded: Any = details.metadata["config"].value
    assert recorded["deep_budget"] == 5 and recorded["categories"] == ["travel"], recorded
    assert details.metadata["budget_met"].value is True
