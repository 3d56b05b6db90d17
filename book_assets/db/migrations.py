"""Versioned, idempotent schema migrations.

Each ``book_assets/sql/migrations/NNNN_<name>.sql`` runs once, in its own transaction, recorded in
``schema_migrations`` with a checksum. Concurrent migrators serialize on an advisory lock, so two workers
starting together cannot both apply a file. A database whose schema is newer than this code is refused
with a clear error instead of being written to by code that does not know its tables, and so is one whose
record of a migration has another checksum than its file (a migration is never edited once applied).

``0001_initial`` is a squash, as Django's ``replaces`` makes one: it declares the migrations it replaces
(:data:`REPLACES`, each as it recorded itself), and a database that recorded them, or the first of them, is
moved to it in place (its functions replaced by those of ``0001_initial``, the few differences of its tables
made, its rows kept) and recorded at ``0001_initial``. So is a database of the pre-release chain (0001 to
0018) at its last migration; one it left earlier is refused with one line saying how to move.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

import psycopg2.errors

from book_assets.db.connection import Cursor, Database
from book_assets.sql import load_queries, migration_files

# Any fixed 64-bit number; shared by every book-pipeline process migrating the same database.
_LOCK_KEY = 0x626F6F6B5F706970


class SchemaRefused(RuntimeError):
    """The database's schema is one this code does not migrate; the message says why and what to do."""


class SchemaTooNew(SchemaRefused):
    """The database was migrated by a newer book-pipeline."""


class PreReleaseSchema(SchemaTooNew):
    """The database was left by the pre-release migrations before their last one, which this code cannot move."""


class ChangedMigration(SchemaRefused):
    """The database recorded a migration with another checksum than its file has now."""


#: The migrations squashed into ``0001_initial``, as each recorded itself: ``(version, name, checksum)``. Their
#: text is kept as test data (book_assets_tests/fixtures/squashed_migrations/).
REPLACES: tuple[tuple[int, str, str], ...] = (
    (1, "initial", "ff4c8d51d914f1ff"),
    (2, "claim_rounds", "dee03258c8312f2a"),
    (3, "claim_domains_with_work", "0f086325d28d6d89"),
)
#: The checksum of the pre-release chain's ``0001_initial`` and that chain's last version: a database whose
#: version 1 has this checksum was made by the pre-release migrations, squashed into ``0001_initial`` too.
_PRE_RELEASE_INITIAL = "14ede22c7cd8bcdf"
_PRE_RELEASE_LAST = 18
#: The line of ``0001_initial.sql`` that begins the tables added since the squash (which a database the squashed
#: migrations made lacks, created ``IF NOT EXISTS``), and the line after which only composite types, functions
#: and their comments follow.
SINCE_SQUASH_MARKER = "-- Tables since the squash:"
FUNCTIONS_MARKER = "-- Functions:"


@dataclass(frozen=True)
class MigrationReport:
    applied: list[str]
    current_version: int
    latest_version: int


def _checksum(sql: str) -> str:
    return hashlib.sha256(sql.encode()).hexdigest()[:16]


def current_version(db: Database) -> int:
    """Highest applied migration version (0 for an empty database)."""

    def _q(cur: Cursor) -> int:
        cur.execute("SELECT to_regclass('schema_migrations') IS NOT NULL AS present")
        row = cur.fetchone()
        if not row or not row["present"]:
            return 0
        cur.execute("SELECT coalesce(max(version), 0) AS v FROM schema_migrations")
        result = cur.fetchone()
        return int(result["v"]) if result else 0

    return db.run(_q)


def migrate(db: Database) -> MigrationReport:
    """Apply every pending migration; applying twice changes nothing. Runs on ``db``'s direct connection."""
    files = migration_files()
    latest = files[-1][0] if files else 0
    applied: list[str] = []

    def _apply(cur: Cursor) -> int:
        applied.clear()  # run() may retry this function after a lost connection
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        # Created only when absent: CREATE ... IF NOT EXISTS still needs the right to create, which a role
        # without DDL rights (the app's, deploy/postgres/roles.sql) lacks on a schema that is current.
        cur.execute("SELECT to_regclass('schema_migrations') IS NOT NULL AS present")
        present = cur.fetchone()
        if not (present and present["present"]):
            cur.execute(
                """CREATE TABLE schema_migrations (
                       version INTEGER PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL,
                       applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"""
            )
        cur.execute("SELECT version, name, checksum FROM schema_migrations ORDER BY version")
        records = [(int(r["version"]), r["name"], r["checksum"]) for r in cur.fetchall()]
        if squashed := _squashed_chain(records):
            applied.append(_move_squashed(cur, squashed, files[0]))
            records = [(files[0][0], files[0][1], _checksum(files[0][2]))]
        done = {version for version, _, _ in records}
        newest = max(done, default=0)
        if newest > latest:
            raise SchemaTooNew(
                f"database schema is at version {newest} but this book-pipeline knows only up to {latest}; "
                "upgrade book-pipeline"
            )
        _check_unchanged(records, files)
        for version, name, sql in files:
            if version in done:
                continue
            cur.execute(sql)
            cur.execute(
                "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                (version, name, _checksum(sql)),
            )
            applied.append(f"{version:04d}_{name}")
            done.add(version)
        return max(done, default=0)

    # The advisory lock and the DDL go to PostgreSQL itself, never through a pooler in transaction mode.
    direct = db.direct()
    try:
        version = direct.run(_apply)
    finally:
        if direct is not db:
            direct.close()
    return MigrationReport(applied=applied, current_version=version, latest_version=latest)


def _squashed_chain(records: list[tuple[int, str, str]]) -> str:
    """The squashed chain that made a database with these records, as a report names it ("" for none).

    :data:`REPLACES` or its first migrations, exactly as they recorded themselves; or the pre-release chain at
    its last migration (known by its first one's checksum), an earlier version of which is refused.
    """
    if records and records == list(REPLACES[: len(records)]):
        return f"{records[-1][0]:04d}_{records[-1][1]}"
    if records and records[0][0] == 1 and records[0][2] == _PRE_RELEASE_INITIAL:
        newest = records[-1][0]
        if newest != _PRE_RELEASE_LAST:
            raise PreReleaseSchema(
                f"database schema is at pre-release migration {newest:04d}, which this book-pipeline cannot move; "
                f"migrate it to {_PRE_RELEASE_LAST:04d} with the book-pipeline of before 0.1.0 first, "
                "or drop the database and crawl again"
            )
        return f"pre-release {newest:04d}"
    return ""


def _move_squashed(cur: Cursor, chain: str, initial: tuple[int, str, str]) -> str:
    """Move a database that squashed migrations made to ``0001_initial``: its tables and rows, today's functions.

    Every function and composite type of the schema is dropped and those of ``0001_initial`` created (a chain
    may hold a version of a function that ``0001_initial`` dropped); the tables added since the squash are
    created; the other tables are brought to those of ``0001_initial`` (``squashed_tables`` in
    ``book_assets/sql/migrate.sql``), their rows kept.
    """
    version, name, sql = initial
    queries = load_queries("migrate")
    cur.execute(queries["drop_functions"])
    cur.execute(sql[sql.index(SINCE_SQUASH_MARKER) : sql.index(FUNCTIONS_MARKER)])
    cur.execute(sql[sql.index(FUNCTIONS_MARKER) :])
    try:
        cur.execute(queries["squashed_tables"])
    except psycopg2.errors.RaiseException as refused:  # a table of rows that 0001_initial has not
        raise SchemaRefused(refused.diag.message_primary or str(refused)) from None
    cur.execute("DELETE FROM schema_migrations")
    cur.execute(
        "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)", (version, name, _checksum(sql))
    )
    return f"{version:04d}_{name} (moved from {chain})"


def _check_unchanged(records: list[tuple[int, str, str]], files: list[tuple[int, str, str]]) -> None:
    """Refuse a database that recorded a migration with another checksum than its file has now."""
    checksums = {version: (name, _checksum(sql)) for version, name, sql in files}
    for version, name, checksum in records:
        expected = checksums.get(version)
        if expected is not None and expected[1] != checksum:
            raise ChangedMigration(
                f"database recorded migration {version:04d}_{name} with checksum {checksum}, but "
                f"{version:04d}_{expected[0]}.sql has {expected[1]}; a migration is never edited once applied: "
                "drop the database and migrate again"
            )


#: pg_dump lines that describe the dump, not the schema: comments, session settings, and the random
#: ``\\restrict`` keys that pg_dump 17.6+ writes around every dump.
_DUMP_NOISE = re.compile(r"^(--.*|SET .*|SELECT pg_catalog\.set_config\(.*|\\(un)?restrict .*)$")


def dump_schema(url: str) -> str:
    """The schema of the database at ``url`` as ``pg_dump --schema-only`` prints it, minus the dump's noise.

    This is what ``book_assets/sql/schema.sql`` holds for a database migrated from 0001 to the latest
    migration: the current schema, readable in one file, with each function's COMMENT (its design note),
    and a test keeps the two equal. The password goes
    to pg_dump through the environment, never on its command line.
    """
    from book_assets.db.embedded import binary

    parts = urlsplit(url)
    env = {**os.environ, "PGPASSWORD": unquote(parts.password or "")}
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0] + "@" if len(netloc) == 2 else ""
    bare = urlunsplit(parts._replace(netloc=user + netloc[-1]))
    command = [str(binary("pg_dump")), "--schema-only", "--no-owner", "--no-privileges", "--dbname", bare]
    return schema_text(subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=True).stdout)


def schema_text(sql: str) -> str:
    """A schema dump (or ``schema.sql``) without comments, session settings and runs of blank lines."""
    lines = [line for line in sql.splitlines() if not _DUMP_NOISE.match(line)]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip() + "\n"
