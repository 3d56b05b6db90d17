"""The publishing automation across midnight: day D's snapshot, change feed and archive are requested only
once a crawl stored on D passed its blocking checks, never when D's partition appears at 00:00 (from
yesterday's crawl), and a day without a crawl stays missing.

Each tick is ``dg.evaluate_automation_conditions`` at a chosen instant, with the cursor of the tick before,
what the ``publish_after_crawl`` sensor evaluates; a requested day is then recorded as materialized, as its run
would record it. The crawls are recorded as they happen on the instance (now), between the ticks that frame
them: what the condition follows is the order of the crawl's materialization and the midnight tick.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, time, timedelta
from pathlib import Path

import dagster as dg
import pytest

from book_assets.defs.catalog import DAY_START_CRON
from book_assets.defs.crawl.jobs import PUBLISH_ASSETS
from book_assets.defs.snapshot.assets import SNAPSHOT_DAYS
from book_assets_tests.dagster.test_publish_backfill import _crawl_recorded, publishing_definitions

pytestmark = pytest.mark.slow

PUBLISH = dg.AssetSelection.assets(*PUBLISH_ASSETS)


class Daemon:
    """The automation ticks of one instance, each at a given instant; what a tick requests is materialized."""

    def __init__(self, definitions: dg.Definitions, instance: dg.DagsterInstance) -> None:
        self.definitions, self.instance = definitions, instance
        self.cursor: dg.AssetDaemonCursor | None = None

    def tick(self, at: datetime, *, runs_fail: bool = False) -> set[str]:
        """The days requested at ``at`` (the same for the three assets), then recorded as materialized unless
        their runs fail."""
        result = dg.evaluate_automation_conditions(
            self.definitions, self.instance, asset_selection=PUBLISH, evaluation_time=at, cursor=self.cursor
        )
        self.cursor = result.cursor
        requested = {name: result.get_requested_partitions(dg.AssetKey(name)) for name in PUBLISH_ASSETS}
        days = requested[PUBLISH_ASSETS[0]]
        assert all(partitions == days for partitions in requested.values()), requested
        for name in PUBLISH_ASSETS if not runs_fail else ():
            for day in days:
                self.instance.report_runless_asset_event(dg.AssetMaterialization(dg.AssetKey(name), partition=day))
        return {day for day in days if day is not None}

    def published(self) -> set[str]:
        """The days each publishing asset holds (the same for the three)."""
        days = {name: self.instance.get_materialized_partitions(dg.AssetKey(name)) for name in PUBLISH_ASSETS}
        first = days[PUBLISH_ASSETS[0]]
        assert all(partitions == first for partitions in days.values()), days
        return set(first)


@pytest.fixture
def daemon(database_url: str, tmp_path: Path) -> Iterator[Daemon]:
    with dg.DagsterInstance.ephemeral() as instance:
        yield Daemon(publishing_definitions(database_url, tmp_path), instance)


def next_midnight(now: datetime) -> datetime:
    return datetime.combine(now.date() + timedelta(days=1), time(), tzinfo=UTC)


def test_a_days_partitions_start_at_the_midnight_the_condition_waits_for() -> None:
    assert (SNAPSHOT_DAYS.get_cron_schedule(), SNAPSHOT_DAYS.timezone) == (DAY_START_CRON, "UTC")


def test_the_new_day_is_published_after_its_crawl_not_at_midnight_from_yesterdays(daemon: Daemon) -> None:
    now = datetime.now(UTC)
    midnight = next_midnight(now)
    today, tomorrow = now.date().isoformat(), midnight.date().isoformat()
    assert daemon.tick(now) == set()
    _crawl_recorded(daemon.instance)
    assert daemon.tick(now) == {today}

    assert daemon.tick(midnight + timedelta(minutes=1)) == set(), "published from yesterday's crawl"
    assert daemon.tick(midnight + timedelta(hours=2)) == set()
    _crawl_recorded(daemon.instance)  # the 03:00 crawl, its checks passed
    assert daemon.tick(midnight + timedelta(hours=4)) == {tomorrow}
    assert daemon.tick(midnight + timedelta(hours=5)) == set()
    _crawl_recorded(daemon.instance)  # a recrawl of the failures the same day: the day is published again
    assert daemon.tick(midnight + timedelta(hours=10)) == {tomorrow}
    assert daemon.published() == {today, tomorrow}


def test_a_day_whose_publication_failed_is_requested_again_within_the_hour_until_it_is_published(
    daemon: Daemon,
) -> None:
    now = datetime.now(UTC)
    hour = now.replace(minute=0, second=0, microsecond=0)
    if hour + timedelta(minutes=62) >= next_midnight(now):
        pytest.skip("the retry comes after the next hour's tick, which is the next day's: run before 23:00 UTC")
    today = now.date().isoformat()
    daemon.tick(now)
    _crawl_recorded(daemon.instance)
    assert daemon.tick(now + timedelta(seconds=1), runs_fail=True) == {today}
    assert daemon.tick(now + timedelta(seconds=2)) == set(), "requested again at once"
    assert daemon.tick(hour + timedelta(minutes=61)) == {today}, "the day whose publication failed was dropped"
    assert daemon.tick(hour + timedelta(minutes=62)) == set()
    assert daemon.published() == {today}


def test_a_day_without_a_crawl_stays_missing(daemon: Daemon) -> None:
    now = datetime.now(UTC)
    midnight = next_midnight(now)
    daemon.tick(now)
    _crawl_recorded(daemon.instance)
    assert daemon.tick(now) == {now.date().isoformat()}
    for hours in (0.02, 3, 12, 23.9, 24.02, 30):
        assert daemon.tick(midnight + timedelta(hours=hours)) == set(), hours
    assert daemon.published() == {now.date().isoformat()}


def test_a_crawl_stored_before_midnight_and_first_seen_after_it_does_not_publish_the_new_day(daemon: Daemon) -> None:
    """The daemon down across midnight: its first tick of the new day finds yesterday's crawl unseen."""
    now = datetime.now(UTC)
    midnight = next_midnight(now)
    daemon.tick(now)
    _crawl_recorded(daemon.instance)
    assert daemon.tick(midnight + timedelta(minutes=30)) == set()
    _crawl_recorded(daemon.instance)
    assert daemon.tick(midnight + timedelta(hours=4)) == {midnight.date().isoformat()}


def test_a_crawl_whose_blocking_check_failed_publishes_its_day_once_the_check_passes(daemon: Daemon) -> None:
    now = datetime.now(UTC)
    midnight = next_midnight(now)
    daemon.tick(now)
    assert daemon.tick(midnight + timedelta(minutes=1)) == set()
    _crawl_recorded(daemon.instance, failed_check="crawl_complete")
    assert daemon.tick(midnight + timedelta(hours=4)) == set()
    daemon.instance.report_runless_asset_event(
        dg.AssetCheckEvaluation(
            asset_key=dg.AssetKey("book_details"),
            check_name="crawl_complete",
            passed=True,
            severity=dg.AssetCheckSeverity.ERROR,
        )
    )
    assert daemon.tick(midnight + timedelta(hours=5)) == {midnight.date().isoformat()}
