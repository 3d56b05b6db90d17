"""Following a listing chain (pure functions): the depth bound, and the trap of pages that bring no new book."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from book_assets.crawl.discovery import ListingTrap, follow_chain, listing_tasks
from book_assets.scraper.models import ListingPage
from book_assets.sites.books import as_listing
from book_assets.sites.site import Listing
from book_assets_tests.crawl.conftest import sandbox_config

BASE = "http://127.0.0.1:9/catalogue/category/books/travel_2/"


def _page(n: int, *, last: bool = False) -> Listing:
    nxt = None if last else f"{BASE}page-{n + 1}.html"
    page = ListingPage(f"{BASE}page-{n}.html", [], nxt, "Travel", page_number=None, page_count=None, result_count=None)
    return as_listing(page)


def _payload(n: int, **extra: Any) -> dict[str, Any]:
    return {"url": f"{BASE}page-{n}.html", "depth": n, "category": "Travel", **extra}


def test_the_next_page_is_not_followed_at_max_pages() -> None:
    config = sandbox_config("http://127.0.0.1:9/", max_pages=3)
    assert listing_tasks(_payload(2), _page(2), config).next is not None
    assert listing_tasks(_payload(3), _page(3), config).next is None


def test_a_page_with_new_books_resets_the_count_and_one_without_adds_one() -> None:
    config = sandbox_config("http://127.0.0.1:9/", listing_trap_pages=3)
    outcome = listing_tasks(_payload(2, stale=2), _page(2), config)
    fresh, stale = follow_chain(_payload(2, stale=2), outcome, 4, config), follow_chain(_payload(2), outcome, 0, config)
    assert not isinstance(fresh, ListingTrap) and fresh is not None and fresh.payload["stale"] == 0
    assert not isinstance(stale, ListingTrap) and stale is not None and stale.payload["stale"] == 1
    assert stale.payload["url"] == f"{BASE}page-3.html" and stale.payload["depth"] == 3


def test_listing_trap_pages_in_a_row_without_a_new_book_stop_the_chain_unless_it_ends_there() -> None:
    config = sandbox_config("http://127.0.0.1:9/", listing_trap_pages=3)
    payload = _payload(4, stale=2)
    trap = follow_chain(payload, listing_tasks(payload, _page(4), config), 0, config)
    assert isinstance(trap, ListingTrap) and trap.reason.startswith("3 listing pages in a row brought no new books")
    assert follow_chain(payload, listing_tasks(payload, _page(4, last=True), config), 0, config) is None


def test_pages_that_carry_other_records_are_followed_and_one_served_again_under_a_new_number_is_a_trap() -> None:
    config = sandbox_config("http://127.0.0.1:9/", listing_trap_pages=2)
    carrying = [replace(_page(n), category=None, records=(f"quote {n}",)) for n in (2, 3)]
    first = follow_chain(_payload(2), listing_tasks(_payload(2), carrying[0], config), 0, config)
    assert not isinstance(first, ListingTrap) and first is not None and first.payload["stale"] == 0
    second = follow_chain(first.payload, listing_tasks(first.payload, carrying[1], config), 0, config)
    assert not isinstance(second, ListingTrap) and second is not None and second.payload["stale"] == 0
    again = replace(carrying[1], url=f"{BASE}page-4.html")  # page 3's records under the number 4
    repeated = follow_chain(second.payload, listing_tasks(second.payload, again, config), 0, config)
    assert not isinstance(repeated, ListingTrap) and repeated is not None and repeated.payload["stale"] == 1
    trap = follow_chain(repeated.payload, listing_tasks(repeated.payload, again, config), 0, config)
    assert isinstance(trap, ListingTrap)
