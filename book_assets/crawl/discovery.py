"""The shallow pass as pure functions: from a parsed listing page to the tasks it creates.

Discovery is category-first so that every detail task knows its category (its fairness group) before
the book page is fetched: a start page that is not a category page (the root, ``catalogue/page-N.html``,
the all-books category) contributes its sidebar's categories — filtered by ``--categories`` — and each
category chain is followed through ``li.next`` with no hard-coded page count, up to ``max_pages`` pages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from book_assets.categories import is_one_of, slugify
from book_assets.crawl.config import DETAIL, DETAIL_PRIORITY, LISTING, LISTING_PRIORITY, CrawlConfig
from book_assets.queue import NewTask
from book_assets.scraper.errors import NotAListingPage
from book_assets.scraper.fetching import host_allowed
from book_assets.scraper.models import ListingPage
from book_assets.urls import canonical_url


@dataclass
class ListingOutcome:
    tasks: list[NewTask] = field(default_factory=list)
    cards: int = 0
    categories: int = 0
    offsite_skipped: int = 0
    #: The category whose cards the page listed, and whether they were followed (False: a start page that
    #: only links categories, or a category left out by ``--categories``).
    category: str | None = None
    followed: bool = False


def start_task(config: CrawlConfig) -> NewTask:
    """The listing task a crawl is seeded with."""
    return NewTask(LISTING, {"url": config.base_url, "depth": 1, "start": True}, LISTING_PRIORITY)


def listing_tasks(payload: dict[str, Any], page: ListingPage, config: CrawlConfig) -> ListingOutcome:
    """Tasks created by one fetched listing page."""
    outcome = ListingOutcome()
    depth = int(payload.get("depth", 1))
    category = page.category or payload.get("category")

    if category is None and payload.get("start"):
        for name, url in page.category_links:
            if not host_allowed(url, config.allowed_domains):
                outcome.offsite_skipped += 1
                continue
            if is_one_of(name, config.categories):
                outcome.categories += 1
                outcome.tasks.append(NewTask(LISTING, {"url": url, "depth": 1, "category": name}, LISTING_PRIORITY))
        if outcome.categories or config.categories:
            return outcome  # the books arrive through their categories

    if category is not None and not is_one_of(category, config.categories):
        return outcome
    outcome.category, outcome.followed = category, True
    for card in page.cards:
        if not host_allowed(card.url, config.allowed_domains):
            outcome.offsite_skipped += 1
            continue
        outcome.cards += 1
        listing = {"title": card.title, "price": str(card.price), "rating": card.rating}
        outcome.tasks.append(
            NewTask(DETAIL, {"url": card.url, "category": category, "listing": listing}, DETAIL_PRIORITY, category)
        )
    if page.next_url and (config.max_pages is None or depth < config.max_pages):
        if host_allowed(page.next_url, config.allowed_domains):
            nxt = {"url": page.next_url, "depth": depth + 1, "category": category}
            if page.page_number is not None:  # the page its "next" link promises, for check_listing
                nxt["page"] = page.page_number + 1
            outcome.tasks.append(NewTask(LISTING, nxt, LISTING_PRIORITY))
        else:
            outcome.offsite_skipped += 1
    return outcome


def check_listing(payload: dict[str, Any], page: ListingPage, outcome: ListingOutcome) -> None:
    """Refuse a listing page that is not the one its task asked for, or a start page that yields nothing.

    A parsed page is a listing (:func:`~book_assets.scraper.parsers.parse_listing`); this checks that it is
    *this* listing: a category's page shows that category (its heading under Home > Books), a page reached by
    a "next" link shows the number that link promised, and a start page yields a category or a book to
    follow. Only a page that passes is recorded, so a category's removals are decided only from pages that
    were what their task expected (:mod:`book_assets.store.removals`).

    Raises:
        NotAListingPage: the page disagrees with its task (its task fails with that kind, recording nothing).
    """
    expected = payload.get("category")
    if expected is not None and (page.category is None or slugify(page.category) != slugify(str(expected))):
        shows = f"category {page.category!r}" if page.category else "no category heading"
        raise NotAListingPage(f"a listing of {expected!r} shows {shows}")
    number = payload.get("page")
    if number is not None and page.page_number != int(number):
        shows = f"page {page.page_number}" if page.page_number is not None else "no page number"
        raise NotAListingPage(f"page {number} of its chain shows {shows}")
    if payload.get("start") and not outcome.tasks:
        raise NotAListingPage(
            f"a start page with nothing to follow: none of its {len(page.category_links)} category links and "
            f"{len(page.cards)} book cards is on an allowed host and among the categories asked for"
            + (f" ({outcome.offsite_skipped} off-site)" if outcome.offsite_skipped else "")
        )


def listing_record(payload: dict[str, Any], page: ListingPage, outcome: ListingOutcome) -> dict[str, Any] | None:
    """The ``listing_pages`` row of a processed listing page; None when it listed nothing this crawl follows.

    A start page records the categories its sidebar links (to count those not crawled); a category page
    records its cards only when discovery took them (:attr:`ListingOutcome.followed`), so a page of a
    category left out by ``--categories`` is never evidence that its books are gone.
    """
    start = bool(payload.get("start")) and not outcome.followed
    if not outcome.followed and not start:
        return None
    return {
        "url": canonical_url(str(payload["url"])),
        "category": outcome.category if outcome.followed else None,
        "depth": int(payload.get("depth", 1)),
        # A next link that does not parse is kept as served: no page matches it, so the chain stays open.
        "next_url": (_canonical(page.next_url) or page.next_url) if page.next_url and outcome.followed else None,
        "result_count": page.result_count,
        "cards": len(page.cards),
        "book_urls": sorted({u for c in page.cards if (u := _canonical(c.url))}) if outcome.followed else [],
        "sidebar": sorted({name for name, _url in page.category_links}) if start else [],
    }


def _canonical(url: str) -> str | None:
    """The canonical URL, or None for a link that does not parse (a card whose link does not parse is
    neither a task nor a sighting)."""
    try:
        return canonical_url(url)
    except ValueError:
        return None
