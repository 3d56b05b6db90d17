"""quotes.toscrape.com fits the site interface: a sketch of its definition over its own parsers, run through the
engine's discovery and checks.

The sketch parses and declares kinds only (its store hooks store nothing): what is held here is that quotes'
listings carry records besides links to detail pages, that a tag page is a category's listing, and that ``/js/``
is a page kind of its own whose served HTML does not parse while its render does, so adaptive mode renders only
there. The crawl does not reach quotes: no registry entry names it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import pytest

from book_assets.crawl.config import CrawlConfig
from book_assets.crawl.discovery import check_listing, listing_record, listing_tasks
from book_assets.db.connection import Cursor, Database
from book_assets.scraper.errors import NotAListingPage
from book_assets.scraper.fetching import FetchResult, Validators
from book_assets.settings import load_settings
from book_assets.sites.quotes.models import Author
from book_assets.sites.quotes.parsers import parse_author, parse_quotes_page
from book_assets.sites.site import (
    Categories,
    DetailLink,
    Listing,
    PageKind,
    Role,
    Site,
    Stored,
    kinds_of,
    records_agree,
)
from book_assets_tests.sites.quotes.pages import EINSTEIN, SITE, fixture

pytestmark = pytest.mark.unit

LISTING = PageKind("listing", Role.LISTING, (b'class="quote"',))
JS_LISTING = PageKind("js_listing", Role.LISTING, (b'class="quote"',))
AUTHOR = PageKind("detail", Role.DETAIL, (b"author-details",))
TAGS = Categories((), str.lower)


@dataclass(frozen=True)
class QuotesSketch:
    name: str = "quotes"
    default_base_url: str = SITE
    page_kinds: tuple[PageKind, ...] = (LISTING, JS_LISTING, AUTHOR)
    record: str = "author"

    @property
    def categories(self) -> Categories:
        return TAGS

    def kind_of(self, url: str, role: Role) -> str:
        if role is Role.DETAIL:
            return AUTHOR.name
        return JS_LISTING.name if urlsplit(url).path.startswith("/js/") else LISTING.name

    def parse_listing(self, html: str, url: str) -> Listing:
        page = parse_quotes_page(html, url)
        details = tuple(DetailLink(link) for link in page.author_links)
        return Listing(url, details, page.next_url, category=page.tag, records=page.quotes)

    def parse_detail(self, html: str, rendered_html: str | None, url: str) -> Author:
        return parse_author(html, url)

    def records_agree(self, kind: str, plain_html: str, rendered_html: str | None, url: str) -> bool:
        parse = parse_author if kind == AUTHOR.name else parse_quotes_page
        return records_agree(parse, plain_html, rendered_html, url)

    def write_detail(self, cur: Cursor, record: Any, fetched: FetchResult, *, requested_url: str) -> Stored:
        return Stored(0, "new")

    def revalidate_detail(self, cur: Cursor, url: str, validators: Validators, response: FetchResult) -> Stored:
        return Stored(0, "unchanged")

    def write_listing(self, cur: Cursor, listing: Listing, fetched: FetchResult) -> None:
        return None

    def record_counts(self, db: Database) -> dict[str, int]:
        return {"total": 0, "unique_urls": 0, "with_html": 0, "versions": 0}

    def versions_since(self, db: Database, since: datetime) -> tuple[int, int]:
        return 0, 0


QUOTES: Site = QuotesSketch()
CONFIG = replace(CrawlConfig.from_settings(load_settings(base_url=SITE, min_interval_s=0.0)), site=QUOTES)


def test_a_listing_carries_its_quotes_and_links_to_its_authors_pages_as_detail_tasks() -> None:
    page = QUOTES.parse_listing(fixture("index.html"), SITE)
    payload = {"url": SITE, "depth": 1, "start": True}
    outcome = listing_tasks(payload, page, CONFIG)
    check_listing(payload, page, outcome, CONFIG)
    assert len(page.records) == 10
    assert EINSTEIN in [t.payload["url"] for t in outcome.tasks]
    assert {t.task_type for t in outcome.tasks} == {"detail"}
    assert outcome.next is not None and outcome.next.task_type == "listing"
    assert outcome.next.payload["url"] == SITE + "page/2/"


def test_a_tag_page_is_the_listing_of_its_category_and_groups_its_authors_by_it() -> None:
    url = SITE + "tag/love/"
    page = QUOTES.parse_listing(fixture("tag-love.html"), url)
    payload = {"url": url, "depth": 1, "category": "love"}
    outcome = listing_tasks(payload, page, CONFIG)
    check_listing(payload, page, outcome, CONFIG)
    assert page.category == "love" and {t.group for t in outcome.tasks} == {"love"}
    record = listing_record(payload, page, outcome, drop_query_params=())
    assert record is not None and record["category"] == "love" and record["result_count"] is None
    with pytest.raises(NotAListingPage, match="a listing of 'humor' shows category 'love'"):
        check_listing({**payload, "category": "humor"}, page, outcome, CONFIG)


def test_js_pages_are_a_listing_kind_of_their_own_that_parses_only_once_rendered() -> None:
    url = SITE + "js/"
    served, rendered = fixture("js.html"), fixture("js-rendered.html")
    with pytest.raises(NotAListingPage):
        QUOTES.parse_listing(served, url)
    page = QUOTES.parse_listing(rendered, url)
    outcome = listing_tasks({"url": url, "depth": 1, "start": True}, page, CONFIG)
    assert outcome.next is not None and outcome.next.task_type == "js_listing"
    assert kinds_of(QUOTES, Role.LISTING) == ("listing", "js_listing")
    assert not QUOTES.records_agree("js_listing", served, rendered, url)  # adaptive mode renders this kind
    index = fixture("index.html")
    assert QUOTES.records_agree("listing", index, index, SITE)


def test_an_author_page_is_the_detail_record() -> None:
    author = QUOTES.parse_detail(fixture("author-albert-einstein.html"), None, EINSTEIN)
    assert isinstance(author, Author) and author.name == "Albert Einstein"
