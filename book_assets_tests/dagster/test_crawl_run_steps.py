"""The crawl's configuration is resolved once, by ``seed_queue``; every step after takes it from the run value.

Steps of one run may run in other processes or on other hosts, whose environment (``BOOK_PIPELINE_*``, a
``.env``) need not be the first step's: a step that resolved the configuration again would crawl another crawl
than the one the run began. The steps after take only the database from a resource (where the queue is, and
the password the run value must not carry).
"""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest

from book_assets.db.connection import Database
from book_assets.defs.crawl.steps import drain_queue, report_crawl, seed_queue, share_work
from book_assets.defs.resources import DatabaseResource, FetcherResource, SchedulingResource, SiteResource
from book_assets.sandbox.server import SandboxServer

pytestmark = pytest.mark.slow


def test_the_steps_after_the_seed_take_only_the_database_resource() -> None:
    later = {step.name: set(step.required_resource_keys) for step in (share_work, drain_queue, report_crawl)}
    assert later == {"share_work": {"database"}, "drain_queue": {"database"}, "report_crawl": {"database"}}
    assert {"site", "fetcher", "scheduling", "database"} <= set(seed_queue.required_resource_keys)


def test_the_steps_after_the_seed_crawl_as_the_run_began_when_the_environment_changes_between_them(
    db: Database, database_url: str, sandbox: SandboxServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOOK_PIPELINE_CATEGORIES", "Travel")
    monkeypatch.setenv("BOOK_PIPELINE_TASK_RETENTION_DAYS", "30")

    @dg.op
    def environment_changes(run: Any) -> Any:
        """Between two steps, the next step's environment differs (another host's, say)."""
        monkeypatch.setenv("BOOK_PIPELINE_CATEGORIES", "Poetry")
        monkeypatch.setenv("BOOK_PIPELINE_TASK_RETENTION_DAYS", "3")
        return run

    @dg.job(
        resource_defs={
            "database": DatabaseResource(url=database_url),
            "site": SiteResource(base_url=f"{sandbox.url}/", allowed_domains=[sandbox.host]),
            "fetcher": FetcherResource(fetch_mode="http", workers=1, concurrency=4),
            "scheduling": SchedulingResource(),
        }
    )
    def changing_environment() -> None:
        shared, steps = share_work(environment_changes(seed_queue()))
        report_crawl(shared=shared, drained=steps.map(drain_queue).collect())

    result = changing_environment.execute_in_process()
    assert result.success
    stored = db.query("SELECT category, count(*) AS n FROM books GROUP BY category")
    assert {r["category"]: r["n"] for r in stored} == {"Travel": 11}
    [details] = [
        e.step_output_data.metadata
        for e in result.all_events
        if e.event_type == dg.DagsterEventType.STEP_OUTPUT and e.step_output_data.output_name == "book_details"
    ]
    config = details["config"]  # the resolved configuration the report recorded
    assert isinstance(config, dg.JsonMetadataValue) and isinstance(recorded := config.data, dict)
    assert recorded["categories"] == ["Travel"] and recorded["task_retention_days"] == 30, recorded
