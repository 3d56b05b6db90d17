"""Shared fixtures: a real PostgreSQL database for every test that needs one.

The database is the embedded server (started on demand) or the server ``DATABASE_URL`` names. Tests never
touch the pipeline's own database: they get ``<name>_test``, dropped and re-created once per session and
migrated, and every test that asks for ``db`` starts from empty tables.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg2
import pytest

from book_assets.db import embedded
from book_assets.db.connection import Cursor, Database
from book_assets.db.migrations import migrate
from book_assets.settings import Settings, load_settings

pytest_plugins = ["book_assets.sandbox.testing"]

#: Fixtures that start or need a server (PostgreSQL, the sandbox, a local site, a worker process): a test that
#: uses one is not a unit test.
SERVER_FIXTURES = frozenset(
    {"database_url", "sandbox", "sandbox_factory", "quotes_site", "local_site", "spawn_worker", "private_database"}
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test of a ``*_unit.py`` file is a unit test (marker ``unit``, what ``make test-fast`` runs); a unit
    test that asks for a server fixture is refused at collection, so the fast target stays server-free."""
    for item in items:
        if item.path.name.endswith("_unit.py"):
            item.add_marker(pytest.mark.unit)
        if item.get_closest_marker("unit") is not None:
            servers = SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ()))
            if servers:
                raise pytest.UsageError(f"{item.nodeid} is marked unit but uses {', '.join(sorted(servers))}")


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def _admin_and_name() -> tuple[str, str]:
    settings = load_settings()
    if settings.database_url:
        base = settings.database_url
        name = urlsplit(base).path.strip("/") or "bookpipeline"
        return base, f"{name}_test"
    state = embedded.up(settings.pg_dir)
    assert state.port is not None
    return embedded.admin_url(state.port), f"{settings.database_name}_test"


def _admin(admin_url: str, *statements: str) -> None:
    """Run database-level statements (CREATE/DROP DATABASE cannot run inside a transaction)."""
    conn = psycopg2.connect(admin_url, connect_timeout=10)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
    finally:
        conn.close()


#: Where a crawl archives when no setting says otherwise: the checkout's own archive, which tests never touch.
CHECKOUT_ARCHIVE = Settings.model_construct().archive_dir


def _archive_files(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder`` with its size and modification time (a WARC file grows by appends)."""
    if not folder.is_dir():
        return {}
    return {
        str(path.relative_to(folder)): (stat.st_size, stat.st_mtime_ns)
        for path in folder.rglob("*")
        if path.is_file() and (stat := path.stat())
    }


@pytest.fixture(scope="session", autouse=True)
def scratch_archive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Test crawls archive into a folder of the session (``warc_dir``), never into the project's archive.

    At the end of the session the checkout's archive must be as it was: a crawl (in this process or a CLI child
    whose environment lost ``BOOK_PIPELINE_WARC_DIR``) that wrote there fails the run.
    """
    before = _archive_files(CHECKOUT_ARCHIVE)
    folder = tmp_path_factory.mktemp("warc")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BOOK_PIPELINE_WARC_DIR", str(folder))
        yield folder
    after = _archive_files(CHECKOUT_ARCHIVE)
    written = sorted(name for name, seen in after.items() if before.get(name) != seen)
    assert not written, f"the tests wrote {len(written)} file(s) into the checkout's archive {CHECKOUT_ARCHIVE}: " + (
        ", ".join(written[:5])
    )


def child_env(**variables: str) -> dict[str, str]:
    """The environment of a CLI process a test starts: this one without the pipeline's settings, plus ``variables``.

    Settings from the shell that runs the tests (``BOOK_PIPELINE_*``, ``DATABASE_URL``, ``DATABASE_DIRECT_URL``)
    would change what the child does, so none is passed on but the session's archive folder
    (``BOOK_PIPELINE_WARC_DIR``, see ``scratch_archive``): without it the child's crawl archives into the
    checkout's ``.data/warc``.
    """
    pipeline = ("BOOK_PIPELINE_", "DATABASE_URL", "DATABASE_DIRECT_URL")
    env = {name: value for name, value in os.environ.items() if not name.startswith(pipeline)}
    if "BOOK_PIPELINE_WARC_DIR" in os.environ:
        env["BOOK_PIPELINE_WARC_DIR"] = os.environ["BOOK_PIPELINE_WARC_DIR"]
    env.update(variables)
    return env


@contextlib.contextmanager
def migrated_database(label: str = "") -> Iterator[str]:
    """URL of a freshly created and migrated database, dropped after. Named for the pytest process (and
    ``label``): concurrent sessions (developers, CI) never drop each other's."""
    admin, name = _admin_and_name()
    name = f"{name}{label}_{os.getpid()}"
    _admin(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
    try:
        url = _with_database(admin, name)
        with Database(url) as database:
            migrate(database)
        yield url
    finally:
        _admin(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    """URL of a freshly created and migrated test database, dropped at the end of the session."""
    with migrated_database() as url:
        yield url


def truncate_all(database: Database) -> None:
    """Empty every table but the migration record (and restart identities)."""

    def _truncate(cur: Cursor) -> None:
        cur.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename <> 'schema_migrations'"
        )
        tables = [r["tablename"] for r in cur.fetchall()]
        if tables:
            cur.execute("TRUNCATE " + ", ".join(f'"{t}"' for t in tables) + " RESTART IDENTITY CASCADE")

    database.run(_truncate)


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    """A connection to the test database, with every table empty."""
    database = Database(database_url, application_name="book-pipeline-tests")
    truncate_all(database)
    yield database
    database.close()
