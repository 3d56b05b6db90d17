"""No request to an internal address: a "secret" server on the second loopback address 127.0.0.2, and
another on the crawl's own host at another port (where a Dagster UI or a database would listen), must get
0 requests from either fetch mode — direct, through redirects (absolute, scheme-relative, via an allowed
hop), through a meta refresh, and through a whole crawl whose listing links to them.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator

import pytest

from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets.sandbox.catalogue import Catalogue
from book_assets.sandbox.pages import Site
from book_assets.scraper.errors import FetchError
from book_assets.scraper.fetch_browser import BrowserFetcher
from book_assets.scraper.fetch_http import HttpFetcher
from book_assets.scraper.fetching import Fetcher, FetchSettings
from book_assets.scraper.targets import with_start_port
from book_assets.store.books import book_counts
from book_assets_tests.crawl.conftest import sandbox_config
from book_assets_tests.reliability.conftest import task_counts
from book_assets_tests.reliability.stub_site import Page, StubSite

LISTING = "/catalogue/category/books/mystery_3/index.html"
CARD_HREF = re.compile(r'href="\.\./\.\./\.\./([a-z0-9-]+_\d+)/index\.html"')

MODES = ["http", pytest.param("browser", marks=pytest.mark.browser)]


@pytest.fixture
def secrets() -> Iterator[tuple[StubSite, StubSite]]:
    """(secret on 127.0.0.2, secret on 127.0.0.1 at another port), each serving 200 everywhere."""
    page = Page(body=b"<html><body>secret</body></html>")
    with StubSite({"/secret": page}, host="127.0.0.2") as far, StubSite({"/secret": page}) as near:
        yield far, near


def _lures(far: StubSite, near: StubSite) -> dict[str, Page]:
    far_url, near_url = far.url_for("/secret", host="127.0.0.2"), near.url_for("/secret")

    def refresh(to: str) -> Page:
        return Page(body=f'<html><head><meta http-equiv="refresh" content="0; url={to}"></head></html>'.encode())

    return {
        "/absolute-far": Page(status=302, headers={"Location": far_url}),
        "/absolute-near": Page(status=302, headers={"Location": near_url}),
        "/scheme-relative-far": Page(status=301, headers={"Location": far_url.removeprefix("http:")}),
        "/scheme-relative-near": Page(status=307, headers={"Location": near_url.removeprefix("http:")}),
        "/via-allowed-hop": Page(status=302, headers={"Location": "/absolute-near"}),
        "/via-allowed-hop-far": Page(status=303, headers={"Location": "/absolute-far"}),
        "/refresh-far": refresh(far_url),
        "/refresh-near": refresh(near_url),
    }


def _fetcher(mode: str, fetch_settings: FetchSettings) -> Fetcher:
    return HttpFetcher(fetch_settings) if mode == "http" else BrowserFetcher(fetch_settings)


def _try_all(mode: str, allowed: frozenset[str], urls: list[str]) -> dict[str, str]:
    """Fetch each URL in turn; the outcome per URL: the error kind, or "ok"."""

    async def main() -> dict[str, str]:
        outcomes: dict[str, str] = {}
        settings = FetchSettings(mode=mode, allowed_domains=allowed, timeout_s=10.0)  # type: ignore[arg-type]
        async with _fetcher(mode, settings) as fetcher:
            for url in urls:
                try:
                    await fetcher.fetch(url)
                    outcomes[url] = "ok"
                except FetchError as exc:
                    outcomes[url] = exc.kind
            await asyncio.sleep(1.0)  # let a late meta refresh try its luck before the hits are counted
        return outcomes

    return asyncio.run(main())


@pytest.mark.parametrize("mode", MODES)
def test_secret_servers_get_no_request_directly_or_through_redirects_and_refreshes(
    mode: str, secrets: tuple[StubSite, StubSite]
) -> None:
    far, near = secrets
    with StubSite(_lures(far, near)) as site:
        allowed = with_start_port({"127.0.0.1"}, site.url_for("/"))
        direct = [far.url_for("/secret", host="127.0.0.2"), near.url_for("/secret"), f"http://127.1:{near.port}/secret"]
        outcomes = _try_all(mode, allowed, [*direct, *(site.url_for(path) for path in _lures(far, near))])
    assert far.total_hits() == 0 and near.total_hits() == 0, (far.hits, near.hits, outcomes)
    for url in direct:
        assert outcomes[url] == "offsite"
    for url, kind in outcomes.items():
        if "/refresh-" in url:
            # http mode does not follow a meta refresh; the browser fails the page instead of following it
            assert kind == ("ok" if mode == "http" else "offsite_redirect"), (url, kind)
        elif url not in direct:
            assert kind == "offsite_redirect", (url, kind)


@pytest.mark.parametrize("mode", MODES)
def test_no_allowed_hosts_still_refuses_internal_addresses(mode: str, secrets: tuple[StubSite, StubSite]) -> None:
    far, near = secrets
    urls = [far.url_for("/secret", host="127.0.0.2"), near.url_for("/secret"), f"http://localhost:{near.port}/secret"]
    outcomes = _try_all(mode, frozenset(), urls)
    assert far.total_hits() == 0 and near.total_hits() == 0, outcomes
    assert set(outcomes.values()) == {"offsite"}


@pytest.mark.parametrize("mode", MODES)
def test_a_crawl_whose_listing_links_to_internal_addresses_never_requests_them(
    mode: str, secrets: tuple[StubSite, StubSite], db: Database, database_url: str
) -> None:
    far, near = secrets
    sandbox_site = Site(Catalogue())
    listing = sandbox_site.get(LISTING)
    assert listing is not None
    html = listing.decode()
    keys = list(dict.fromkeys(CARD_HREF.findall(html)))
    lures = [
        far.url_for("/secret", host="127.0.0.2"),
        near.url_for("/secret"),
        "/absolute-far",
        "/absolute-near",
        "/scheme-relative-near",
        "/via-allowed-hop",
    ]
    for key, lure in zip(keys, lures, strict=False):
        html = html.replace(f'href="../../../{key}/index.html"', f'href="{lure}"')
    html = html.replace('href="page-2.html"', f'href="{near.url_for("/secret")}"')
    pages = {LISTING: Page(body=html.encode()), **_lures(far, near)}
    for key in keys[len(lures) :]:
        body = sandbox_site.get(f"/catalogue/{key}/index.html")
        assert body is not None
        pages[f"/catalogue/{key}/index.html"] = Page(body=body)
    with StubSite(pages) as site:
        report = crawl(database_url, sandbox_config(site.url_for(LISTING), mode=mode, max_attempts=1))
    assert far.total_hits() == 0 and near.total_hits() == 0, (far.hits, near.hits, report.summary_lines())
    assert book_counts(db)["total"] == len(keys) - len(lures), report.summary_lines()
    assert task_counts(db).get("pending", 0) == 0
