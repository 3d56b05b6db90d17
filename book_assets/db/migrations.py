"""Versioned, idempotent schema migrations.

Each ``book_assets/sql/migrations/NNNN_<name>.sql`` runs once, in its own transaction, recorded in
``schema_migrations`` with a checksum. Concurrent migrators serialize on an advisory lock, so two workers
starting together cannot both apply a file. A database whose schema is newer than this code is refused
with a clear error instead of being written to by code that does not know its tables.

The migrations before 0.1.0 (0001 to 0018) were squashed into ``0001_initial``. A database they made at 0018
has today's tables, so it is moved in place: its functions are replaced by those of ``0001_initial`` and its
record becomes the new one. One they left at an earlier version is refused with one line saying how to move.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

from book_assets.db.connection import Cursor, Database
from book_assets.sql import migration_files

# Any fixed 64-bit number; shared by every book-pipeline process migrating the same database.
_LOCK_KEY = 0x626F6F6B5F706970


class SchemaTooNew(RuntimeError):
    """The database was migrated by a newer book-pipeline."""


class PreReleaseSchema(SchemaTooNew):
    """The database was left by the pre-release migrations before their last one, which this code cannot move."""


#: The checksum of the pre-release ``0001_initial`` and the last version of that chain: a database whose
#: version 1 has this checksum was made by the pre-release migrations, which ``0001_initial`` replaced.
_PRE_RELEASE_INITIAL = "14ede22c7cd8bcdf"
_PRE_RELEASE_LAST = 18
#: The line of ``0001_initial.sql`` after which only functions and their comments follow.
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
        cur.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version INTEGER PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL,
                   applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"""
        )
        cur.execute("SELECT version, checksum FROM schema_migrations")
        recorded = {int(r["version"]): r["checksum"] for r in cur.fetchall()}
        if recorded.get(1) == _PRE_RELEASE_INITIAL:
            applied.append(_move_pre_release(cur, max(recorded), files[0]))
            recorded = {1: _checksum(files[0][2])}
        done = set(recorded)
        newest = max(done, default=0)
        if newest > latest:
            raise SchemaTooNew(
                f"database schema is at version {newest} but this book-pipeline knows only up to {latest}; "
                "upgrade book-pipeline"
            )
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


def _move_pre_release(cur: Cursor, newest: int, initial: tuple[int, str, str]) -> str:
    """Move a database the pre-release migrations made to ``0001_initial``: same tables, today's functions.

    Every function and composite type of the schema is dropped (the pre-release chain never dropped a replaced
    function) and those of ``0001_initial`` created; the tables, and so the data, stay as they are.
    """
    if newest != _PRE_RELEASE_LAST:
        raise PreReleaseSchema(
            f"database schema is at pre-release migration {newest:04d}, which this book-pipeline cannot move; "
            f"migrate it to {_PRE_RELEASE_LAST:04d} with the book-pipeline of before 0.1.0 first, "
            "or drop the database and crawl again"
        )
    version, name, sql = initial
    cur.execute(
        """DO $$ DECLARE f regprocedure; t regtype;
           BEGIN
               FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
                        WHERE p.pronamespace = current_schema()::regnamespace LOOP
                   EXECUTE format('DROP FUNCTION %s', f);
               END LOOP;
               FOR t IN SELECT ty.oid::regtype FROM pg_type ty JOIN pg_class c ON c.oid = ty.typrelid
                        WHERE c.relkind = 'c' AND ty.typnamespace = current_schema()::regnamespace LOOP
                   EXECUTE format('DROP TYPE %s', t);
               END LOOP;
           END $$"""
    )
    cur.execute(sql[sql.index(FUNCTIONS_MARKER) :])
    cur.execute("DELETE FROM schema_migrations")
    cur.execute(
        "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)", (version, name, _checksum(sql))
    )
    return f"{version:04d}_{name} (moved from pre-release {newest:04d})"


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
