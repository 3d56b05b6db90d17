"""Another catalogue's daily snapshot through Dagster: ``quotes/category_balanced_snapshot``, made by the factory
over the quotes' definition, materialized for a day partition against a filled database, its shares checked
from the day's file; and the check's verdict on shares, a pure function."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from book_assets.db.connection import Database
from book_assets.defs.resources import DatabaseResource, SchedulingResource
from book_assets.defs.snapshot.catalogues import SITE_SNAPSHOTS, snapshot_key
from book_assets.defs.snapshot.checks import shares_result
from book_assets.publish.snapshot import PARQUET_NAME
from book_assets_tests.sites.quotes.test_quotes_publishing import fill_tags

QUOTES_SNAPSHOT = next(s for s in SITE_SNAPSHOTS if s.asset.key == snapshot_key("quotes"))


def test_the_quotes_snapshot_of_a_day_is_balanced_by_first_tag_and_its_check_passes(
    db: Database, database_url: str, tmp_path: Path
) -> None:
    day = date(2026, 3, 1)
    fill_tags(db, day)
    resources = {
        "database": DatabaseResource(url=database_url),
        "scheduling": SchedulingResource(
            snapshot_budget=16, data_dir=str(tmp_path), weights={"love": 1, "life": 2, "humor": 1}
        ),
    }
    assert QUOTES_SNAPSHOT.asset.key == dg.AssetKey(["quotes", "category_balanced_snapshot"])
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(
            [QUOTES_SNAPSHOT.asset, QUOTES_SNAPSHOT.check],
            partition_key=day.isoformat(),
            instance=instance,
            resources=resources,
        )
    assert result.success
    evaluations = result.get_asset_check_evaluations()
    assert [e.passed for e in evaluations] == [True], [e.description for e in evaluations]
    metadata = result.get_asset_materialization_events()[0].materialization.metadata
    assert metadata["dagster/row_count"].value == 16 and metadata["quotes_available"].value == 35
    frame = pd.read_parquet(tmp_path / "quotes" / "snapshots" / day.isoformat() / PARQUET_NAME)
    assert frame["category"].value_counts().to_dict() == {"life": 8, "love": 4, "humor": 4}
    assert not (tmp_path / "snapshots").exists()  # the books' folder is not written


def test_a_day_before_any_quote_gives_an_empty_snapshot_that_passes_its_check(
    db: Database, database_url: str, tmp_path: Path
) -> None:
    fill_tags(db, date(2026, 3, 1))
    resources = {
        "database": DatabaseResource(url=database_url),
        "scheduling": SchedulingResource(snapshot_budget=16, data_dir=str(tmp_path)),
    }
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(
            [QUOTES_SNAPSHOT.asset, QUOTES_SNAPSHOT.check],
            partition_key="2026-02-28",
            instance=instance,
            resources=resources,
        )
    assert result.success and [e.passed for e in result.get_asset_check_evaluations()] == [True]
    assert result.get_asset_materialization_events()[0].materialization.metadata["dagster/row_count"].value == 0


def test_the_quotes_snapshot_refuses_a_run_without_a_day(db: Database, database_url: str, tmp_path: Path) -> None:
    resources = {
        "database": DatabaseResource(url=database_url),
        "scheduling": SchedulingResource(data_dir=str(tmp_path)),
    }
    job = dg.Definitions(assets=[QUOTES_SNAPSHOT.asset], resources=resources).resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
    assert "quotes_publish_job" in str(failure.event_specific_data)


@pytest.mark.unit
def test_shares_within_one_record_of_their_targets_pass_and_a_category_off_by_more_fails() -> None:
    day = date(2026, 3, 1)
    assert shares_result(day, {"love": 4, "life": 8}, {"love": 5, "life": 7}, "quotes").passed  # one of slack
    off = shares_result(day, {"love": 4, "life": 8}, {"love": 6, "life": 6}, "quotes")
    assert not off.passed and off.description == f"{day}: 2 of 2 categories off their target by more than 1 quotes"
    short = shares_result(day, {"love": 4, "life": 8}, {"love": 4, "life": 7}, "quotes")
    assert not short.passed  # within slack, but the snapshot holds fewer rows than its targets
