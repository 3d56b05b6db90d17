"""deploy/postgres/roles.sql, run by psql as a DBA would: the migrator role migrates, the app role (workers,
exporter, Dagster) starts, works the queue and reads its figures, and may not change the schema."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg2
import pytest

from book_assets.crawl.config import DETAIL, TASK_TYPES
from book_assets.db.connection import Database
from book_assets.db.migrations import current_version, migrate
from book_assets.queue import NewTask, TaskQueue
from book_assets.settings import PROJECT_ROOT
from book_assets.sql import migration_files
from book_assets_tests.conftest import _admin, _admin_and_name, _with_database
from book_assets_tests.queue.helpers import complete

ROLES_SQL = PROJECT_ROOT / "deploy" / "postgres" / "roles.sql"


def _as(url: str, user: str, password: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{host}"))


@pytest.fixture
def role_urls() -> Iterator[tuple[str, str]]:
    """A database of its own with roles.sql applied: (the migrator's URL, the app's URL)."""
    admin, name = _admin_and_name()
    suffix = os.getpid()
    database, migrator, app = f"{name}_roles_{suffix}", f"bp_migrator_{suffix}", f"bp_app_{suffix}"
    drop = (f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)', f'DROP ROLE IF EXISTS "{migrator}", "{app}"')
    _admin(admin, *drop, f'CREATE DATABASE "{database}"')
    url = _with_database(admin, database)
    variables = {"database": database, "migrator": migrator, "app": app}
    variables |= {"migrator_password": "migrator-pw", "app_password": "app-pw"}
    args = [arg for k, v in variables.items() for arg in ("-v", f"{k}={v}")]
    psql = subprocess.run(
        ["psql", url, "-X", "-q", *args, "-f", str(ROLES_SQL)], capture_output=True, text=True, timeout=120
    )
    try:
        assert psql.returncode == 0, psql.stderr
        yield _as(url, migrator, "migrator-pw"), _as(url, app, "app-pw")
    finally:
        _admin(admin, *drop)


def test_the_app_role_works_the_queue_and_cannot_change_the_schema(role_urls: tuple[str, str]) -> None:
    migrator_url, app_url = role_urls
    owner = Database(migrator_url)
    migrate(owner)  # the migration Job
    owner.close()
    app = Database(app_url)
    try:
        # What a worker or the exporter does at start: the schema is current, nothing to apply.
        report = migrate(app)
        assert report.applied == [] and current_version(app) == migration_files()[-1][0]
        queue = TaskQueue(app, task_types=TASK_TYPES, default_interval_s=0)
        queue.enqueue_many([NewTask(DETAIL, {"url": f"http://roles.test/{i}"}) for i in range(3)])
        first, second, _third = queue.claim("roles-test", 3, task_types=[DETAIL]).tasks
        complete(queue, first)
        queue.fail(second, "http_404: gone", retryable=False)
        assert queue.gauges().tasks  # the exporter's read
        with pytest.raises(psycopg2.errors.InsufficientPrivilege):
            app.run(lambda cur: cur.execute("CREATE TABLE intruder (id integer)"))
        with pytest.raises(psycopg2.errors.InsufficientPrivilege):
            app.run(lambda cur: cur.execute("DROP TABLE tasks"))
    finally:
        app.close()
