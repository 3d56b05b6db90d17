"""Two catalogues on one queue and one database: a crawl of quotes' stand-in between crawls of the books' sandbox
leaves the books, their versions and their removals as they were, and the books' crawl after it leaves the quotes
and authors as they were and decides its removals as if no other crawl had run.

Each crawl keeps its own queue epoch (its scope is its site), its own task types and its own tables; each host
its own politeness (domains are per host).
"""

from __future__ import annotations

from typing import Any

import pytest

from book_assets.crawl.pipeline import begin, crawl, finish, work
from book_assets.db.connection import Database
from book_assets.sandbox.quotes import truth
from book_assets.sandbox.quotes.server import QuotesServer
from book_assets_tests.crawl.conftest import sandbox_config
from book_assets_tests.sites.quotes.crawling import quotes_config, stored_authors, stored_quotes

#: Two categories whose books day 1 removes two of: crawled alone, the test stays fast.
BOTH = ("Add a comment", "Nonfiction")

pytestmark = pytest.mark.slow


def _rows(db: Database, *tables: str) -> dict[str, list[dict[str, Any]]]:
    return {table: db.query(f"SELECT * FROM {table} ORDER BY 1, 2") for table in tables}


def test_a_quotes_crawl_between_books_crawls_leaves_the_books_and_their_removals_and_the_books_crawl_the_quotes(
    db: Database, database_url: str, sandbox_factory: Any, quotes_site: QuotesServer
) -> None:
    site = sandbox_factory(day=0)
    books = sandbox_config(site.url, categories=BOTH)
    crawl(database_url, books)
    site.set_day(1)
    removing = crawl(database_url, books)
    assert removing.removals is not None and removing.removals.decided and removing.removals.removed == 2
    before = _rows(db, "books", "book_versions", "book_presence", "crawl_fields")

    quoted = crawl(database_url, quotes_config(quotes_site))
    assert _rows(db, "books", "book_versions", "book_presence", "crawl_fields") == before
    assert truth.quote_differences(stored_quotes(db)) == [] and truth.author_differences(stored_authors(db)) == []
    assert quoted.removals is not None and not quoted.removals.decided and quoted.fields is None
    quotes_before = _rows(db, "quotes", "authors")

    again = crawl(database_url, books)
    assert _rows(db, "quotes", "authors") == quotes_before
    # Its epoch is its own: every page of its categories fetched again (none deduplicated against the quotes
    # crawl's epoch, none kept out as seen in its last), and the same removals decided from them.
    assert again.removals is not None and again.removals.decided
    assert (again.removals.removed, again.removals.returned) == (0, 0)
    assert again.run.pages == removing.run.pages and again.failed_by_reason == {}
    removed = db.query("SELECT count(*) AS n FROM books WHERE removed_at IS NOT NULL")[0]["n"]
    assert removed == 2
    outcomes = [row["outcome"] for row in db.query("SELECT outcome FROM crawls ORDER BY id")]
    assert outcomes == ["decided", "decided", "undecided", "decided"]
    scopes = [row["scope"] for row in db.query("SELECT scope FROM queue_epochs ORDER BY id")]
    assert scopes == ["books", "books", "quotes", "books"]
    domains = {row["domain"] for row in db.query("SELECT domain FROM domains")}
    assert {site.url.removeprefix("http://"), quotes_site.url.removeprefix("http://")} <= domains


def test_a_books_crawl_and_a_quotes_crawl_begun_together_each_settle_their_own_and_count_their_own_pages(
    db: Database, database_url: str, sandbox_factory: Any, quotes_site: QuotesServer
) -> None:
    site = sandbox_factory(day=0)
    books_config = sandbox_config(site.url, categories=BOTH)
    books_run = begin(database_url, books_config)
    quotes_run = begin(database_url, quotes_config(quotes_site))  # before the books crawl has done anything
    # A books worker claims only books' kinds: the quotes crawl's start pages wait for its own workers.
    books_report = finish(database_url, *work(database_url, books_run))
    assert (
        db.query("SELECT count(*) AS n FROM tasks WHERE task_type LIKE 'quotes%%' AND status = 'pending'")[0]["n"] == 2
    )
    quotes_report = finish(database_url, *work(database_url, quotes_run))

    assert books_report.removals is not None and books_report.removals.decided, books_report.removals
    assert quotes_report.removals is not None and not quotes_report.removals.decided
    outcomes = {row["site"]: row["outcome"] for row in db.query("SELECT site, outcome FROM crawls")}
    assert outcomes == {"books": "decided", "quotes": "undecided"}
    # Each run's figures are its own site's pages, though the books' pages were done after the quotes run began.
    assert quotes_report.run.pages == 75 and quotes_report.failed_by_reason == {"not_a_listing_page": 1}
    assert books_report.run.pages == books_report.run.listing_pages + books_report.run.detail_pages
    assert truth.quote_differences(stored_quotes(db)) == [] and truth.author_differences(stored_authors(db)) == []
