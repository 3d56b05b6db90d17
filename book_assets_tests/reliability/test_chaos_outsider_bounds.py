"""Bounds an outsider sets are capped by ours, and what the database or the archive refuses fails one page.

A stub site serves the sandbox's first Mystery page (20 cards), rewritten to carry what a hostile site
would: a Crawl-delay of a day, a link of 3,000 characters, a link with a raw non-ASCII path, a header byte
that is not UTF-8, a listing claiming more results than an ``integer`` holds, a book priced at 10^9.
"""

from __future__ import annotations

import asyncio
import random
import re
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pytest
from warcio.archiveiterator import ArchiveIterator

from book_assets.crawl.config import make_queue
from book_assets.crawl.pipeline import crawl, prepare
from book_assets.crawl.robots import RobotsGate
from book_assets.db.connection import Database
from book_assets.queue import domain_of
from book_assets.sandbox.catalogue import Catalogue
from book_assets.sandbox.pages import Site
from book_assets_tests.crawl.conftest import sandbox_config, stored_vs_truth
from book_assets_tests.reliability.conftest import task_counts
from book_assets_tests.reliability.stub_site import Page, StubSite

pytestmark = pytest.mark.chaos

LISTING = "/catalogue/category/books/mystery_3/index.html"
CARD_HREF = re.compile(r'href="\.\./\.\./\.\./([a-z0-9-]+_\d+)/index\.html"')


def _mystery() -> tuple[Site, str, list[str]]:
    """The sandbox's first Mystery page and its 20 book paths in page order."""
    site = Site(Catalogue())
    page = site.get(LISTING)
    assert page is not None
    html = page.decode()
    keys = list(dict.fromkeys(CARD_HREF.findall(html)))
    assert len(keys) == 20
    return site, html, [f"/catalogue/{key}/index.html" for key in keys]


def _href(path: str) -> str:
    return f'href="../../../{path.split("/")[2]}/index.html"'


def _serve(stub: StubSite, site: Site, listing: str, paths: list[str], **headers: str) -> None:
    stub.pages[LISTING] = Page(body=listing.encode(), headers=dict(headers))
    for path in paths:
        body = site.get(path)
        assert body is not None
        stub.pages[path] = Page(body=body, headers=dict(headers))


def _truth(paths: list[str]) -> dict[str, Any]:
    truth = Catalogue().ground_truth()
    return {p: truth[p] for p in paths}


def _failed(db: Database) -> list[dict[str, Any]]:
    return db.query("SELECT task_type, error_kind, attempts, error FROM tasks WHERE status = 'failed' ORDER BY id")


def test_a_crawl_delay_of_a_day_is_capped_by_crawl_delay_max_s(db: Database, database_url: str) -> None:
    site, html, paths = _mystery()
    with StubSite() as stub:
        stub.pages["/robots.txt"] = Page(
            body=b"User-agent: *\nCrawl-delay: 86400\n", headers={"Content-Type": "text/plain"}
        )
        _serve(stub, site, html, paths[:2])
        config = sandbox_config(stub.url_for(LISTING), crawl_delay_max_s=0.2, max_pages=1)
        prepare(db, config)
        queue = make_queue(db, config)

        async def consult() -> None:
            async def run(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
                return await asyncio.to_thread(fn, *args, **kwargs)

            gate = RobotsGate(config, queue, "test", run)
            try:
                await gate.check(stub.url_for(LISTING), claimed_at=0.0)
            finally:
                await gate.close()

        asyncio.run(consult())
        policy = queue.domain_policy(domain_of(stub.url_for("/")))
        assert policy is not None and policy["min_interval_s"] == 0.2
        # The stored file keeps what the site declared.
        assert db.query("SELECT crawl_delay_s FROM robots_txt") == [{"crawl_delay_s": 86400.0}]

        # The crawl itself ends, and its summary says the site's Crawl-delay was capped.
        config = sandbox_config(stub.url_for(LISTING), crawl_delay_max_s=0.2, max_pages=1, categories=("Mystery",))
        # Two books: the listing's other cards are 404s, failed for good at once.
        report = crawl(database_url, config)
    lines = "\n".join(report.summary_lines())
    assert "Crawl-delay 86400 s capped to 0.2 s (crawl_delay_max_s)" in lines, lines
    assert db.query("SELECT count(*) AS n FROM books")[0]["n"] == 2


def test_a_link_over_max_url_length_fails_alone_and_the_rest_of_its_listing_is_stored(
    db: Database, database_url: str
) -> None:
    site, html, paths = _mystery()
    # Random letters: a repeated one compresses, and a compressed key fits the index where this one cannot.
    letters = random.Random(45).choices(string.ascii_lowercase + string.digits, k=2990)
    long_path = "/catalogue/" + "".join(letters) + "_1/index.html"
    assert len(long_path) > 3000
    html = html.replace(_href(paths[0]), f'href="{long_path}"')
    good = paths[1:]
    with StubSite() as stub:
        _serve(stub, site, html, good)
        config = sandbox_config(stub.url_for(LISTING), max_pages=1, max_attempts=2)
        report = crawl(database_url, config)
        assert stub.hits[long_path] == 0

    assert report.failed_by_reason == {"url_too_long": 1}
    failed = _failed(db)
    assert [(f["task_type"], f["error_kind"]) for f in failed] == [("detail", "url_too_long")]
    assert "max_url_length" in failed[0]["error"] and str(len(stub.url_for(long_path))) in failed[0]["error"]
    assert task_counts(db) == {"completed": 1 + len(good), "failed": 1}
    rows = db.query("SELECT * FROM books ORDER BY id")
    assert stored_vs_truth(rows, _truth(good), stub.url_for("/")) == []
    # Its URL is cut to the cap: no requeue, even of every failure, makes it a request.
    assert make_queue(db, config).requeue() == 0


def test_a_result_count_past_an_integer_fails_its_listing_for_good_as_value_out_of_range(
    db: Database, database_url: str
) -> None:
    site, html, paths = _mystery()
    html, n = re.subn(r"<strong>\d+</strong> results", "<strong>3000000000</strong> results", html)
    assert n == 1
    with StubSite() as stub:
        _serve(stub, site, html, paths)
        config = sandbox_config(stub.url_for(LISTING), max_pages=1, max_attempts=3)
        report = crawl(database_url, config)
        assert stub.hits[LISTING] == 1  # permanent: never fetched again

    failed = _failed(db)
    assert [(f["task_type"], f["error_kind"], f["attempts"]) for f in failed] == [("listing", "value_out_of_range", 1)]
    assert report.failed_by_reason == {"value_out_of_range": 1}
    # Its cards were enqueued before the listing's record was refused: they are fetched and stored.
    assert db.query("SELECT count(*) AS n FROM books")[0]["n"] == len(paths)


@pytest.mark.parametrize(
    ("pattern", "replacement"),
    [
        (r'<p class="price_color">£[\d.]+</p>', '<p class="price_color">£1000000000.00</p>'),
        (r"In stock \(\d+ available\)", "In stock (2147483648 available)"),
    ],
    ids=["price_1e9", "stock_2_31"],
)
def test_a_book_value_past_its_column_fails_for_good_as_bad_value(
    db: Database, database_url: str, pattern: str, replacement: str
) -> None:
    site, html, paths = _mystery()
    with StubSite() as stub:
        _serve(stub, site, html, paths)
        book = site.get(paths[0])
        assert book is not None
        body, n = re.subn(pattern, replacement, book.decode())
        assert n >= 1
        stub.pages[paths[0]] = Page(body=body.encode())
        config = sandbox_config(stub.url_for(LISTING), max_pages=1, max_attempts=3)
        crawl(database_url, config)
        assert stub.hits[paths[0]] == 1

    failed = _failed(db)
    assert [(f["task_type"], f["error_kind"], f["attempts"]) for f in failed] == [("detail", "bad_value", 1)]
    assert db.query("SELECT count(*) AS n FROM books")[0]["n"] == len(paths) - 1


def _archived(folder: Path) -> dict[str, Any]:
    """Response records under ``folder`` by target URI."""
    found: dict[str, Any] = {}
    for path in sorted(folder.rglob("*.warc.gz")):
        with path.open("rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type == "response":
                    found[record.rec_headers.get_header("WARC-Target-URI")] = record.http_headers
    return found


def test_a_raw_non_ascii_link_is_stored_and_archived_percent_encoded(
    db: Database, database_url: str, tmp_path: Path
) -> None:
    site, html, paths = _mystery()
    html = html.replace(_href(paths[0]), 'href="../../../café_1/index.html"')
    encoded = "/catalogue/" + quote("café") + "_1/index.html"
    with StubSite() as stub:
        _serve(stub, site, html, paths[1:])
        body = site.get(paths[0])
        assert body is not None
        stub.pages[encoded] = Page(body=body)
        config = sandbox_config(stub.url_for(LISTING), max_pages=1, max_attempts=2, warc_dir=str(tmp_path))
        report = crawl(database_url, config)

    assert report.failed_by_reason == {}, _failed(db)
    urls = {unquote(r["url"]) for r in db.query("SELECT url FROM books")}
    assert stub.url_for("/catalogue/café_1/index.html") in urls and len(urls) == len(paths)
    assert stub.url_for(encoded) in _archived(tmp_path)


@pytest.mark.parametrize("mode", ["http", pytest.param("browser", marks=pytest.mark.browser)])
def test_a_latin_1_header_byte_is_stored_and_archived_byte_for_byte(
    mode: str, db: Database, database_url: str, tmp_path: Path
) -> None:
    site, html, paths = _mystery()
    with StubSite() as stub:
        # http.server writes header values as Latin-1: the byte 0xE9 goes out raw.
        _serve(stub, site, html, paths[:3], **{"X-Note": "café"})
        config = sandbox_config(
            stub.url_for(LISTING),
            mode=mode,
            max_pages=1,
            max_attempts=2,
            warc_dir=str(tmp_path),
            categories=("Mystery",),
        )
        crawl(database_url, config)

    kinds = {f["error_kind"] for f in _failed(db)}
    assert kinds == {"http_404"}, _failed(db)  # the listing's other cards: the stub does not serve them
    assert db.query("SELECT count(*) AS n FROM books")[0]["n"] == 3
    archived = _archived(tmp_path)
    assert len(archived) == 1 + 3  # the listing and its books (a 404 is not archived)
    note = archived[stub.url_for(LISTING)].get_header("X-Note")
    stored = db.query("SELECT headers->>'x-note' AS note FROM pages WHERE url = %s", (stub.url_for(LISTING),))
    if mode == "browser":  # Chromium reports the header without the byte it cannot decode: nothing to keep
        assert note == "caf" and stored == [{"note": "caf"}]
        return
    assert note == "caf%E9"  # the server's bytes, percent-encoded: unquote_to_bytes gives b"caf\xe9"
    assert stored == [{"note": "caf%E9"}]


@pytest.mark.parametrize("mode", ["http", pytest.param("browser", marks=pytest.mark.browser)])
def test_a_redirect_to_a_url_over_max_url_length_fails_its_page_alone(
    mode: str, db: Database, database_url: str
) -> None:
    """The HTTP fetcher does not follow it; Chromium follows redirects itself, and the page it lands on is refused
    before anything is parsed or stored. Either way the page fails as ``url_too_long`` and the rest are stored."""
    site, html, paths = _mystery()
    letters = random.Random(46).choices(string.ascii_lowercase + string.digits, k=2990)
    long_path = "/catalogue/" + "".join(letters) + "_1/index.html"
    with StubSite() as stub:
        _serve(stub, site, html, paths[:3])
        landing = site.get(paths[0])
        assert landing is not None
        stub.pages[long_path] = Page(body=landing)
        stub.pages[paths[0]] = Page(status=301, headers={"Location": long_path})
        config = sandbox_config(stub.url_for(LISTING), mode=mode, max_pages=1, max_attempts=2, categories=("Mystery",))
        crawl(database_url, config)
        followed = stub.hits[long_path]

    failed = _failed(db)
    too_long = [f for f in failed if f["error_kind"] == "url_too_long"]
    assert len(too_long) == 1 and too_long[0]["attempts"] == 1, failed
    assert "max_url_length (2048)" in too_long[0]["error"]
    assert {f["error_kind"] for f in failed} == {"url_too_long", "http_404"}  # the cards the stub does not serve
    assert followed == (0 if mode == "http" else 1)
    rows = db.query("SELECT * FROM books ORDER BY id")
    assert stored_vs_truth(rows, _truth(paths[1:3]), stub.url_for("/")) == []
