"""The books definition reads the saved live-site pages through the site interface as the books' parsers do,
and the registry knows it by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from book_assets.scraper.charset import decode_html
from book_assets.scraper.errors import NotAListingPage
from book_assets.scraper.parsers import parse_book, parse_listing
from book_assets.settings import ConfigError
from book_assets.sites.books import BOOKS
from book_assets.sites.registry import SITES, site_named
from book_assets.sites.site import Role, default_kind, kind_named

pytestmark = pytest.mark.unit

REAL_SITE = Path(__file__).resolve().parents[1] / "fixtures" / "real-site"
SITE = "https://books.toscrape.com/"


def _html(relative: str) -> str:
    return decode_html((REAL_SITE / relative).read_bytes(), "text/html")


def test_a_listing_page_becomes_links_to_its_books_with_what_its_cards_show() -> None:
    html = _html("index.html")
    books_page = parse_listing(html, SITE)
    listing = BOOKS.parse_listing(html, SITE)
    assert [link.url for link in listing.details] == [card.url for card in books_page.cards]
    first = books_page.cards[0]
    assert listing.details[0].shown == {"title": first.title, "price": str(first.price), "rating": first.rating}
    assert listing.next_url == books_page.next_url == f"{SITE}catalogue/page-2.html"
    assert listing.result_count == 1000 and listing.page_number == 1
    assert listing.category is None and len(listing.category_links) == 50
    assert listing.records == ()


def test_a_book_page_parses_to_the_books_record_and_a_book_page_is_no_listing() -> None:
    relative = "catalogue/a-light-in-the-attic_1000/index.html"
    url = SITE + relative
    html = _html(relative)
    assert BOOKS.parse_detail(html, None, url) == parse_book(html, url)
    with pytest.raises(NotAListingPage):
        BOOKS.parse_listing(html, url)


def test_records_agree_compares_the_books_parse_of_each_form() -> None:
    relative = "catalogue/a-light-in-the-attic_1000/index.html"
    html = _html(relative)
    assert BOOKS.records_agree("detail", html, html, SITE + relative)
    assert not BOOKS.records_agree("detail", "<html></html>", html, SITE + relative)
    assert BOOKS.records_agree("listing", "<html></html>", "<html></html>", SITE)  # neither parses: no evidence


def test_books_has_one_kind_per_role_and_its_categories_accept_a_slug() -> None:
    assert [(k.name, k.role) for k in BOOKS.page_kinds] == [("listing", Role.LISTING), ("detail", Role.DETAIL)]
    assert BOOKS.kind_of(SITE + "catalogue/page-2.html", Role.LISTING) == default_kind(BOOKS, Role.LISTING)
    assert kind_named(BOOKS, "detail").markers == (b"product_page",)
    with pytest.raises(KeyError, match="has no page kind 'author'"):
        kind_named(BOOKS, "author")
    assert BOOKS.categories.known_name("sequential-art") == "Sequential Art"
    assert BOOKS.categories.is_one_of("Sequential Art", ["SEQUENTIAL-ART"])
    assert not BOOKS.categories.is_one_of("Poetry", ["travel"])


def test_the_registry_names_books_and_refuses_an_unknown_site_in_one_line() -> None:
    assert site_named("books") is BOOKS
    assert list(SITES) == ["books", "quotes"]
    message = r"^invalid setting site \(BOOK_PIPELINE_SITE\): no site named 'bokos'; known: books, quotes$"
    with pytest.raises(ConfigError, match=message):
        site_named("bokos")
