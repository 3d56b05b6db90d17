"""The browser's off-domain guard follows the main frame's navigation, hop by hop, from DevTools events.

A real local HTTP server and a real headless Chromium. "localhost" reaches the same server under another
hostname, outside ``allowed_domains``, so ``hits`` shows whether an off-domain target was ever requested.
"""

from __future__ import annotations

import asyncio
import http.server
import threading
from collections.abc import Iterator

import pytest

from book_assets.scraper.errors import FetchError
from book_assets.scraper.fetch_browser import BrowserFetcher
from book_assets.scraper.fetching import FetchResult, FetchSettings

PAGE = b"<!DOCTYPE html><html><head><meta charset='utf-8'><title>ok</title></head><body><h1>ok</h1></body></html>"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Site

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.server.hits.append((self.headers.get("Host", "").split(":")[0], self.path))
        port = self.server.server_address[1]
        if self.path == "/with-offsite-iframe":
            frame = f"<iframe src='http://localhost:{port}/framed'></iframe>".encode()
            body = PAGE.replace(b"</body>", frame + b"</body>")
        elif self.path.startswith("/hop/"):
            left = int(self.path.rsplit("/", 1)[1])
            target = f"/hop/{left - 1}" if left > 0 else f"http://localhost:{port}/target"
            self.send_response(302)
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        else:
            body = PAGE
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Site(http.server.ThreadingHTTPServer):
    hits: list[tuple[str, str]]


@pytest.fixture
def site() -> Iterator[_Site]:
    server = _Site(("127.0.0.1", 0), _Handler)
    server.hits = []
    # A short poll: shutdown() waits for the serving loop to look up, every 0.5 s by default.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _url(site: _Site, path: str) -> str:
    return f"http://127.0.0.1:{site.server_address[1]}{path}"


def _fetch_all(urls: list[str], javascript: bool = False) -> tuple[list[FetchResult | FetchError], dict[str, int]]:
    """Fetch ``urls`` one after the other on one tab; each outcome, and the fetcher's counters."""

    async def run() -> tuple[list[FetchResult | FetchError], dict[str, int]]:
        settings = FetchSettings(allowed_domains=frozenset({"127.0.0.1"}), timeout_s=10.0, concurrency=1)
        outcomes: list[FetchResult | FetchError] = []
        async with BrowserFetcher(settings) as fetcher:
            for url in urls:
                try:
                    outcomes.append(await fetcher.fetch(url, javascript=javascript))
                except FetchError as error:
                    outcomes.append(error)
            return outcomes, fetcher.stats()

    return asyncio.run(run())


@pytest.mark.browser
@pytest.mark.timeout(120)
@pytest.mark.parametrize("javascript", [False, True])
def test_an_offsite_iframe_is_refused_but_does_not_fail_the_page(site: _Site, javascript: bool) -> None:
    (result,), stats = _fetch_all([_url(site, "/with-offsite-iframe")], javascript)
    assert isinstance(result, FetchResult) and result.status == 200
    assert ("localhost", "/framed") not in site.hits
    assert stats["offsite_blocked"] >= 1


@pytest.mark.browser
@pytest.mark.timeout(120)
def test_an_offsite_hop_after_allowed_redirects_fails_the_fetch_and_the_tab_serves_the_next(site: _Site) -> None:
    first, second = _fetch_all([_url(site, "/hop/3"), _url(site, "/ok")])[0]
    assert isinstance(first, FetchError) and (first.kind, first.retryable) == ("offsite_redirect", False)
    assert "localhost" in str(first)
    assert ("localhost", "/target") not in site.hits
    assert [path for _host, path in site.hits[:4]] == ["/hop/3", "/hop/2", "/hop/1", "/hop/0"]
    assert isinstance(second, FetchResult) and second.status == 200 and b"<h1>ok</h1>" in second.body
