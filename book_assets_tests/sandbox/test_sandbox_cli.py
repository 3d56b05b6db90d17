"""``sandbox serve``: rejects bad options in one line, serves until SIGTERM, then exits cleanly."""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import httpx
import pytest
from click.testing import CliRunner

from book_assets.sandbox.cli import sandbox


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--error-rate", "2"], "not in the range"),
        (["--error-rate", "0.6", "--reset-rate", "0.6"], "add up to more than 1"),
        (["--script", "no-slash=503"], "PATH=STEP"),
        (["--script", "/index.html=explode"], "unknown scripted fault"),
        (["--over-capacity", "queue"], "'queue' is not one of"),
    ],
)
def test_invalid_options_fail_with_a_click_error(args: list[str], message: str) -> None:
    result = CliRunner().invoke(sandbox, ["serve", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_serve_prints_its_url_serves_and_stops_on_sigterm() -> None:
    command = [sys.executable, "-m", "book_assets.sandbox.cli", "serve", "--port", "0", "--day", "1"]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+)/", line)
        assert match, line
        response = httpx.get(match.group(1) + "/index.html", timeout=5)
        assert response.status_code == 200
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=10) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
