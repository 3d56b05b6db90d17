"""``book-pipeline ui`` and ``demo`` end with their children: SIGTERM to ``ui`` stops dagster-webserver,
dagster-daemon and the code servers they started; SIGTERM to ``demo`` stops its crawl, Playwright and
Chromium — real processes on a real port and the test database.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import psutil
import psycopg2
import pytest

from book_assets.db.embedded import free_port

CLI = [sys.executable, "-m", "book_assets.cli"]


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _cmd(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:  # gone, or a zombie
        return ""


def _names(procs: list[psutil.Process]) -> str:
    return "\n".join(_cmd(p)[:120] for p in procs)


def _drop_dagster_database(database_url: str) -> None:
    parts = urlsplit(database_url)
    conn = psycopg2.connect(urlunsplit(parts._replace(path="/postgres")), connect_timeout=10)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f'DROP DATABASE IF EXISTS "{parts.path.strip("/")}_dagster" WITH (FORCE)')
    conn.close()


@pytest.mark.slow
def test_sigterm_to_ui_stops_webserver_daemon_and_their_children(database_url: str, tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BOOK_PIPELINE_", "DAGSTER_"))}
    env.update({"DATABASE_URL": database_url, "BOOK_PIPELINE_DATA_DIR": str(tmp_path / "data")})
    log = (tmp_path / "ui.log").open("wb")
    ui = subprocess.Popen([*CLI, "ui", "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT)
    family: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            assert ui.poll() is None, (tmp_path / "ui.log").read_text()[-2000:]
            family = _descendants(ui.pid)
            commands = " ".join(_cmd(p) for p in family)
            if "dagster-webserver" in commands and "dagster-daemon" in commands:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
            time.sleep(0.5)
        else:
            pytest.fail("the UI did not come up:\n" + (tmp_path / "ui.log").read_text()[-2000:])
        time.sleep(2)  # let the daemon start its code server too
        family = _descendants(ui.pid)
        assert len(family) >= 2
        ui.send_signal(signal.SIGTERM)
        code = ui.wait(timeout=60)
        _gone, alive = psutil.wait_procs(family, timeout=30)
        assert not alive, "still running after SIGTERM to ui:\n" + _names(alive)
        assert code == 0  # a stop it handled, not death by signal
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=2)
    finally:
        for proc in [*family, *_descendants(ui.pid)]:
            if proc.is_running():
                proc.kill()
        if ui.poll() is None:
            ui.kill()
            ui.wait()
        log.close()
        _drop_dagster_database(database_url)


@pytest.mark.slow
@pytest.mark.browser
def test_sigterm_to_demo_stops_its_crawl_and_browser(database_url: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BOOK_PIPELINE_", "DAGSTER_"))}
    env.update({"DATABASE_URL": database_url, "BOOK_PIPELINE_DATA_DIR": str(tmp_path / "data")})
    log = (tmp_path / "demo.log").open("wb")
    command = [*CLI, "demo", "--port", "0", "--fetch", "browser", "--workers", "1", "--concurrency", "1"]
    demo = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    family: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert demo.poll() is None, (tmp_path / "demo.log").read_text()[-2000:]
            family = _descendants(demo.pid)
            if any("chrom" in _cmd(p) for p in family):
                break
            time.sleep(0.5)
        else:
            pytest.fail("the demo never started a browser:\n" + (tmp_path / "demo.log").read_text()[-2000:])
        time.sleep(2)  # crawling now
        family = _descendants(demo.pid)
        demo.send_signal(signal.SIGTERM)
        code = demo.wait(timeout=60)
        _gone, alive = psutil.wait_procs(family, timeout=30)
        assert not alive, "still running after SIGTERM to demo:\n" + _names(alive)
        assert code == 128 + signal.SIGTERM
    finally:
        for proc in [*family, *_descendants(demo.pid)]:
            if proc.is_running():
                proc.kill()
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        log.close()
        _drop_dagster_database(database_url)
