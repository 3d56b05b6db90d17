"""The three assets materialized in-process through Dagster, against the test database and the sandbox."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from book_assets.crawl.storage import book_counts
from book_assets.db.connection import Database
from book_assets.definitions import ASSET_CHECKS, ASSETS
from book_assets.defs.resources import DatabaseResource, FetcherResource, SchedulingResource, SiteResource
from book_assets.sandbox.server import SandboxServer

pytestmark = pytest.mark.slow


def sandbox_resources(database_url: str, sandbox: SandboxServer, data_dir: Path, **fetcher: object) -> dict:
    return {
        "database": DatabaseResource(url=database_url),
        "site": SiteResource(base_url=f"{sandbox.url}/", allowed_domains=[sandbox.host], rate=0.0),
        "fetcher": FetcherResource(**{"mode": "http", "workers": 2, "concurrency": 4, **fetcher}),
        "scheduling": SchedulingResource(snapshot_budget=200, data_dir=str(data_dir)),
    }


def metadata_of(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, object]:
    for event in result.get_asset_materialization_events():
        mat = event.step_materialization_data.materialization
        if mat.asset_key == dg.AssetKey(asset):
            return {k: getattr(v, "value", v) for k, v in mat.metadata.items()}
    raise AssertionError(f"{asset} was not materialized")


def test_full_materialization_stores_the_whole_catalogue_and_passes_every_check(
    db: Database, database_url: str, sandbox: SandboxServer, tmp_path: Path
) -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(
            [*ASSETS, *ASSET_CHECKS],
            instance=instance,
            resources=sandbox_resources(database_url, sandbox, tmp_path),
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
    assert "| Default | 152 |" in details["books_by_category"]

    snapshot = metadata_of(result, "category_balanced_snapshot")
    assert snapshot["dagster/row_count"] == 200
    assert {c.name for c in snapshot["dagster/column_schema"].columns} >= {"url", "title", "category", "price"}
    assert snapshot["target_vs_actual"].startswith("![") and "data:image/png;base64," in snapshot["target_vs_actual"]
    assert Path(snapshot["chart_path"]).is_file() and Path(snapshot["parquet_path"]).is_file()

    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert set(evaluations) == {
        "unique_urls",
        "raw_html_present",
        "no_error_pages",
        "required_fields_present",
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
    from book_assets.defs.crawl.assets import book_details, listing_discovery

    resources = sandbox_resources(database_url, sandbox, tmp_path)
    resources["scheduling"] = SchedulingResource(deep_budget=60, weights={"Travel": 50, "*": 1}, data_dir=str(tmp_path))
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([listing_discovery, book_details], instance=instance, resources=resources)
    assert result.success
    assert book_counts(db)["total"] == 60
    details = metadata_of(result, "book_details")
    assert details["books_new"] == 60
    assert "| Travel | 11 |" in details["quotas"]  # weight 50 asks for ~30 books; Travel has 11: capped
    assert (details["deep_budget"], details["budget_completed"], details["budget_failed"]) == (60, 60, 0)
    assert details["budget_met"] is True and details["budget_status"].startswith("deep budget 60: met")
