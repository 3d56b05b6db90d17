"""quotes.toscrape.com's definition (:mod:`book_assets.sites.quotes.definition`) run through the engine's
discovery and checks: its listings carry records (quotes) besides links to detail pages (authors), its start page
links its categories (tags) and is followed itself, a tag page is a category's listing, and ``/js/`` is a page
kind of its own whose served HTML does not parse while its render does, so adaptive mode renders only there.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from book_assets.crawl.config import CrawlConfig, weights_by_category_name
from book_assets.crawl.discovery import check_listing, listing_record, listing_tasks, start_tasks
from book_assets.scraper.errors import NotAListingPage
from book_assets.settings import load_settings
from book_assets.sites.quotes.definition import QUOTES
from book_assets.sites.quotes.models import Author, Quote
from book_assets.sites.registry import site_named
from book_assets.sites.site import Role, kinds_of
from book_assets_tests.sites.quotes.pages import EINSTEIN, SITE, fixture

pytestmark = pytest.mark.unit

CONFIG = CrawlConfig.from_settings(load_settings(site="quotes", base_url=SITE, min_interval_s=0.0))


def test_a_listing_carries_its_quotes_and_links_to_its_authors_pages_as_detail_tasks() -> None:
    page = QUOTES.parse_listing(fixture("index.html"), SITE)
    payload = {"url": SITE, "depth": 1, "start": True}
    outcome = listing_tasks(payload, page, CONFIG)
    check_listing(payload, page, outcome, CONFIG)
    assert len(page.records) == 10 and all(isinstance(quote, Quote) for quote in page.records)
    details = [t for t in outcome.tasks if t.task_type == "author"]
    assert EINSTEIN in [t.payload["url"] for t in details] and {t.group for t in details} == {None}
    assert outcome.next is not None and outcome.next.task_type == "quotes"
    assert outcome.next.payload["url"] == SITE + "page/2/"


def test_the_start_page_links_its_sidebars_tags_as_categories_and_is_followed_itself() -> None:
    page = QUOTES.parse_listing(fixture("index.html"), SITE)
    outcome = listing_tasks({"url": SITE, "depth": 1, "start": True}, page, CONFIG)
    tags = [t for t in outcome.tasks if t.task_type == "quotes"]
    assert outcome.categories == 10 and tags[0].payload == {"url": SITE + "tag/love/", "depth": 1, "category": "love"}
    assert outcome.followed and outcome.cards == 8  # its own authors, beside the tags
    picked = replace(CONFIG, categories=("Humor",))
    only = listing_tasks({"url": SITE, "depth": 1, "start": True}, page, picked)
    assert [t.payload["category"] for t in only.tasks if t.task_type == "quotes"] == ["humor"]


def test_a_crawl_starts_at_the_base_url_and_at_js_which_no_page_links() -> None:
    assert site_named("quotes") is QUOTES
    seeds = start_tasks(CONFIG)
    assert [(t.task_type, t.payload["url"]) for t in seeds] == [("quotes", SITE), ("quotes_js", SITE + "js/")]
    assert all(t.payload["start"] for t in seeds)
    assert "/js/" not in fixture("index.html")


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
    assert outcome.next is not None and outcome.next.task_type == "quotes_js"
    assert kinds_of(QUOTES, Role.LISTING) == ("quotes", "quotes_js")
    assert not QUOTES.records_agree("quotes_js", served, rendered, url)  # adaptive mode renders this kind
    index = fixture("index.html")
    assert QUOTES.records_agree("quotes", index, index, SITE)


def test_an_author_page_is_the_detail_record() -> None:
    author = QUOTES.parse_detail(fixture("author-albert-einstein.html"), None, EINSTEIN)
    assert isinstance(author, Author) and author.name == "Albert Einstein"


def test_a_tags_weight_applies_to_its_group_without_a_warning_for_a_site_that_knows_no_tags_in_advance(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert weights_by_category_name({"love": 3, "humor": 0.5}, QUOTES.categories) == {"love": 3.0, "humor": 0.5}
    assert not [r for r in caplog.records if "matches no known category" in r.getMessage()]
