"""Crawls of a listing that links one book in several spellings: RFC 3986 equivalents and tracking tags."""

from __future__ import annotations

import re
from typing import Any

import httpx

from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets_tests.crawl.conftest import sandbox_config
from book_assets_tests.reliability.stub_site import Page, StubSite

TRAVEL = "/catalogue/category/books/travel_2/index.html"


def test_spellings_and_tracking_tags_of_one_book_link_make_one_task_and_one_book(
    db: Database, database_url: str, sandbox: Any
) -> None:
    listing = httpx.get(sandbox.url_for(TRAVEL), timeout=10).text
    hrefs = list(dict.fromkeys(re.findall(r'<h3><a href="([^"]+)"', listing)))
    assert len(hrefs) == 11
    book = hrefs[0]  # ../../../<slug>/index.html
    folder = book.removesuffix("index.html")
    spellings = [
        book,
        f"{book}?utm_source=newsletter&utm_medium=email",
        f"{book}?fbclid=IwAR0xyz",
        f"{folder}%69ndex.html",  # an encoded unreserved "i"
        f"{folder}index%2ehtml",  # an encoded unreserved ".", lower-case hex
    ]
    for old, new in zip(hrefs[1:5], spellings[1:], strict=True):
        listing = listing.replace(f'href="{old}"', f'href="{new}"')
    pages = {TRAVEL: Page(body=listing.encode())}
    for href in [book, *hrefs[5:]]:
        path = "/catalogue/" + href.removeprefix("../../../")
        pages[path] = Page(body=httpx.get(sandbox.url_for(path), timeout=10).content)
    slug_path = "/catalogue/" + folder.removeprefix("../../../")
    for raw in ("%69ndex.html", "index%2ehtml"):  # the stub matches paths as sent
        pages[slug_path + raw] = pages[slug_path + "index.html"]

    with StubSite(pages) as site:
        report = crawl(database_url, sandbox_config(site.url_for(TRAVEL), mode="http"))
        hits = sum(n for path, n in site.hits.items() if path.startswith(slug_path))

    rows = db.query("SELECT url FROM books WHERE url LIKE %s", (f"%{slug_path}%",))
    assert [r["url"] for r in rows] == [site.url_for(slug_path + "index.html")]
    assert hits == 1
    tasks = db.query("SELECT payload->>'url' AS url FROM tasks WHERE payload->>'url' LIKE %s", (f"%{slug_path}%",))
    assert len(tasks) == 1
    assert db.query("SELECT count(*) AS n FROM books")[0]["n"] == 7  # 11 cards, 5 of them one book
    assert report.failed_by_reason == {}


def test_a_non_ascii_book_link_raw_or_percent_encoded_is_one_book_fetched_and_archived_once(
    db: Database, database_url: str, sandbox: Any
) -> None:
    listing = httpx.get(sandbox.url_for(TRAVEL), timeout=10).text
    hrefs = list(dict.fromkeys(re.findall(r'<h3><a href="([^"]+)"', listing)))
    spellings = ["../../../café_1/index.html", "../../../caf%c3%a9_1/index.html", "../../../caf%C3%A9_1/index.html"]
    for old, new in zip(hrefs[:3], spellings, strict=True):
        listing = listing.replace(f'href="{old}"', f'href="{new}"')
    book = httpx.get(sandbox.url_for("/catalogue/" + hrefs[0].removeprefix("../../../")), timeout=10).content
    pages = {TRAVEL: Page(body=listing.encode()), "/catalogue/caf%C3%A9_1/index.html": Page(body=book)}
    for href in hrefs[3:]:
        path = "/catalogue/" + href.removeprefix("../../../")
        pages[path] = Page(body=httpx.get(sandbox.url_for(path), timeout=10).content)

    with StubSite(pages) as site:
        report = crawl(database_url, sandbox_config(site.url_for(TRAVEL), mode="http", warc=True))
        hits = {path: n for path, n in site.hits.items() if "caf" in path}

    assert hits == {"/catalogue/caf%C3%A9_1/index.html": 1}
    rows = db.query("SELECT url FROM books WHERE url LIKE %s", ("%/caf%",))
    assert [r["url"] for r in rows] == [site.url_for("/catalogue/caf%C3%A9_1/index.html")]
    assert db.query("SELECT count(*) AS n FROM books")[0]["n"] == 9  # 11 cards, 3 of them one book
    assert report.failed_by_reason == {}
