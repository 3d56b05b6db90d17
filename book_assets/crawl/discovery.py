"""The shallow pass as pure functions: from a parsed listing page to the tasks it creates.

Discovery is category-first so that every detail task knows its category (its fairness group) before
the book page is fetched: a start page that is not a category page (the root, ``catalogue/page-N.html``,
the all-books category) contributes its sidebar's categories — filtered by ``--categories`` — and each
category chain is followed through ``li.next`` with no hard-coded page count, up to ``max_pages`` pages.

A link longer than ``max_url_length`` becomes no task: it is kept in :attr:`ListingOutcome.too_long` and
recorded as a failure of its own (:func:`refused_links`), so one hostile link costs only itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from book_assets.categories import is_one_of
from book_assets.crawl.config import DETAIL, DETAIL_PRIORITY, LISTING, LISTING_PRIORITY, CrawlConfig
from book_assets.queue import NewTask
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
    #: The tasks whose URL is longer than ``max_url_length``: never enqueued, each recorded as failed.
    too_long: list[NewTask] = field(default_factory=list)


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
                _add(outcome, NewTask(LISTING, {"url": url, "depth": 1, "category": name}, LISTING_PRIORITY), config)
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
        detail = NewTask(DETAIL, {"url": card.url, "category": category, "listing": listing}, DETAIL_PRIORITY, category)
        _add(outcome, detail, config)
    if page.next_url and (config.max_pages is None or depth < config.max_pages):
        if host_allowed(page.next_url, config.allowed_domains):
            nxt = {"url": page.next_url, "depth": depth + 1, "category": category}
            _add(outcome, NewTask(LISTING, nxt, LISTING_PRIORITY), config)
        else:
            outcome.offsite_skipped += 1
    return outcome


def _add(outcome: ListingOutcome, task: NewTask, config: CrawlConfig) -> None:
    """``task`` goes to the outcome's tasks, or to :attr:`ListingOutcome.too_long` when its URL (canonical, as
    the queue stores it) is longer than ``max_url_length``."""
    url = str(task.payload["url"])
    too_long = len(_canonical(url) or url) > config.max_url_length
    (outcome.too_long if too_long else outcome.tasks).append(task)


def refused_links(
    outcome: ListingOutcome, found_by: int, found_on: str, max_url_length: int
) -> list[tuple[NewTask, str]]:
    """The failed tasks to record for the outcome's links over ``max_url_length``, each with its error: the URL
    cut to the cap (the queue indexes URLs, and PostgreSQL refuses an index key past about 2,700 bytes),
    ``refused_by`` the task ``found_by`` that found it on ``found_on`` (pure)."""
    refused = []
    for task in outcome.too_long:
        url = _canonical(str(task.payload["url"])) or str(task.payload["url"])
        payload = {**task.payload, "url": url[:max_url_length], "refused_by": found_by}
        error = (
            f"url_too_long: a link of {len(url)} characters, over max_url_length ({max_url_length}), "
            f"on {found_on}: {url[:200]}…"
        )
        refused.append((NewTask(task.task_type, payload, task.priority, task.group), error))
    return refused


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
