"""Listing pages that point elsewhere: off-domain cards, next links and subresources are never enqueued or
fetched (in both fetch modes), and a malformed link costs only itself, never the rest of its page.

The listing is a real sandbox category page (Mystery, 20 cards and a next link) served from a stub site on
``127.0.0.1``, rewritten so half its cards and its next link point at a second stub site addressed as
``localhost``, a host the crawl is not allowed to contact; that site counts every request it receives.
"""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import pytest

from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets.sandbox.catalogue import Catalogue
from book_assets.sandbox.pages import Site
from book_assets_tests.crawl.conftest import sandbox_config, stored_vs_truth
from book_assets_tests.reliability.conftest import task_counts
from book_assets_tests.reliability.stub_site import Page, StubSite

pytestmark = pytest.mark.chaos

LISTING = "/catalogue/category/books/mystery_3/index.html"
CARD_HREF = re.compile(r'href="\.\./\.\./\.\./([a-z0-9-]+_\d+)/index\.html"')


def _mystery_listing() -> tuple[Site, str, list[str]]:
    """The sandbox's first Mystery page and its 20 book paths in page order."""
    site = Site(Catalogue())
    page = site.get(LISTING)
    assert page is not None
    html = page.decode()
    keys = list(dict.fromkeys(CARD_HREF.findall(html)))
    assert len(keys) == 20 and '<li class="next"><a href="page-2.html">' in html
    return site, html, [f"/catalogue/{key}/index.html" for key in keys]


def _serve(stub: StubSite, sandbox_site: Site, listing: str, book_paths: list[str]) -> None:
    stub.pages[LISTING] = Page(body=listing.encode())
    for path in book_paths:
        body = sandbox_site.get(path)
        assert body is not None
        stub.pages[path] = Page(body=body)


def _truth(paths: list[str]) -> dict[str, Any]:
    truth = Catalogue().ground_truth()
    return {p: truth[p] for p in paths}


@pytest.mark.parametrize("mode", ["http", pytest.param("browser", marks=pytest.mark.browser)])
def test_off_domain_cards_next_links_and_subresources_are_never_enqueued_or_fetched(
    mode: str, db: Database, database_url: str
) -> None:
    sandbox_site, html, paths = _mystery_listing()
    home, away = paths[0::2], paths[1::2]
    with StubSite() as elsewhere, StubSite() as stub:
        assert httpx.get(elsewhere.url_for("/probe", host="localhost"), timeout=10).status_code == 404
        elsewhere.hits.clear()
        there = elsewhere.url_for("", host="localhost")
        for path in away:
            html = html.replace(f'href="../../../{path.split("/")[2]}/index.html"', f'href="{there}{path}"')
        html = html.replace('href="page-2.html"', f'href="{there}/catalogue/category/books/mystery_3/page-2.html"')
        # For the browser: subresources, a frame and a script's requests, all to the other host.
        lure = (
            f'<script src="{there}/evil.js"></script><img src="{there}/pixel.png">'
            f'<iframe src="{there}/frame.html"></iframe><link rel="prefetch" href="{there}/prefetch.html">'
            f'<script>fetch("{there}/xhr").catch(() => {{}}); new Image().src = "{there}/beacon";</script>'
        )
        html = html.replace("</head>", lure + "</head>", 1)
        assert html.count(there) == 2 * len(away) + 1 + 6
        _serve(stub, sandbox_site, html, home)

        config = sandbox_config(stub.url_for(LISTING), mode=mode, concurrency=4, max_attempts=2)
        started = time.monotonic()
        report = crawl(database_url, config)
        elapsed = time.monotonic() - started
        time.sleep(0.5)  # a late request (a beacon) would arrive by now
        assert elsewhere.total_hits() == 0, dict(elsewhere.hits)

    queued = [r["url"] for r in db.query("SELECT payload->>'url' AS url FROM tasks")]
    assert not [u for u in queued if "localhost" in u], queued
    assert sorted(queued) == sorted([stub.url_for(LISTING), *(stub.url_for(p) for p in home)])
    assert task_counts(db) == {"completed": 1 + len(home)}
    rows = db.query("SELECT * FROM books ORDER BY id")
    assert stored_vs_truth(rows, _truth(home), stub.url_for("/")) == []
    assert report.failed_by_reason == {}
    print(f"\n{mode}: {len(home)} on-domain books stored, {len(away)} cards + next + 6 lures skipped; {elapsed:.1f}s")


@pytest.mark.parametrize(
    "bad_href",
    ["http://[::1", "http://127.0.0.1:99999/x/index.html", "javascript:alert(1)", "mailto:a@b.c", "//[zz/index.html"],
)
def test_a_malformed_card_link_costs_only_itself_not_the_listing(
    bad_href: str, db: Database, database_url: str
) -> None:
    sandbox_site, html, paths = _mystery_listing()
    bad, good = paths[0], paths[1:]
    html = html.replace(f'href="../../../{bad.split("/")[2]}/index.html"', f'href="{bad_href}"')
    with StubSite() as stub:
        _serve(stub, sandbox_site, html, good)
        config = sandbox_config(stub.url_for(LISTING), mode="http", concurrency=4, max_attempts=2, max_pages=1)
        report = crawl(database_url, config)

    assert report.failed_by_reason == {}, db.query("SELECT payload, error FROM tasks WHERE status = 'failed'")
    assert task_counts(db) == {"completed": 1 + len(good)}
    rows = db.query("SELECT * FROM books ORDER BY id")
    assert stored_vs_truth(rows, _truth(good), stub.url_for("/")) == []


@pytest.mark.browser
def test_a_refresh_to_another_host_is_blocked_and_fails_the_page_in_browser_mode(
    db: Database, database_url: str
) -> None:
    """A client-side redirect is a redirect: the browser never reaches the other host and the page fails as
    ``offsite_redirect`` (permanent), as a server-side one would. HTTP mode does not follow refreshes."""
    sandbox_site, html, paths = _mystery_listing()
    with StubSite() as elsewhere, StubSite() as stub:
        refresh = f'<meta http-equiv="refresh" content="0; url={elsewhere.url_for("/refresh.html", host="localhost")}">'
        _serve(stub, sandbox_site, html.replace("</head>", refresh + "</head>", 1), paths)
        config = sandbox_config(stub.url_for(LISTING), mode="browser", concurrency=2, max_attempts=2, max_pages=1)
        report = crawl(database_url, config)
        time.sleep(0.5)
        assert elsewhere.total_hits() == 0, dict(elsewhere.hits)
    assert report.failed_by_reason == {"offsite_redirect": 1}
    assert db.query("SELECT attempts FROM tasks WHERE status = 'failed'") == [{"attempts": 1}]
    assert db.query("SELECT count(*) AS n FROM books")[0]["n"] == 0
