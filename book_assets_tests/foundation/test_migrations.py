"""Migrations: idempotent, recorded, refusing a schema newer than the code or an edited migration, moving a
database that the migrations squashed into 0001_initial made."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

from book_assets.db.connection import Database
from book_assets.db.migrations import (
    _PRE_RELEASE_INITIAL,
    REPLACES,
    ChangedMigration,
    PreReleaseSchema,
    SchemaRefused,
    SchemaTooNew,
    _checksum,
    current_version,
    dump_schema,
    migrate,
    schema_text,
)
from book_assets.settings import PROJECT_ROOT
from book_assets.sql import migration_files
from book_assets_tests.conftest import _admin

SCHEMA = PROJECT_ROOT / "book_assets" / "sql" / "schema.sql"
#: The migrations squashed into 0001_initial, as they were: what a database of theirs was built from.
SQUASHED = sorted((PROJECT_ROOT / "book_assets_tests" / "fixtures" / "squashed_migrations").glob("*.sql"))


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


def test_a_database_that_recorded_an_edited_migration_is_refused_with_one_line(db: Database) -> None:
    db.query("UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1")
    try:
        with pytest.raises(ChangedMigration) as refused:
            migrate(db)
        assert "\n" not in str(refused.value) and "0001_initial" in str(refused.value)
    finally:
        db.query("UPDATE schema_migrations SET checksum = %s WHERE version = 1", (_checksum(migration_files()[0][2]),))


#: The record the pre-release migrations (0001 to 0018, squashed into 0001_initial) left.
PRE_RELEASE = [
    (1, "initial"), (2, "queue"), (3, "books"), (4, "snapshot"), (5, "exact_under_faults"),
    (6, "adaptive_decisions"), (7, "idle_members_out_of_rounds"), (8, "claim_in_small_functions"),
    (9, "snapshot_days"), (10, "robots_and_autothrottle"), (11, "pages"), (12, "change_feed"),
    (13, "batched_fair_claims"), (17, "batched_interleaved_claims"), (18, "requeues_and_retention"),
]  # fmt: skip


@pytest.fixture
def scratch_url(database_url: str) -> Iterator[str]:
    """A database of its own with the schema of ``0001_initial`` alone (what the pre-release chain's last
    migration left; the later migrations are the move's to apply), dropped afterwards."""
    name = urlsplit(database_url).path.strip("/") + "_pre_release"
    url = urlunsplit(urlsplit(database_url)._replace(path=f"/{name}"))
    _admin(database_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
    scratch = Database(url)
    _built_by_the_squashed_migrations(scratch, 0)
    scratch.query(migration_files()[0][2])
    scratch.close()
    yield url
    _admin(database_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _as_pre_release(db: Database, up_to: int) -> None:
    """Make a migrated database look as the pre-release chain left it at ``up_to``: its record, the claim under
    its pre-release name, a replaced version nobody dropped, no index of the claim's domains probe and an
    empty tasks_archive."""
    db.query("ALTER FUNCTION queue_claim_v3 RENAME TO queue_claim_v4")
    db.query("DROP INDEX idx_tasks_pending_domain")
    db.query("CREATE TABLE tasks_archive (LIKE tasks, archived_at TIMESTAMPTZ NOT NULL DEFAULT now())")
    db.query("CREATE FUNCTION queue_claim_v3() RETURNS INTEGER LANGUAGE sql AS 'SELECT 3'")
    db.query("DELETE FROM schema_migrations")
    for version, name in PRE_RELEASE:
        if version <= up_to:
            checksum = _PRE_RELEASE_INITIAL if version == 1 else "pre-release"
            db.query(
                "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)", (version, name, checksum)
            )


def test_a_database_of_the_last_pre_release_migration_is_moved_keeping_its_rows(scratch_url: str) -> None:
    db = Database(scratch_url)
    try:
        _as_pre_release(db, 18)
        db.query("INSERT INTO books (url, title, raw_html) VALUES ('https://x/a', 'A', '<html>')")
        report = migrate(db)
        later = [f"{version:04d}_{name}" for version, name, _ in migration_files()[1:]]
        assert report.applied == ["0001_initial (moved from pre-release 0018)", *later]
        assert report.current_version == report.latest_version
        assert [r["url"] for r in db.query("SELECT url FROM books")] == ["https://x/a"]
        recorded = db.query("SELECT version, name FROM schema_migrations ORDER BY version")
        assert [(r["version"], r["name"]) for r in recorded] == [(v, n) for v, n, _ in migration_files()]
        assert migrate(db).applied == []
    finally:
        db.close()
    assert dump_schema(scratch_url) == schema_text(SCHEMA.read_text(encoding="utf-8"))


def test_a_database_of_an_earlier_pre_release_migration_is_refused_with_one_line(scratch_url: str) -> None:
    db = Database(scratch_url)
    try:
        _as_pre_release(db, 13)
        with pytest.raises(PreReleaseSchema) as refused:
            migrate(db)
        assert "\n" not in str(refused.value) and "0013" in str(refused.value) and "0018" in str(refused.value)
        assert current_version(db) == 13
    finally:
        db.close()


def test_replaces_names_each_squashed_migration_as_it_recorded_itself() -> None:
    recorded = [(int(path.name[:4]), path.stem[5:], _checksum(path.read_text(encoding="utf-8"))) for path in SQUASHED]
    assert list(REPLACES) == recorded


def _built_by_the_squashed_migrations(db: Database, up_to: int) -> None:
    """Build an empty database as the runner did with the squashed migrations up to version ``up_to``."""
    db.query(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL,"
        " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
    )
    for path in SQUASHED[:up_to]:
        sql = path.read_text(encoding="utf-8")
        db.query(sql)
        db.query(
            "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
            (int(path.name[:4]), path.stem[5:], _checksum(sql)),
        )


@pytest.mark.parametrize("up_to", [1, 2, 3])
def test_a_database_of_the_squashed_migrations_is_moved_to_0001_keeping_its_rows(database_url: str, up_to: int) -> None:
    """A database the squashed migrations built, to their last or an earlier one, migrates without error to
    0001_initial and ends with exactly schema.sql, its tasks and round-robin state as they were."""
    name = urlsplit(database_url).path.strip("/") + f"_squashed_{up_to}"
    url = urlunsplit(urlsplit(database_url)._replace(path=f"/{name}"))
    _admin(database_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
    db = Database(url)
    try:
        _built_by_the_squashed_migrations(db, up_to)
        db.query("INSERT INTO tasks (task_type, payload) VALUES ('detail', '{\"url\": \"https://x/a\"}')")
        db.query("INSERT INTO queue_scopes (scope) VALUES ('groups:detail')")
        db.query("INSERT INTO queue_members (scope, member, weight, current) VALUES ('groups:detail', 'a', 2, -1)")
        report = migrate(db)
        moved = f"{up_to:04d}_{REPLACES[up_to - 1][1]}"
        later = [f"{version:04d}_{name}" for version, name, _ in migration_files()[1:]]
        assert report.applied == [f"0001_initial (moved from {moved})", *later]
        assert report.current_version == report.latest_version
        recorded = db.query("SELECT version, name, checksum FROM schema_migrations ORDER BY version")
        assert [(r["version"], r["name"], r["checksum"]) for r in recorded] == [
            (v, n, _checksum(sql)) for v, n, sql in migration_files()
        ]
        assert [r["payload"]["url"] for r in db.query("SELECT payload FROM tasks")] == ["https://x/a"]
        member = db.query("SELECT weight, current FROM queue_members WHERE member = 'a'")[0]
        assert (member["weight"], member["current"]) == (2, -1)
        assert migrate(db).applied == []
        db.close()
        assert dump_schema(url) == schema_text(SCHEMA.read_text(encoding="utf-8"))
    finally:
        db.close()
        _admin(database_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_database_of_the_squashed_migrations_whose_tasks_archive_holds_rows_is_not_moved(database_url: str) -> None:
    """0001_initial has no tasks_archive: the move drops an empty one, and stops at one holding rows (they are the
    owner's to keep or drop), leaving the database as it was."""
    name = urlsplit(database_url).path.strip("/") + "_squashed_archive"
    url = urlunsplit(urlsplit(database_url)._replace(path=f"/{name}"))
    _admin(database_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
    db = Database(url)
    try:
        _built_by_the_squashed_migrations(db, len(REPLACES))
        db.query("INSERT INTO tasks_archive (task_type, payload) VALUES ('detail', '{}')")
        with pytest.raises(SchemaRefused, match=r"^tasks_archive holds finished tasks") as refused:
            migrate(db)
        assert "\n" not in str(refused.value)
        assert current_version(db) == len(REPLACES)
        assert db.query("SELECT count(*) AS n FROM tasks_archive")[0]["n"] == 1
    finally:
        db.close()
        _admin(database_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
