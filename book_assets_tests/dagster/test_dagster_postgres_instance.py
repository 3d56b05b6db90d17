"""A run on the instance `make demo` and `make ui` use: the project's dagster.yaml, storage in PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import dagster as dg
import psycopg2
import pytest

from book_assets.dagster_instance import dagster_environment
from book_assets.dagster_storage import EventLogStorage
from book_assets.db.connection import Database
from book_assets.defs.resources import DatabaseResource, FetcherResource, SchedulingResource, SiteResource
from book_assets.sandbox.server import SandboxServer
from book_assets.settings import PROJECT_ROOT, load_settings
from book_assets.store.books import book_counts
from book_assets_tests.conftest import _admin

pytestmark = pytest.mark.slow


@pytest.fixture
def project_instance(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dg.DagsterInstance]:
    """The instance dagster.yaml describes, on the test database's server (database ``<test db>_dagster``)."""
    environment = dagster_environment(load_settings(database_url=database_url, data_dir=tmp_path))
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert environment["DAGSTER_HOME"] == str(PROJECT_ROOT)
    with dg.DagsterInstance.get() as instance:
        yield instance
    _admin(database_url, f'DROP DATABASE IF EXISTS "{environment["DAGSTER_PG_DB"]}" WITH (FORCE)')


def test_a_run_on_the_projects_instance_is_stored_in_postgresql(
    project_instance: dg.DagsterInstance, db: Database, database_url: str, sandbox: SandboxServer, tmp_path: Path
) -> None:
    from book_assets.defs.crawl.assets import crawl

    assert type(project_instance.run_storage).__name__ == "PostgresRunStorage"
    assert type(project_instance.event_log_storage) is EventLogStorage  # dagster-postgres's, one method replaced
    resources = {
        "database": DatabaseResource(url=database_url),
        "site": SiteResource(base_url=f"{sandbox.url}/", allowed_domains=[sandbox.host], categories=["Travel"]),
        "fetcher": FetcherResource(fetch_mode="http", workers=1, concurrency=4),
        "scheduling": SchedulingResource(snapshot_budget=10, data_dir=str(tmp_path)),
    }
    result = dg.materialize([crawl], instance=project_instance, resources=resources)
    assert result.success
    assert book_counts(db)["total"] == 11

    dagster_db = urlunsplit(urlsplit(database_url)._replace(path=f"/{urlsplit(database_url).path.strip('/')}_dagster"))
    conn = psycopg2.connect(dagster_db, connect_timeout=10)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT status FROM runs WHERE run_id = %s", (result.run_id,))
            assert cur.fetchone() == ("SUCCESS",)
            cur.execute(
                "SELECT count(*) FROM event_logs WHERE run_id = %s AND dagster_event_type = 'ASSET_MATERIALIZATION'",
                (result.run_id,),
            )
            assert cur.fetchone() == (2,)
    finally:
        conn.close()
    record = project_instance.get_latest_materialization_event(dg.AssetKey("book_details"))
    assert record is not None and record.run_id == result.run_id
