"""The ``book-pipeline db`` commands, run as a user runs them: as a subprocess."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import psycopg2
import pytest

from book_assets.db import embedded
from book_assets_tests.conftest import child_env

CLI = [sys.executable, "-m", "book_assets.cli"]


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = child_env(**(env or {}))
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, env=full_env)


def test_db_url_prints_a_url_psql_connects_with(database_url: str) -> None:
    result = run_cli("db", "url", env={"DATABASE_URL": database_url})
    assert result.returncode == 0, result.stderr
    url = result.stdout.strip()
    psycopg2.connect(url).close()
    assert shutil.which("psql"), "no psql: `make setup` installs the PostgreSQL client"
    out = subprocess.run(["psql", url, "-Atc", "SELECT 42"], capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "42", out.stderr


def test_db_status_against_an_external_database_url(database_url: str) -> None:
    result = run_cli("db", "status", env={"DATABASE_URL": database_url})
    assert result.returncode == 0, result.stderr
    assert "external" in result.stdout
    assert "books:    total" in result.stdout


@pytest.mark.parametrize(
    ("args", "env", "needle"),
    [
        (("db", "status"), {"DATABASE_URL": "mysql://u@h/db"}, "DATABASE_URL"),
        (("db", "migrate"), {"DATABASE_URL": "postgresql://u:s3cret@127.0.0.1:1/db"}, "cannot connect"),
        (("db", "status"), {"BOOK_PIPELINE_CONCURRENCY": "-3"}, "concurrency"),
        (("db", "frobnicate"), {}, "No such command"),
    ],
)
def test_bad_configuration_gives_one_line_error_and_nonzero_exit(
    args: tuple[str, ...], env: dict[str, str], needle: str
) -> None:
    result = run_cli(*args, env=env)
    assert result.returncode != 0
    assert needle in result.stderr
    assert "Traceback" not in result.stderr
    assert "s3cret" not in result.stderr + result.stdout


def test_embedded_cluster_starts_keeps_data_and_stops(tmp_path: Path) -> None:
    pgdata = tmp_path / "pg"
    state = embedded.up(pgdata)
    try:
        assert state.running and state.port and state.port != 5432
        conn = psycopg2.connect(embedded.admin_url(state.port))
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE kept (x int); INSERT INTO kept VALUES (7)")
        conn.close()
        assert embedded.up(pgdata).pid == state.pid  # idempotent: the running server is reused
        assert embedded.down(pgdata) is True
        assert embedded.status(pgdata).running is False
        restarted = embedded.up(pgdata)
        conn = psycopg2.connect(embedded.admin_url(restarted.port or 0))
        with conn.cursor() as cur:
            cur.execute("SELECT x FROM kept")
            assert cur.fetchone() == (7,)
        conn.close()
    finally:
        where = embedded.status(pgdata).pgdata
        embedded.down(pgdata)
        if where != pgdata:  # relocated (as root, /tmp/pytest-of-root is 0700): not left under /var/lib
            shutil.rmtree(where.parent, ignore_errors=True)
    assert embedded.down(pgdata) is False
