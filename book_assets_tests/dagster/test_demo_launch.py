"""Where the demo sends its runs: to the daemon's run queue only while a daemon serves it, else straight to
the run launcher, so a daemon that stopped a while ago never leaves the demo's runs queued for good."""

from __future__ import annotations

import time

import dagster as dg
import pytest
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon
from dagster._daemon.types import DaemonHeartbeat

from book_assets.demo import _queue_is_served

pytestmark = pytest.mark.unit


def _beat(instance: dg.DagsterInstance, seconds_ago: float) -> None:
    daemon = QueuedRunCoordinatorDaemon.daemon_type()
    instance.add_daemon_heartbeat(
        DaemonHeartbeat(timestamp=time.time() - seconds_ago, daemon_type=daemon, daemon_id="test", errors=[])
    )


@pytest.mark.parametrize(("seconds_ago", "served"), [(5, True), (300, False)])
def test_the_demo_counts_on_a_daemon_only_while_its_heartbeat_is_recent(seconds_ago: float, served: bool) -> None:
    with dg.instance_for_test() as instance:
        _beat(instance, seconds_ago)

        assert _queue_is_served(instance) is served


def test_the_demo_launches_directly_without_a_daemon() -> None:
    with dg.instance_for_test() as instance:
        assert _queue_is_served(instance) is False
