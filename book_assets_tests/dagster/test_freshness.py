"""``book_details``' freshness as Dagster's own evaluator judges it, at frozen times around a daily crawl: a
crawl that failed (no materialization) is flagged within ``refresh_deadline_minutes`` of its tick, not at
the next day's tick."""

import asyncio
from datetime import UTC, datetime

import dagster as dg
import pytest
from dagster._core.definitions.freshness import FreshnessState
from dagster._core.definitions.freshness_evaluator import CronFreshnessPolicyEvaluator
from dagster._core.loader import LoadingContextForTest
from dagster._core.test_utils import freeze_time

from book_assets.definitions import build_definitions

BOOK_DETAILS = dg.AssetKey("book_details")


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 3, day, hour, minute, tzinfo=UTC)


def freshness(defs: dg.Definitions, instance: dg.DagsterInstance, now: datetime) -> FreshnessState:
    node = defs.get_repository_def().asset_graph.get(BOOK_DETAILS)
    with freeze_time(now):
        return asyncio.run(CronFreshnessPolicyEvaluator().evaluate_freshness(LoadingContextForTest(instance), node))


def crawled(instance: dg.DagsterInstance, when: datetime) -> None:
    with freeze_time(when):
        instance.report_runless_asset_event(dg.AssetMaterialization(BOOK_DETAILS))


@pytest.fixture
def defs(monkeypatch: pytest.MonkeyPatch) -> dg.Definitions:
    monkeypatch.setenv("BOOK_PIPELINE_SCHEDULE_CRON", "0 3 * * *")
    monkeypatch.delenv("BOOK_PIPELINE_REFRESH_DEADLINE_MINUTES", raising=False)
    return build_definitions()


def test_a_failed_crawl_is_flagged_within_the_hour_it_was_due(defs: dg.Definitions) -> None:
    with dg.instance_for_test() as instance:
        crawled(instance, at(1, 3, 30))  # yesterday's crawl landed; today's 03:00 crawl fails, nothing lands
        assert freshness(defs, instance, at(2, 3, 30)) == FreshnessState.PASS  # today's run still has time
        assert freshness(defs, instance, at(2, 4, 30)) == FreshnessState.FAIL


def test_a_crawl_that_lands_within_the_hour_is_fresh_until_the_next_deadline(defs: dg.Definitions) -> None:
    with dg.instance_for_test() as instance:
        crawled(instance, at(1, 3, 30))
        crawled(instance, at(2, 3, 40))
        assert freshness(defs, instance, at(2, 4, 30)) == FreshnessState.PASS
        assert freshness(defs, instance, at(3, 3, 59)) == FreshnessState.PASS
