"""check_listing: a parsed listing is recorded only when it is the listing its task asked for."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from book_assets.crawl.config import CrawlConfig
from book_assets.crawl.discovery import check_listing, listing_tasks
from book_assets.scraper.errors import NotAListingPage
from book_assets.scraper.models import BookCard, ListingPage
from book_assets.settings import load_settings
from book_assets.sites.books import as_listing
from book_assets.sites.site import Listing

SITE = "http://site.test/"
TRAVEL = SITE + "catalogue/category/books/travel_2/"
CONFIG = CrawlConfig.from_settings(load_settings(base_url=SITE, min_interval_s=0.0))


def listing(
    category: str | None,
    *,
    cards: int = 2,
    page_number: int | None = None,
    page_count: int | None = None,
    next_url: str | None = None,
    links: tuple[tuple[str, str], ...] = (),
    url: str = TRAVEL + "index.html",
) -> Listing:
    return as_listing(
        ListingPage(
            url=url,
            cards=[
                BookCard(
                    url=f"{SITE}catalogue/b_{i}/index.html", title="b", price=Decimal(1), price_text="£1", rating=1
                )
                for i in range(cards)
            ],
            next_url=next_url,
            category=category,
            page_number=page_number,
            page_count=page_count,
            result_count=cards,
            category_links=links,
        )
    )


def check(payload: dict[str, Any], page: Listing) -> None:
    check_listing(payload, page, listing_tasks(payload, page, CONFIG), CONFIG)


def test_a_category_page_showing_its_category_passes_whatever_the_spelling() -> None:
    check({"url": TRAVEL + "index.html", "depth": 1, "category": "Sequential Art"}, listing("sequential  art"))


@pytest.mark.parametrize(
    ("shown", "message"),
    [("Poetry", "a listing of 'Travel' shows category 'Poetry'"), (None, "a listing of 'Travel' shows no category")],
)
def test_a_category_task_whose_page_shows_another_or_no_category_is_not_its_listing(
    shown: str | None, message: str
) -> None:
    with pytest.raises(NotAListingPage, match=message):
        check({"url": TRAVEL + "index.html", "depth": 1, "category": "Travel"}, listing(shown))


def test_the_next_page_task_carries_the_page_number_its_link_promised() -> None:
    first = listing("Travel", page_number=1, page_count=3, next_url=TRAVEL + "page-2.html")
    outcome = listing_tasks({"url": first.url, "depth": 1, "category": "Travel"}, first, CONFIG)
    assert outcome.next is not None and outcome.next.payload["url"] == TRAVEL + "page-2.html"
    nxt = outcome.next.payload
    assert (nxt["depth"], nxt["page"]) == (2, 2)
    check(nxt, listing("Travel", page_number=2, page_count=3, next_url=TRAVEL + "page-3.html"))


@pytest.mark.parametrize(("number", "message"), [(1, "shows page 1"), (None, "shows no page number")])
def test_a_page_that_is_not_where_its_chain_expects_is_not_its_listing(number: int | None, message: str) -> None:
    payload = {"url": TRAVEL + "page-2.html", "depth": 2, "category": "Travel", "page": 2}
    with pytest.raises(NotAListingPage, match=f"page 2 of its chain {message}"):
        check(payload, listing("Travel", page_number=number, page_count=3 if number else None))


def test_a_start_page_that_yields_nothing_to_follow_is_refused() -> None:
    start = {"url": SITE, "depth": 1, "start": True}
    with pytest.raises(
        NotAListingPage, match="a start page with nothing to follow: none of its 0 category links and 0 book cards"
    ):
        check(start, listing(None, cards=0, url=SITE))
    offsite = (("Travel", "http://elsewhere.test/catalogue/category/books/travel_2/index.html"),)
    with pytest.raises(NotAListingPage, match=r"\(1 off-site\)"):
        check(start, listing(None, cards=0, links=offsite, url=SITE))
    check(start, listing(None, cards=0, links=(("Travel", TRAVEL + "index.html"),), url=SITE))
