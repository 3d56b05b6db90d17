"""Migrations: idempotent, recorded, and refusing a schema newer than the code."""

from __future__ import annotations

import pytest

from book_assets.db.connection import Database
from book_assets.db.migrations import SchemaTooNew, current_version, migrate
from book_assets.sql import migration_files


def _schema_fingerprint(db: Database) -> list[tuple[str, str, str]]:
    rows = db.query(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = current_schema() ORDER BY 1, 2"
    )
    return [(r["table_name"], r["column_name"], r["data_type"]) for r in rows]


def test_applying_migrations_twice_changes_nothing(db: Database) -> None:
    before = _schema_fingerprint(db)
    report = migrate(db)
    assert report.applied == []
    assert report.current_version == migration_files()[-1][0]
    assert _schema_fingerprint(db) == before


def test_seed_check_query_still_works(db: Database) -> None:
    db.query("INSERT INTO books (url, title, raw_html) VALUES ('https://x/a', 'A', '<html>')")
    row = db.query(
        "SELECT count(*) AS total, count(DISTINCT url) AS unique_urls, count(raw_html) AS with_html FROM books"
    )[0]
    assert (row["total"], row["unique_urls"], row["with_html"]) == (1, 1, 1)


def test_seed_partial_unique_index_deduplicates_live_urls(db: Database) -> None:
    db.query("INSERT INTO tasks (task_type, payload) VALUES ('detail', '{\"url\": \"https://x/a\"}')")
    rows = db.query(
        "INSERT INTO tasks (task_type, payload) VALUES ('detail', '{\"url\": \"https://x/a\"}') "
        "ON CONFLICT ((payload->>'url')) WHERE status IN ('pending', 'in_progress') DO NOTHING RETURNING id"
    )
    assert rows == []


def test_database_newer_than_code_is_refused(db: Database) -> None:
    latest = migration_files()[-1][0]
    db.query("INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, 'future', 'x')", (latest + 1,))
    try:
        with pytest.raises(SchemaTooNew, match="upgrade book-pipeline"):
            migrate(db)
        assert current_version(db) == latest + 1
    finally:
        db.query("DELETE FROM schema_migrations WHERE version = %s", (latest + 1,))
