"""book_assets/sql/schema.sql is the current schema: a fresh database migrated from 0001 has exactly it."""

from __future__ import annotations

import difflib
from urllib.parse import urlsplit, urlunsplit

from book_assets.db.connection import Database
from book_assets.db.migrations import dump_schema, migrate, schema_text
from book_assets.settings import PROJECT_ROOT
from book_assets.sql import migration_files
from book_assets_tests.conftest import _admin

SCHEMA = PROJECT_ROOT / "book_assets" / "sql" / "schema.sql"


def test_a_database_migrated_from_0001_has_exactly_the_schema_in_schema_sql(database_url: str) -> None:
    name = urlsplit(database_url).path.strip("/") + "_schema"
    fresh = urlunsplit(urlsplit(database_url)._replace(path=f"/{name}"))
    _admin(database_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _admin(database_url, f'CREATE DATABASE "{name}"')
    try:
        db = Database(fresh)
        report = migrate(db)
        db.close()
        assert report.applied[0].startswith("0001_") and len(report.applied) == len(migration_files())
        migrated = dump_schema(fresh)
    finally:
        _admin(database_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    committed = schema_text(SCHEMA.read_text(encoding="utf-8"))
    diff = difflib.unified_diff(committed.splitlines(), migrated.splitlines(), "schema.sql", "migrated", lineterm="")
    shown = "\n".join(diff)
    assert migrated == committed, f"schema.sql is out of date: run scripts/dump_schema.py\n{shown[:4000]}"
