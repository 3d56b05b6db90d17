"""``sandbox serve``: rejects bad options in one line, serves until SIGTERM, then exits cleanly."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

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
        (["--soft-block-rate", "2"], "Invalid value for '--soft-block-rate': 2.0 is not in the range"),
        (["--soft-block-rate", "0.6", "--error-rate", "0.6"], "add up to more than 1"),
        (["--redesign-day", "-1"], "Invalid value for '--redesign-day'"),
        (["--redesign-day", "1", "--redesign", "rating"], "Invalid value for '--redesign': unknown redesign change"),
        (["--redesign", "rating_class"], "--redesign needs --redesign-day"),
        (["--redesign-day", "1", "--redesign-drop-share", "0"], "Invalid value for '--redesign-drop-share'"),
    ],
)
def test_invalid_options_fail_with_a_click_error(args: list[str], message: str) -> None:
    result = CliRunner().invoke(sandbox, ["serve", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and message in errors[0]


def test_help_says_what_the_redesign_and_soft_block_options_do() -> None:
    text = " ".join(CliRunner().invoke(sandbox, ["serve", "--help"], terminal_width=200).output.split())

    assert "--soft-block-rate" in text and "a bot challenge, a login wall or an empty body" in text
    assert "--redesign-day" in text and "from this simulated day on" in text
    for change in ("rating_class", "description_id", "upc_moved", "description_dropped"):
        assert change in text


@contextmanager
def _served(*options: str) -> Iterator[str]:
    """``sandbox serve --port 0 *options`` in a process of its own; yields its URL, then stops it by SIGTERM."""
    command = [sys.executable, "-m", "book_assets.sandbox.cli", "serve", "--port", "0", *options]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+)/", line)
        assert match, line
        yield match.group(1)
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=10) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_serve_prints_its_url_serves_and_stops_on_sigterm() -> None:
    with _served("--day", "1") as url:
        response = httpx.get(url + "/index.html", timeout=5)
        assert response.status_code == 200


def test_serve_applies_the_redesign_from_its_day_and_scripted_soft_blocks() -> None:
    options = ["--day", "1", "--redesign-day", "2", "--redesign", "rating_class", "--script", "/index.html=soft_block"]
    with _served(*options) as url:
        blocked = httpx.get(url + "/index.html", timeout=5).text
        day1 = httpx.get(url + "/index.html", timeout=5).text
        httpx.post(url + "/__sandbox__/day", timeout=5)
        day2 = httpx.get(url + "/index.html", timeout=5).text
        redesign = httpx.get(url + "/__sandbox__/redesign", timeout=5).json()

    assert "Attention Required!" in blocked
    assert 'class="star-rating ' in day1 and 'class="rating-stars ' not in day1
    assert 'class="rating-stars ' in day2 and 'class="star-rating ' not in day2
    assert redesign == {"redesign": {"day": 2, "changes": ["rating_class"], "drop_share": 0.2}}


def test_serve_soft_blocks_at_its_rate() -> None:
    with _served("--soft-block-rate", "1") as url:
        stats_before = httpx.get(url + "/__sandbox__/stats", timeout=5).json()
        bodies = [httpx.get(url + f"/catalogue/page-{n}.html", timeout=5) for n in range(1, 4)]
        stats = httpx.get(url + "/__sandbox__/stats", timeout=5).json()

    assert stats_before["soft_blocks"] == {}
    assert all(r.status_code == 200 and "product_pod" not in r.text for r in bodies)
    assert sum(len(kinds) for kinds in stats["soft_blocks"].values()) == 3
