"""Each fault mode is seen by a real HTTP client the way it would meet it on a flaky live site."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest

from book_assets.sandbox import Action, Faults, SandboxServer
from book_assets.sandbox.testing import SandboxFactory

BOOKS = [f"/catalogue/page-{n}.html" for n in range(1, 41)]


# --- pure decisions ----------------------------------------------------------------------------------------


def test_decisions_are_a_function_of_seed_path_and_request_index() -> None:
    faults = Faults(error_rate=0.2, reset_rate=0.1, jitter_s=0.05)
    first = [faults.decide(7, path, n) for path in BOOKS for n in range(3)]
    again = [faults.decide(7, path, n) for path in BOOKS for n in range(3)]
    other_seed = [faults.decide(8, path, n) for path in BOOKS for n in range(3)]
    assert first == again
    assert first != other_seed


def test_probabilities_roughly_match_their_rates() -> None:
    faults = Faults(error_rate=0.2, rate_limit_rate=0.1)
    actions = [faults.decide(0, f"/p{i}", 0).action for i in range(4000)]
    errors = sum(a in (Action.ERROR_500, Action.ERROR_503) for a in actions) / len(actions)
    limited = actions.count(Action.RATE_LIMIT) / len(actions)
    assert 0.17 < errors < 0.23
    assert 0.08 < limited < 0.12
    assert Action.ERROR_500 in actions and Action.ERROR_503 in actions


def test_scripted_steps_come_first_then_normal_service() -> None:
    faults = Faults(scripted={"/a": [503, "reset", 429]})
    assert [faults.decide(0, "/a", n).action for n in range(5)] == [
        Action.ERROR_503,
        Action.RESET,
        Action.RATE_LIMIT,
        Action.SERVE,
        Action.SERVE,
    ]
    assert faults.decide(0, "/b", 0).action is Action.SERVE


@pytest.mark.parametrize(
    "kwargs",
    [
        {"error_rate": 0.7, "reset_rate": 0.7},
        {"error_rate": -0.1},
        {"latency_s": -1},
        {"scripted": {"/a": ["explode"]}},
        {"max_connections": 0},
    ],
)
def test_invalid_fault_settings_are_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Faults(**kwargs)  # type: ignore[arg-type]


# --- over the wire -----------------------------------------------------------------------------------------


def test_error_rate_one_answers_500_or_503_with_html(sandbox_factory: SandboxFactory) -> None:
    server = sandbox_factory(faults=Faults(error_rate=1.0))
    with httpx.Client(base_url=server.url) as client:
        statuses = {client.get(path).status_code for path in BOOKS}
    assert statuses == {500, 503}


def test_rate_limit_sends_429_with_retry_after(sandbox_factory: SandboxFactory) -> None:
    server = sandbox_factory(faults=Faults(rate_limit_rate=1.0, retry_after_s=7))
    response = httpx.get(server.url + "/index.html")
    assert response.status_code == 429
    assert response.headers["retry-after"] == "7"


def test_reset_is_a_connection_error_for_the_client(sandbox_factory: SandboxFactory) -> None:
    server = sandbox_factory(faults=Faults(reset_rate=1.0))
    with pytest.raises(httpx.ReadError, match="Connection reset by peer"):
        httpx.get(server.url + "/index.html")


def test_truncated_body_is_reported_incomplete(sandbox_factory: SandboxFactory) -> None:
    server = sandbox_factory(faults=Faults(truncate_rate=1.0))
    with pytest.raises(httpx.RemoteProtocolError, match="complete message body"):
        httpx.get(server.url + "/index.html")
    # At the socket level: status 200, the full length announced, fewer bytes sent, then EOF.
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(b"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK")
    announced = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
    assert 0 < len(body) < announced


def test_a_bomb_is_a_small_gzip_body_with_an_honest_length_that_inflates_to_bomb_bytes(
    sandbox_factory: SandboxFactory,
) -> None:
    server = sandbox_factory(faults=Faults(scripted={"/index.html": ["bomb"]}, bomb_bytes=64 << 20))
    with httpx.stream("GET", server.url + "/index.html") as response:
        assert response.status_code == 200 and response.headers["content-encoding"] == "gzip"
        wire = int(response.headers["content-length"])
        inflated = sum(len(chunk) for chunk in response.iter_bytes())
        assert response.num_bytes_downloaded == wire
    assert inflated == 64 << 20 and wire < inflated / 500
    assert httpx.get(server.url + "/index.html").headers.get("content-encoding") is None  # the script is spent
    assert Faults(bomb_rate=1.0).decide(0, "/index.html", 0).action is Action.BOMB


def test_hang_outlasts_the_client_timeout_and_stops_with_the_server(sandbox_factory: SandboxFactory) -> None:
    server = sandbox_factory(faults=Faults(hang_rate=1.0, hang_s=20))
    with pytest.raises(httpx.ReadTimeout):  # the hang outlasted the client's timeout
        httpx.get(server.url + "/index.html", timeout=0.5)
    server.stop()  # joins the server thread for at most 10 s, half the hang
    assert server._thread is not None and not server._thread.is_alive()


def test_hang_ends_by_closing_without_a_response(sandbox_factory: SandboxFactory) -> None:
    server = sandbox_factory(faults=Faults(hang_rate=1.0, hang_s=0.3))
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.get(server.url + "/index.html", timeout=5)


def test_scripted_failures_then_success_and_reset_restarts_them(sandbox_factory: SandboxFactory) -> None:
    path = "/catalogue/page-3.html"
    server = sandbox_factory(faults=Faults(scripted={path: [503, 503]}))
    with httpx.Client(base_url=server.url) as client:
        assert [client.get(path).status_code for _ in range(4)] == [503, 503, 200, 200]
        assert client.get("/catalogue/page-4.html").status_code == 200
        client.post("/__sandbox__/reset")
        assert client.get(path).status_code == 503


def test_error_and_maintenance_pages_are_200s_in_the_site_template_with_no_catalogue_content(
    sandbox_factory: SandboxFactory,
) -> None:
    path = "/catalogue/category/books/travel_2/index.html"
    server = sandbox_factory(faults=Faults(scripted={path: ["error_page", "maintenance"]}))
    with httpx.Client(base_url=server.url, timeout=10) as client:
        error, maintenance, page = (client.get(path) for _ in range(3))
    assert [r.status_code for r in (error, maintenance, page)] == [200, 200, 200]
    assert "<h1>Something went wrong</h1>" in error.text and "<h1>We&#39;ll be back soon</h1>" in maintenance.text
    for notice in (error, maintenance):
        assert '<header class="header container-fluid">' in notice.text and 'class="breadcrumb"' in notice.text
        assert "product_pod" not in notice.text and "form-horizontal" not in notice.text
        assert 'href="../../../../index.html"' in notice.text  # the chrome's links resolve from where it is served
    assert "product_pod" in page.text
    assert server.stats().responses[path] == [200, 200, 200]


def test_latency_delays_each_page(sandbox_factory: SandboxFactory) -> None:
    server = sandbox_factory(faults=Faults(latency_s=0.3))
    started = time.monotonic()
    assert httpx.get(server.url + "/index.html").status_code == 200
    assert time.monotonic() - started >= 0.3


def test_same_seed_meets_the_same_faults(sandbox_factory: SandboxFactory) -> None:
    def statuses(seed: int) -> list[int]:
        server = sandbox_factory(faults=Faults(error_rate=0.3, rate_limit_rate=0.2), seed=seed)
        with httpx.Client(base_url=server.url) as client:
            return [client.get(path).status_code for path in BOOKS for _ in range(2)]

    first, second, other = statuses(3), statuses(3), statuses(4)
    assert first == second
    assert first != other
    assert {200, 429} <= set(first)


def _parallel_get(url: str, count: int) -> list[int | str]:
    """``count`` clients, each on its own connection, fetch ``url`` at the same time."""
    results: list[int | str] = [""] * count
    barrier = threading.Barrier(count)

    def fetch(i: int) -> None:
        with httpx.Client(timeout=10) as client:
            barrier.wait()
            try:
                results[i] = client.get(url).status_code
            except httpx.TransportError as exc:
                results[i] = type(exc).__name__

    threads = [threading.Thread(target=fetch, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_connection_cap_makes_excess_clients_wait(sandbox_factory: SandboxFactory) -> None:
    server = sandbox_factory(faults=Faults(latency_s=0.25, max_connections=2), keepalive_timeout_s=0.2)
    started = time.monotonic()
    results = _parallel_get(server.url + "/index.html", 6)
    assert results == [200] * 6
    assert server.stats().max_concurrency == 2
    assert time.monotonic() - started >= 0.7  # three waves of two


def test_connection_cap_can_refuse_excess_clients(sandbox_factory: SandboxFactory) -> None:
    server = sandbox_factory(faults=Faults(latency_s=0.5, max_connections=2, over_capacity="refuse"))
    results = _parallel_get(server.url + "/index.html", 6)
    assert 1 <= results.count(200) <= 2
    assert all(r == 200 or r in ("ReadError", "ConnectError", "RemoteProtocolError") for r in results)


def test_without_a_cap_requests_run_concurrently(sandbox_factory: SandboxFactory) -> None:
    server = sandbox_factory(faults=Faults(latency_s=0.3))
    assert _parallel_get(server.url + "/index.html", 6) == [200] * 6
    assert server.stats().max_concurrency == 6


def test_robots_txt_is_404_by_default_and_served_when_configured(
    sandbox: SandboxServer, sandbox_factory: SandboxFactory
) -> None:
    assert httpx.get(sandbox.url + "/robots.txt").status_code == 404
    rules = "User-agent: *\nDisallow: /catalogue/category/\n"
    server = sandbox_factory(faults=Faults(robots_txt=rules))
    response = httpx.get(server.url + "/robots.txt")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain"
    assert response.text == rules


def test_observability_endpoint_is_never_faulted_or_counted(sandbox_factory: SandboxFactory) -> None:
    server = sandbox_factory(faults=Faults(reset_rate=0.5, error_rate=0.5))
    with httpx.Client(base_url=server.url) as client:
        for _ in range(20):
            assert client.get("/__sandbox__/stats").status_code == 200
        assert client.get("/__sandbox__/stats").json()["total_requests"] == 0
