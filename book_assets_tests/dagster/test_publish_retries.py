"""The checks and the publishing assets outlast a moment without the database: a transient error is retried by
the step's policy (``TRANSIENT_RETRY``), so one refused connection does not cost the day's publication or fail
a blocking check of a sound crawl.

The database's own reconnect covers a connection lost mid-work; what it cannot cover is a server that refuses
the step's first connection (restarting, a pooler recycling), which the proxy here does once.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from book_assets.db.connection import Database
from book_assets.definitions import ASSET_CHECKS, ASSETS
from book_assets.defs.crawl.checks import unique_urls
from book_assets.defs.crawl.jobs import PUBLISH_ASSETS
from book_assets.defs.resources import DatabaseResource, SchedulingResource
from book_assets.defs.retries import TRANSIENT_RETRY
from book_assets.defs.snapshot.assets import category_balanced_snapshot
from book_assets_tests.dagster.test_dagster_assets import insert_versioned_book
from book_assets_tests.pgproxy import PgProxy

pytestmark = pytest.mark.slow

#: A statement the steps never send: the proxy only refuses connections, it drops no commit.
NEVER_SENT = "-- no statement contains this --"


def test_every_check_and_publishing_asset_retries_transient_errors() -> None:
    publishing = [a for a in ASSETS if {k.to_user_string() for k in a.keys} <= set(PUBLISH_ASSETS)]
    assert {k.to_user_string() for a in publishing for k in a.keys} == set(PUBLISH_ASSETS)
    without = [
        definition.op.name
        for definition in [*publishing, *ASSET_CHECKS]
        if definition.op.retry_policy != TRANSIENT_RETRY
    ]
    assert without == []


def test_a_refused_connection_does_not_cost_the_days_snapshot(db: Database, database_url: str, tmp_path: Path) -> None:
    insert_versioned_book(db, "http://x.test/travel-0", "Travel", "10.00", datetime(2026, 3, 1, 9, tzinfo=UTC))
    with PgProxy(database_url, pattern=NEVER_SENT, refuse=1) as proxy, dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(
            [category_balanced_snapshot],
            partition_key="2026-03-01",
            instance=instance,
            resources={
                "database": DatabaseResource(url=proxy.url),
                "scheduling": SchedulingResource(snapshot_budget=10, data_dir=str(tmp_path)),
            },
            raise_on_error=False,
        )
        assert proxy.refuse_left == 0  # the first attempt met the refusal
    assert result.success
    retries = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    assert len(retries) == 1
    assert db.query("SELECT count(*) AS n FROM category_balanced_snapshot")[0]["n"] == 1


def test_a_refused_connection_does_not_fail_a_blocking_check(db: Database, database_url: str) -> None:
    insert_versioned_book(db, "http://x.test/travel-0", "Travel", "10.00", datetime(2026, 3, 1, 9, tzinfo=UTC))
    with PgProxy(database_url, pattern=NEVER_SENT, refuse=1) as proxy, dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(
            [dg.AssetSpec("book_details"), unique_urls],
            selection=dg.AssetSelection.checks(unique_urls),
            instance=instance,
            resources={"database": DatabaseResource(url=proxy.url)},
            raise_on_error=False,
        )
        assert proxy.refuse_left == 0
    assert result.success
    (evaluation,) = result.get_asset_check_evaluations()
    assert evaluation.passed
