"""The sandbox's operator endpoints: the simulated day moves on request, and faults can be switched on for a
while, so a long-running pipeline can be fed new days and bad moments without restarting the site."""

from __future__ import annotations

import time

import httpx
import pytest

from book_assets.sandbox.catalogue import Catalogue
from book_assets.sandbox.server import SandboxServer
from book_assets.sandbox.testing import SandboxFactory


@pytest.fixture
def sandbox(sandbox_factory: SandboxFactory) -> SandboxServer:
    """A server of this test's own: moving the day or starting a burst must not reach the session's sandbox."""
    return sandbox_factory()


def _price_of(server: SandboxServer, path: str) -> str:
    html = httpx.get(server.url_for(path), timeout=10).text
    return html.split('<p class="price_color">', 1)[1].split("<", 1)[0]


def test_a_post_to_day_serves_the_next_simulated_day_from_the_next_request_on(sandbox: SandboxServer) -> None:
    day1 = Catalogue(seed=sandbox.catalogue.seed, day=1)
    path, book = next((p, b) for p, b in day1.ground_truth().items() if b.id in day1.changed_ids)
    before = _price_of(sandbox, path)

    answer = httpx.post(sandbox.url_for("/__sandbox__/day"), timeout=10)

    assert answer.status_code == 200
    assert answer.json() == {"seed": day1.seed, "day": 1, "books": len(day1)}
    assert sandbox.catalogue.day == 1
    assert _price_of(sandbox, path) == f"£{book.price:.2f}" != before


def test_a_post_to_day_with_to_serves_that_day_and_a_bad_day_is_refused_in_one_line(sandbox: SandboxServer) -> None:
    assert httpx.post(sandbox.url_for("/__sandbox__/day?to=3"), timeout=10).json()["day"] == 3
    assert httpx.get(sandbox.url_for("/__sandbox__/day"), timeout=10).json()["day"] == 3

    refused = httpx.post(sandbox.url_for("/__sandbox__/day?to=-1"), timeout=10)

    assert refused.status_code == 400
    assert "day must be >= 0" in refused.json()["error"]
    assert sandbox.catalogue.day == 3


def test_a_fault_burst_fails_pages_until_it_is_ended_then_the_site_serves_again(sandbox: SandboxServer) -> None:
    started = httpx.post(sandbox.url_for("/__sandbox__/faults?error_rate=1&seconds=600"), timeout=10)

    assert started.json()["burst"] == {"error_rate": 1.0}
    statuses = {httpx.get(sandbox.url_for("/index.html"), timeout=10).status_code for _ in range(5)}
    assert statuses <= {500, 503}

    ended = httpx.post(sandbox.url_for("/__sandbox__/faults?seconds=0"), timeout=10)

    assert ended.json() == {"burst": {}, "until": None}
    assert httpx.get(sandbox.url_for("/index.html"), timeout=10).status_code == 200


def test_a_fault_burst_ends_by_itself_after_its_seconds(sandbox: SandboxServer) -> None:
    httpx.post(sandbox.url_for("/__sandbox__/faults?error_rate=1&seconds=0.5"), timeout=10)
    time.sleep(0.6)  # a request after this is past the burst, however slow the machine

    assert httpx.get(sandbox.url_for("/index.html"), timeout=10).status_code == 200
    assert httpx.get(sandbox.url_for("/__sandbox__/faults"), timeout=10).json() == {"burst": {}, "until": None}


@pytest.mark.parametrize(
    ("query", "message"),
    [("bomb_rate=1", "unknown fault 'bomb_rate'"), ("error_rate=2", "between 0 and 1"), ("error_rate=x", "float")],
)
def test_a_bad_fault_burst_is_refused_in_one_line_and_changes_nothing(
    sandbox: SandboxServer, query: str, message: str
) -> None:
    refused = httpx.post(sandbox.url_for(f"/__sandbox__/faults?{query}"), timeout=10)

    assert refused.status_code == 400
    assert message in refused.json()["error"]
    assert sandbox.faults == sandbox.app.base_faults
