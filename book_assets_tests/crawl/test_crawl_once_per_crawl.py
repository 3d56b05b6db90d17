"""A crawl always ends and fetches each URL once, however a site's listings link back or run on.

The site is a stub of our own (:class:`~book_assets_tests.reliability.stub_site.StubSite`) serving the
sandbox's Mystery category (two pages, 32 books) rewritten into a trap: pages that run on forever with the
same books, or a last page that links back to the first. The stub stops the trap after a number of requests
no fixed crawl would make, so a crawl that falls into it still ends and the test can say by how much it
overran; every verdict is a count of requests or tasks, never a time.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets.sandbox.catalogue import Catalogue
from book_assets.sandbox.pages import Site
from book_assets.scraper.errors import ErrorKind
from book_assets.settings import Settings
from book_assets_tests.crawl.conftest import sandbox_config
from book_assets_tests.reliability.stub_site import Page, StubSite

CATEGORY = "/catalogue/category/books/mystery_3/"
CARD_HREF = re.compile(r'href="\.\./\.\./\.\./([a-z0-9-]+_\d+)/index\.html"')
PAGER_END = "</ul>\n        </div>"
#: Requests after which the stub's traps let go (a crawl that reaches them has overrun by far).
SAFETY_PAGES = 20
TRAP_PAGES = int(Settings.model_fields["listing_trap_pages"].default)
MODES = ["http", pytest.param("browser", marks=pytest.mark.browser)]


def _mystery(site: Site, page: str) -> tuple[str, list[str]]:
    """A sandbox Mystery listing page and its books' paths."""
    body = site.get(CATEGORY + page)
    assert body is not None
    html = body.decode()
    return html, [f"/catalogue/{key}/index.html" for key in dict.fromkeys(CARD_HREF.findall(html))]


def _serve_books(stub: StubSite, site: Site, paths: list[str]) -> None:
    for path in paths:
        body = site.get(path)
        assert body is not None
        stub.pages[path] = Page(body=body)


class RunningOn(dict[str, Page]):
    """Listing pages ``page-N.html`` for every N up to :data:`SAFETY_PAGES`, each the first page's books with a
    next link to page N+1 and a pager that says "Page N of N+1": a pagination that never ends and keeps its own
    numbers consistent (the last one ends it, for a crawl that never would)."""

    def __init__(self, first: str, books: dict[str, Page]) -> None:
        super().__init__(books)
        self.first = first

    def get(self, path: str, default: Page | None = None) -> Page | None:  # type: ignore[override]
        match = re.fullmatch(re.escape(CATEGORY) + r"page-(\d+)\.html", path)
        if match is None:
            return super().get(path, default)
        n = int(match.group(1))
        html = self.first.replace('href="page-2.html"', f'href="page-{n + 1}.html"')
        html = html.replace("Page 1 of 2", f"Page {n} of {n if n >= SAFETY_PAGES else n + 1}")
        if n >= SAFETY_PAGES:
            html = html.replace(f'<li class="next"><a href="page-{n + 1}.html">next</a></li>', "")
        return Page(body=html.encode())


@pytest.mark.parametrize("mode", MODES)
def test_a_category_whose_pages_repeat_its_books_forever_ends_each_book_fetched_once_and_the_trap_recorded(
    mode: str, db: Database, database_url: str
) -> None:
    site = Site(Catalogue())
    first, books = _mystery(site, "page-1.html")
    assert 'href="page-2.html"' in first and len(books) == 20
    with StubSite() as stub:
        _serve_books(stub, site, books)
        stub.pages = RunningOn(first, dict(stub.pages))
        config = sandbox_config(stub.url_for(CATEGORY + "page-1.html"), mode=mode, concurrency=4, max_attempts=2)
        report = crawl(database_url, config)
        hits = dict(stub.hits)

    listings = {path: n for path, n in hits.items() if path.startswith(CATEGORY)}
    # Page 1 brings the 20 books; the pages after it bring none, and the chain stops after TRAP_PAGES of them.
    assert len(listings) == 1 + TRAP_PAGES and set(listings.values()) == {1}, listings
    assert {path: hits.get(path, 0) for path in books} == dict.fromkeys(books, 1)
    assert report.failed_by_reason == {ErrorKind.LISTING_TRAP: 1}
    failed = db.query("SELECT payload->>'url' AS url, error FROM tasks WHERE status = 'failed'")
    assert [r["url"] for r in failed] == [stub.url_for(f"{CATEGORY}page-{1 + TRAP_PAGES}.html")]
    assert "no new books" in failed[0]["error"]
    assert db.query("SELECT count(*) AS n FROM books")[0]["n"] == len(books)


@pytest.mark.parametrize("mode", MODES)
def test_a_last_page_linking_back_to_the_first_fetches_no_page_or_book_twice(
    mode: str, db: Database, database_url: str
) -> None:
    site = Site(Catalogue())
    first, books = _mystery(site, "index.html")
    last, more = _mystery(site, "page-2.html")
    assert PAGER_END in last and 'class="next"' not in last
    back = last.replace(PAGER_END, '<li class="next"><a href="index.html">next</a></li>' + PAGER_END, 1)

    class LinkingBack(dict[str, Page]):
        """The last page links back to the first, until it was requested :data:`SAFETY_PAGES` times."""

        def get(self, path: str, default: Page | None = None) -> Page | None:  # type: ignore[override]
            if path == CATEGORY + "page-2.html":
                return Page(body=(back if stub.hits[path] < SAFETY_PAGES else last).encode())
            return super().get(path, default)

    with StubSite() as stub:
        _serve_books(stub, site, books + more)
        stub.pages = LinkingBack(stub.pages, **{CATEGORY + "index.html": Page(body=first.encode())})
        report = crawl(database_url, sandbox_config(stub.url_for(CATEGORY + "index.html"), mode=mode, concurrency=4))
        hits = Counter(stub.hits)

    assert {path: hits[path] for path in (CATEGORY + "index.html", CATEGORY + "page-2.html")} == {
        CATEGORY + "index.html": 1,
        CATEGORY + "page-2.html": 1,
    }
    assert {path: hits[path] for path in books + more} == dict.fromkeys(books + more, 1)
    assert report.failed_by_reason == {}
    assert db.query("SELECT count(*) AS n FROM tasks")[0]["n"] == 2 + len(books) + len(more)


def test_the_summary_counts_this_runs_failures_not_every_failed_task_in_the_queue(
    db: Database, database_url: str
) -> None:
    site = Site(Catalogue())
    first, books = _mystery(site, "page-1.html")
    only = first.replace('<li class="next"><a href="page-2.html">next</a></li>', "")
    only = only.replace("Page 1 of 2", "Page 1 of 1")
    assert only.count("Page 1 of 1") == 1
    with StubSite({CATEGORY + "page-1.html": Page(body=only.encode())}) as stub:
        _serve_books(stub, site, books)
        broken = stub.pages.pop(books[0])
        config = sandbox_config(stub.url_for(CATEGORY + "page-1.html"), max_attempts=1)
        yesterday = crawl(database_url, config)
        assert yesterday.failed_by_reason == {ErrorKind.HTTP_404: 1} and yesterday.run.failed == 1
        stub.pages[books[0]] = broken  # the site fixed its page: today's crawl fails nothing
        today = crawl(database_url, config)

    assert db.query("SELECT count(*) AS n FROM tasks WHERE status = 'failed'")[0]["n"] == 1  # yesterday's, kept
    assert today.run.failed == 0 and today.failed_by_reason == {}
    assert [line for line in today.summary_lines() if line.startswith("retries:")] == [
        f"retries: {today.run.retries}; failed tasks: 0"
    ]


def test_a_chain_cut_at_max_pages_is_counted_in_the_summary(db: Database, database_url: str) -> None:
    site = Site(Catalogue())
    first, books = _mystery(site, "page-1.html")
    depth = TRAP_PAGES - 2  # the bound cuts the chain before the trap would stop it
    with StubSite() as stub:
        _serve_books(stub, site, books)
        stub.pages = RunningOn(first, dict(stub.pages))
        config = sandbox_config(stub.url_for(CATEGORY + "page-1.html"), max_pages=depth)
        report = crawl(database_url, config)
        listings = sorted(path for path in stub.hits if path.startswith(CATEGORY))

    assert listings == sorted(f"{CATEGORY}page-{n}.html" for n in range(1, depth + 1))
    assert report.chains_cut == 1 and report.failed_by_reason == {}
    assert f"listing chains cut at max_pages ({depth}): 1" in report.summary_lines()
