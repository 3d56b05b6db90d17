"""Blocking inside Chromium and JavaScript per fetch, counted by the sandbox (requests per path).

The sandbox's book pages link the live site's stylesheets, scripts and cover image; what the browser
requested is read from the sandbox's own counters, so a pattern that Chromium did not apply shows up.
"""

from __future__ import annotations

import asyncio

import pytest

from book_assets.sandbox.server import SandboxServer
from book_assets.sandbox.testing import SandboxFactory
from book_assets.scraper.fetch_browser import BrowserFetcher
from book_assets.scraper.fetching import FetchResult, FetchSettings
from book_assets.scraper.targets import with_start_port

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]
BOOK = "/catalogue/a-brave-guide-to-cooking-at-home_120/index.html"


def _fetch(
    server: SandboxServer, per_fetch: bool | None = None, **overrides: object
) -> tuple[FetchResult, dict[str, int]]:
    """Fetch the book page once (``per_fetch``: the fetch's own JavaScript choice), with its stats."""
    allowed = with_start_port({"127.0.0.1"}, server.url_for("/"))
    settings = FetchSettings(allowed_domains=allowed, timeout_s=15.0, **overrides)  # type: ignore[arg-type]

    async def main() -> tuple[FetchResult, dict[str, int]]:
        async with BrowserFetcher(settings) as fetcher:
            result = await fetcher.fetch(server.url_for(BOOK), javascript=per_fetch)
            await asyncio.sleep(0.3)  # a late subresource would arrive by now
            return result, fetcher.stats()

    server.reset_stats()
    return asyncio.run(main())


def _hit(server: SandboxServer, *suffixes: str) -> list[str]:
    return sorted(path for path in server.stats().hits if path.endswith(suffixes))


def test_images_and_stylesheets_are_blocked_inside_chromium_as_the_settings_say(
    sandbox_factory: SandboxFactory,
) -> None:
    server = sandbox_factory()
    result, stats = _fetch(server, per_fetch=True)
    assert result.status == 200 and BOOK in server.stats().hits
    assert _hit(server, ".css", ".jpg", ".png", ".ico") == []
    assert stats["blocked_requests"] >= 3  # three stylesheets and the cover, at least

    _fetch(server, per_fetch=True, block_resource_types=frozenset({"image"}), block_url_patterns=())
    assert _hit(server, ".css"), "with stylesheets no longer blocked, the page's stylesheets are requested"
    assert _hit(server, ".jpg", ".png") == []


def test_a_url_pattern_blocks_scripts_inside_chromium(sandbox_factory: SandboxFactory) -> None:
    server = sandbox_factory()
    _fetch(server, per_fetch=True, block_url_patterns=())
    assert _hit(server, "/ui.js"), "the page's own script is requested when nothing blocks it"
    _fetch(server, per_fetch=True, block_url_patterns=(r"/oscar/ui\.js",))
    assert _hit(server, "/ui.js") == []


def test_javascript_off_requests_no_script_and_skips_the_rendered_dom(sandbox_factory: SandboxFactory) -> None:
    server = sandbox_factory()
    result, _ = _fetch(server, per_fetch=False)
    assert result.status == 200 and "A Brave Guide to Cooking" in result.html
    assert result.rendered_html is None
    assert _hit(server, ".js") == []

    result, _ = _fetch(server, per_fetch=True)
    assert result.rendered_html is not None and _hit(server, ".js")


def test_the_javascript_setting_decides_when_the_caller_does_not(sandbox_factory: SandboxFactory) -> None:
    server = sandbox_factory()
    result, _ = _fetch(server, javascript="off")
    assert result.rendered_html is None and _hit(server, ".js") == []
    result, _ = _fetch(server)  # "auto": only the caller knows whether a page type needs scripts
    assert result.rendered_html is not None
