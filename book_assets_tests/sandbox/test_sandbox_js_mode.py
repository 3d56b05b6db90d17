"""JavaScript mode: the product data is invisible in the raw HTML and appears, unchanged, in a real browser."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from selectolax.lexbor import LexborHTMLParser

from book_assets.sandbox import Site
from book_assets.sandbox.testing import SandboxFactory
from book_assets.scraper.chromium import CHROMIUM_ARGS, find_chromium


def product_fields(html: str) -> dict[str, object]:
    tree = LexborHTMLParser(html)
    main = tree.css_first("div.product_main")
    assert main is not None
    h1, price = main.css_first("h1"), main.css_first("p.price_color")
    description = tree.css_first("#product_description + p")
    rows = tree.css("table.table-striped tr")
    return {
        "title": h1.text(strip=True) if h1 else None,
        "price": price.text(strip=True) if price else None,
        "rows": [tuple(cell.text(strip=True) for cell in row.css("th, td")) for row in rows],
        "description": description.text(strip=True) if description else None,
    }


def test_raw_js_mode_page_has_empty_placeholders_and_no_product_text(sandbox_factory: SandboxFactory) -> None:
    server = sandbox_factory(js_mode=True)
    book = next(b for b in server.catalogue if b.description)
    raw = httpx.get(server.url_for(book.url_path)).text
    fields = product_fields(raw)
    assert fields == {"title": None, "price": None, "rows": [], "description": None}
    assert f"£{book.price}" not in raw
    assert book.upc not in raw
    assert book.description is not None and book.description[:30] not in raw


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=find_chromium(), args=list(CHROMIUM_ARGS))
        yield instance
        instance.close()


@pytest.mark.browser
def test_browser_sees_the_same_product_markup_as_normal_mode(browser: object, sandbox_factory: SandboxFactory) -> None:
    server = sandbox_factory(js_mode=True)
    normal = Site(server.catalogue)
    with_description = next(b for b in server.catalogue if b.description)
    without_description = next(b for b in server.catalogue if b.description is None)
    page = browser.new_page()  # type: ignore[attr-defined]
    # The live markup loads jQuery from a CDN; nothing outside the sandbox is reachable here, so fail fast.
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(server.url) else route.abort())
    try:
        for book in (with_description, without_description):
            page.goto(server.url_for(book.url_path), wait_until="domcontentloaded")
            rendered = product_fields(page.content())
            expected = product_fields(normal.get(book.url_path).decode())  # type: ignore[union-attr]
            assert rendered == expected
            assert rendered["title"] == book.title
            assert rendered["price"] == f"£{book.price}"
            assert rendered["description"] == book.description
    finally:
        page.close()
