"""The assets materialized in-process through Dagster, against the test database and the sandbox; the
listing checks on a queue with dead-lettered listing pages; the snapshot's day partitions."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from book_assets.crawl.config import DETAIL, LISTING, TASK_TYPES
from book_assets.db.connection import Database
from book_assets.definitions import ASSETS, BOOKS_ASSETS, BOOKS_CHECKS
from book_assets.defs.crawl.checks import found_books, no_failed_listing_pages
from book_assets.defs.resources import (
    ArchiveResource,
    DatabaseResource,
    FetcherResource,
    SchedulingResource,
    SiteResource,
)
from book_assets.defs.snapshot.assets import category_balanced_snapshot
from book_assets.defs.snapshot.checks import shares_within_tolerance
from book_assets.queue import TaskQueue
from book_assets.sandbox.server import SandboxServer
from book_assets.store.books import book_counts

pytestmark = pytest.mark.slow


def sandbox_resources(database_url: str, sandbox: SandboxServer, data_dir: Path, **fetcher: Any) -> dict[str, Any]:
    return {
        "database": DatabaseResource(url=database_url),
        "site": SiteResource(base_url=f"{sandbox.url}/", allowed_domains=[sandbox.host]),
        "fetcher": FetcherResource(**{"fetch_mode": "http", "workers": 2, "concurrency": 4, **fetcher}),
        "scheduling": SchedulingResource(snapshot_budget=200, data_dir=str(data_dir)),
        "archive": ArchiveResource(),
    }


def metadata_of(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    for event in result.get_asset_materialization_events():
        mat = event.step_materialization_data.materialization
        if mat.asset_key == dg.AssetKey(asset):
            return {k: getattr(v, "value", v) for k, v in mat.metadata.items()}
    raise AssertionError(f"{asset} was not materialized")


def test_full_materialization_stores_the_whole_catalogue_and_passes_every_check(
    db: Database, database_url: str, sandbox: SandboxServer, tmp_path: Path
) -> None:
    today = datetime.now(UTC).date().isoformat()
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(
            [*BOOKS_ASSETS, *BOOKS_CHECKS],
            instance=instance,
            resources=sandbox_resources(database_url, sandbox, tmp_path),
            partition_key=today,  # the daily assets' day (the crawl is unpartitioned)
        )
    assert result.success

    counts = book_counts(db)
    assert (counts["total"], counts["unique_urls"], counts["with_html"]) == (1000, 1000, 1000)

    discovery = metadata_of(result, "listing_discovery")
    assert discovery["books_found"] == 1000 and discovery["new_detail_tasks"] == 1000
    assert discovery["failed"] == 0

    details = metadata_of(result, "book_details")
    assert details["books_new"] == 1000 and details["failed"] == 0
    assert details["dagster/row_count"] == 1000
    assert {r.data["category"]: r.data["books stored this run"] for r in details["books_by_category"].records}[
        "Default"
    ] == 152

    snapshot = metadata_of(result, "category_balanced_snapshot")
    assert snapshot["dagster/row_count"] == 200
    assert snapshot["snapshot_day"] == today
    categories = {r.data["category"]: r.data for r in snapshot["categories"].records}
    assert sum(row["count"] for row in categories.values()) == 200 and categories["Default"]["available"] == 152
    assert snapshot["target_vs_actual"].startswith("![") and "data:image/png;base64," in snapshot["target_vs_actual"]
    assert Path(snapshot["chart_path"]).is_file() and Path(snapshot["parquet_path"]).is_file()
    assert details["books_removed"] == 0 and str(details["removals"]).startswith("removed: 0 books no longer listed")
    changes = metadata_of(result, "book_changes")  # today's feed: the first crawl's books are all new
    assert (changes["new"], changes["changed"], changes["removed"], changes["dagster/row_count"]) == (1000, 0, 0, 1000)

    archive = metadata_of(result, "raw_archive")  # today's archive of the session's crawls, this one's among them
    assert archive["responses"] >= details["pages"] and archive["index_lines"] >= archive["responses"]
    assert archive["bytes"] > 0 and archive["files"] >= 1

    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert set(evaluations) == {
        "found_books",
        "no_failed_listing_pages",
        "unique_urls",
        "raw_html_present",
        "no_error_pages",
        "required_fields_present",
        "crawl_complete",
        "no_field_drift",
        "shares_within_tolerance",
    }
    failed = {name: e.description for name, e in evaluations.items() if not e.passed}
    assert not failed


def test_error_page_stored_as_a_book_fails_the_blocking_check(
    db: Database, database_url: str, sandbox: SandboxServer, tmp_path: Path
) -> None:
    db.query(
        "INSERT INTO books (url, title, category, price_amount, upc, raw_html, http_status) "
        "VALUES ('http://x.test/404', '404', 'Travel', 1, 'u', '<html>Not Found</html>', 404)"
    )
    from book_assets.defs.crawl.checks import no_error_pages, required_fields_present

    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(
            [*ASSETS, no_error_pages, required_fields_present],
            selection=dg.AssetSelection.checks(no_error_pages, required_fields_present),
            instance=instance,
            resources=sandbox_resources(database_url, sandbox, tmp_path),
            raise_on_error=False,
        )
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert not evaluations["no_error_pages"].passed
    assert evaluations["no_error_pages"].severity == dg.AssetCheckSeverity.ERROR
    assert evaluations["no_error_pages"].metadata["offending_rows"].value == 1
    assert evaluations["required_fields_present"].passed


def test_deep_budget_limits_book_details_and_reports_the_quotas(
    db: Database, database_url: str, sandbox: SandboxServer, tmp_path: Path
) -> None:
    from book_assets.defs.crawl.assets import crawl

    # One worker, in this process (no worker processes to spawn): two drain steps sharing a budget are
    # test_dagster_fan_out's.
    resources = sandbox_resources(database_url, sandbox, tmp_path, workers=1)
    resources["scheduling"] = SchedulingResource(deep_budget=60, weights={"Travel": 50, "*": 1}, data_dir=str(tmp_path))
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([crawl], instance=instance, resources=resources)
    assert result.success
    assert book_counts(db)["total"] == 60
    details = metadata_of(result, "book_details")
    assert details["books_new"] == 60
    quotas = {r.data["category"]: r.data["quota"] for r in details["quotas"].records}
    assert quotas["Travel"] == 11  # weight 50 asks for ~30 books; Travel has 11: capped
    assert (details["deep_budget"], details["budget_completed"], details["budget_failed"]) == (60, 60, 0)
    assert details["budget_met"] is True and details["budget_status"].startswith("deep budget 60: met")


def test_the_crawl_records_its_cost_per_page_type_category_and_fetch_mode(
    db: Database, database_url: str, sandbox: SandboxServer, tmp_path: Path
) -> None:
    from book_assets.defs.crawl.assets import crawl

    # Two worker processes, whose costs come back over their pipes and add up.
    resources = sandbox_resources(database_url, sandbox, tmp_path, workers=2)
    resources["scheduling"] = SchedulingResource(deep_budget=60, weights={"Travel": 50, "*": 1}, data_dir=str(tmp_path))
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([crawl], instance=instance, resources=resources)
    assert result.success
    details = metadata_of(result, "book_details")
    rows = [r.data for r in details["cost"].records]
    assert {row["fetch_mode"] for row in rows} == {"http"}
    listings = [row for row in rows if row["page_type"] == LISTING]
    books = {row["category"]: row for row in rows if row["page_type"] == DETAIL}
    # Every page was fetched once (the sandbox refuses none), so the fetches are the database's pages.
    assert sum(row["fetches"] for row in listings) == metadata_of(result, "listing_discovery")["listing_pages"]
    # A listing page's cost goes to the category it lists; the start page's to none.
    listing_categories = {row["category"] for row in listings}
    assert "" in listing_categories and set(books) <= listing_categories, listing_categories
    stored = {r.data["category"]: r.data["books stored this run"] for r in details["books_by_category"].records}
    assert {category: row["fetches"] for category, row in books.items()} == stored
    # A book page's bytes are its body, which the books table keeps.
    book_bytes = db.query("SELECT sum(octet_length(raw_html))::bigint AS n FROM books")[0]["n"]
    assert sum(row["bytes"] for row in books.values()) == book_bytes
    assert details["bytes_fetched"] == book_bytes + sum(row["bytes"] for row in listings)
    assert all(row["fetch_s"] >= 0 and row["parse_cpu_s"] >= 0 for row in rows) and details["fetch_s"] > 0
    # Parsing is part of what the worker processes spent.
    assert 0 < details["parse_cpu_s"] <= details["worker_cpu_s"]


def test_a_browser_crawl_counts_its_browsers_cpu_beside_its_workers(
    db: Database, database_url: str, sandbox: SandboxServer, tmp_path: Path
) -> None:
    """Chromium's processes and Playwright's driver are not the workers' own: their CPU is counted beside."""
    from book_assets.defs.crawl.assets import crawl

    resources = sandbox_resources(database_url, sandbox, tmp_path, workers=2, fetch_mode="browser")
    resources["site"] = SiteResource(base_url=f"{sandbox.url}/", allowed_domains=[sandbox.host], categories=["Travel"])
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([crawl], instance=instance, resources=resources)
    assert result.success
    details = metadata_of(result, "book_details")
    assert {r.data["fetch_mode"] for r in details["cost"].records} == {"browser"}
    assert details["child_cpu_s"] > 0 and details["worker_cpu_s"] > 0


def dead_letter_listing_pages(db: Database, n: int) -> None:
    queue = TaskQueue(db, task_types=TASK_TYPES, default_interval_s=0)
    for i in range(n):
        queue.enqueue(LISTING, {"url": f"http://sandbox.test/catalogue/page-{i}.html"})
    for task in queue.claim("test-worker", n, task_types=[LISTING]).tasks:
        queue.fail(task, "http_404: listing page gone", retryable=False)


def test_listing_checks_report_failed_listing_pages_and_block_when_no_book_was_found(
    db: Database, database_url: str, sandbox: SandboxServer, tmp_path: Path
) -> None:
    dead_letter_listing_pages(db, 2)
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(
            [*ASSETS, found_books, no_failed_listing_pages],
            selection=dg.AssetSelection.checks(found_books, no_failed_listing_pages),
            instance=instance,
            resources=sandbox_resources(database_url, sandbox, tmp_path),
            raise_on_error=False,
        )
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    failed_pages = evaluations["no_failed_listing_pages"]
    assert not failed_pages.passed and failed_pages.severity == dg.AssetCheckSeverity.WARN
    assert failed_pages.metadata["failed_listing_pages"].value == 2
    assert (failed_pages.description or "").startswith("2 of 2 listing pages failed")
    # No discovery ran and the queue holds no detail task: nothing was found, and that blocks.
    nothing = evaluations["found_books"]
    assert not nothing.passed and nothing.severity == dg.AssetCheckSeverity.ERROR
    assert nothing.metadata["books_found"].value == 0


def insert_versioned_book(db: Database, url: str, category: str, price: str, recorded_at: datetime) -> None:
    """A book and its version 1, recorded at ``recorded_at`` (as a crawl that day would have stored it)."""
    fields = {"title": url.rsplit("/", 1)[-1], "category": category, "price_amount": price, "rating_value": 3}

    def _insert(cur) -> None:  # type: ignore[no-untyped-def]
        cur.execute(
            "INSERT INTO books (url, title, category, price_amount, scraped_at) VALUES (%s, %s, %s, %s, %s)"
            " RETURNING id",
            (url, fields["title"], category, price, recorded_at),
        )
        cur.execute(
            "INSERT INTO book_versions (book_id, version, url, fields, recorded_at) VALUES (%s, 1, %s, %s, %s)",
            (cur.fetchone()["id"], url, json.dumps(fields), recorded_at),
        )

    db.run(_insert)


def test_two_snapshot_partitions_give_two_days_each_built_as_of_its_day(
    db: Database, database_url: str, tmp_path: Path
) -> None:
    for i in range(3):
        insert_versioned_book(db, f"http://x.test/travel-{i}", "Travel", "10.00", datetime(2026, 3, 1, 9, tzinfo=UTC))
    for i in range(2):
        insert_versioned_book(db, f"http://x.test/poetry-{i}", "Poetry", "5.00", datetime(2026, 3, 2, 9, tzinfo=UTC))
    resources = {
        "database": DatabaseResource(url=database_url),
        "scheduling": SchedulingResource(snapshot_budget=10, data_dir=str(tmp_path)),
    }
    with dg.DagsterInstance.ephemeral() as instance:
        for day in ("2026-03-01", "2026-03-02"):  # what a backfill of the two days runs, one run per partition
            result = dg.materialize(
                [category_balanced_snapshot, shares_within_tolerance],
                partition_key=day,
                instance=instance,
                resources=resources,
            )
            assert result.success
            assert all(e.passed for e in result.get_asset_check_evaluations())
        assert instance.get_materialized_partitions(category_balanced_snapshot.key) == {"2026-03-01", "2026-03-02"}
        records = instance.fetch_materializations(category_balanced_snapshot.key, limit=10).records
        assert sorted(r.partition_key or "" for r in records) == ["2026-03-01", "2026-03-02"]
    days = db.query(
        "SELECT snapshot_day::text AS day, category, count(*)::int AS n FROM category_balanced_snapshot"
        " GROUP BY 1, 2 ORDER BY 1, 2"
    )
    assert days == [
        {"day": "2026-03-01", "category": "Travel", "n": 3},
        {"day": "2026-03-02", "category": "Poetry", "n": 2},
        {"day": "2026-03-02", "category": "Travel", "n": 3},
    ]
    assert (tmp_path / "snapshots" / "2026-03-01" / "category_balanced_snapshot.parquet").is_file()
