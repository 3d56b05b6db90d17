"""The shallow pass as pure functions: from a parsed listing page (the site's
:class:`~book_assets.sites.site.Listing`) to the tasks it creates.

Discovery is category-first so that every detail task knows its category (its fairness group) before
the detail page is fetched: a start page that is not a category page (books: the root, ``catalogue/page-N.html``,
the all-books category) contributes the categories it links — filtered by ``--categories`` — and each
category chain is followed through its next links with no hard-coded page count, up to ``max_pages`` pages.
Each link's task is of the page kind the site gives it (:meth:`~book_assets.sites.site.Site.kind_of`).

A chain is followed once its page's records are enqueued (:func:`follow_chain`): the queue creates a task only for
a URL new to the crawl, so a chain whose ``listing_trap_pages`` pages in a row bring no new record (a pagination
that repeats its records, however it numbers its pages) is a trap, and is not followed.

A link longer than ``max_url_length`` becomes no task: it is kept in :attr:`ListingOutcome.too_long` and
recorded as a failure of its own (:func:`refused_links`), so one hostile link costs only itself.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

from book_assets.crawl.config import DETAIL_PRIORITY, LISTING_PRIORITY, CrawlConfig
from book_assets.queue import NewTask
from book_assets.scraper.errors import NotAListingPage
from book_assets.scraper.fetching import host_allowed
from book_assets.sites.site import Listing, Role
from book_assets.urls import canonical_url, without_query_params


@dataclass
class ListingOutcome:
    tasks: list[NewTask] = field(default_factory=list)
    cards: int = 0
    categories: int = 0
    offsite_skipped: int = 0
    #: The category whose detail links (books: cards) the page listed, and whether they were followed (False:
    #: a start page that only links categories, or a category left out by ``--categories``).
    category: str | None = None
    followed: bool = False
    #: The chain's next page, enqueued after the page's records (:func:`follow_chain`); None: the chain ends here.
    next: NewTask | None = None
    #: The tasks whose URL is longer than ``max_url_length``: never enqueued, each recorded as failed.
    too_long: list[NewTask] = field(default_factory=list)
    #: A digest of the records the page carries itself (:attr:`Listing.records`), None when it carries none.
    carried: str | None = None


@dataclass(frozen=True)
class ListingTrap:
    """Why a chain is not followed: its pages in a row brought no record new to the crawl."""

    reason: str


def start_tasks(config: CrawlConfig) -> list[NewTask]:
    """The listing tasks a crawl is seeded with: its base URL, then the site's further start pages
    (:attr:`~book_assets.sites.site.Site.start_paths`), resolved against it."""
    urls = [config.base_url, *(urljoin(config.base_url, path) for path in config.site.start_paths)]
    return [
        NewTask(config.site.kind_of(url, Role.LISTING), {"url": url, "depth": 1, "start": True}, LISTING_PRIORITY)
        for url in urls
    ]


def listing_tasks(payload: dict[str, Any], page: Listing, config: CrawlConfig) -> ListingOutcome:
    """Tasks created by one fetched listing page."""
    outcome = ListingOutcome(carried=records_digest(page.records))
    site, drop = config.site, config.drop_query_params
    depth = int(payload.get("depth", 1))
    category = page.category or payload.get("category")

    if category is None and payload.get("start"):
        for name, url in page.category_links:
            if not host_allowed(url, config.allowed_domains):
                outcome.offsite_skipped += 1
                continue
            if site.categories.is_one_of(name, config.categories):
                outcome.categories += 1
                link = _link(url, drop)
                kind = site.kind_of(link, Role.LISTING)
                _add(outcome, NewTask(kind, {"url": link, "depth": 1, "category": name}, LISTING_PRIORITY), config)
        if (outcome.categories or config.categories) and page.records_in_categories:
            return outcome  # the records arrive through their categories

    if category is not None and not site.categories.is_one_of(category, config.categories):
        return outcome
    outcome.category, outcome.followed = category, True
    for detail in page.details:
        if not host_allowed(detail.url, config.allowed_domains):
            outcome.offsite_skipped += 1
            continue
        outcome.cards += 1
        url = _link(detail.url, drop)
        detail_payload = {"url": url, "category": category, "listing": dict(detail.shown)}
        _add(outcome, NewTask(site.kind_of(url, Role.DETAIL), detail_payload, DETAIL_PRIORITY, category), config)
    if page.next_url and depth < config.max_pages:
        if host_allowed(page.next_url, config.allowed_domains):
            nxt = {"url": _link(page.next_url, drop), "depth": depth + 1, "category": category}
            if page.page_number is not None:  # the page its "next" link promises, for check_listing
                nxt["page"] = page.page_number + 1
            following = NewTask(site.kind_of(str(nxt["url"]), Role.LISTING), nxt, LISTING_PRIORITY)
            if _too_long(following, config):
                outcome.too_long.append(following)
            else:
                outcome.next = following
        else:
            outcome.offsite_skipped += 1
    return outcome


def follow_chain(
    payload: dict[str, Any], outcome: ListingOutcome, new_records: int, config: CrawlConfig
) -> NewTask | ListingTrap | None:
    """The chain's next page once this page's records are enqueued (``new_records`` new to the crawl), with
    the count of pages in a row that brought none (``stale``); a :class:`ListingTrap` when that count reaches
    ``listing_trap_pages`` and the chain goes on; None at its end.

    A page that carries records of its own (quotes' listings) brings new ones when they are not the records of
    the page before it in the chain (their digest, ``carried`` in the next page's payload): a pagination that
    serves one page under ever new numbers is a trap, while one whose pages carry other records is followed
    (up to ``max_pages``) though it links no detail page new to the crawl (quotes' ``/js/``).

    A page retried after its records were enqueued counts as bringing none: its next page, enqueued once per
    crawl, mostly keeps the count of the attempt that enqueued the records, and at worst carries one page more."""
    if outcome.next is None:
        return None
    carried_new = outcome.carried is not None and outcome.carried != payload.get("carried")
    stale = 0 if new_records or carried_new else int(payload.get("stale", 0)) + 1
    if stale >= config.listing_trap_pages:
        records = f"{config.site.record}s"
        return ListingTrap(f"{stale} listing pages in a row brought no new {records}; the next page is not followed")
    following = {**outcome.next.payload, "stale": stale}
    if outcome.carried is not None:
        following["carried"] = outcome.carried
    return NewTask(outcome.next.task_type, following, outcome.next.priority)


def records_digest(records: tuple[object, ...]) -> str | None:
    """A short digest of the records a listing page carries (their reprs, in page order); None for none."""
    if not records:
        return None
    return hashlib.blake2b(repr(records).encode(), digest_size=8).hexdigest()


def _too_long(task: NewTask, config: CrawlConfig) -> bool:
    """Whether ``task``'s URL (canonical, as the queue stores it) is longer than ``max_url_length``."""
    url = str(task.payload["url"])
    return len(_canonical(url, ()) or url) > config.max_url_length


def _add(outcome: ListingOutcome, task: NewTask, config: CrawlConfig) -> None:
    """``task`` goes to the outcome's tasks, or to :attr:`ListingOutcome.too_long` when its URL is too long."""
    (outcome.too_long if _too_long(task, config) else outcome.tasks).append(task)


def refused_links(
    outcome: ListingOutcome, found_by: int, found_on: str, max_url_length: int
) -> list[tuple[NewTask, str]]:
    """The failed tasks to record for the outcome's links over ``max_url_length``, each with its error: the URL
    cut to the cap (the queue indexes URLs, and PostgreSQL refuses an index key past about 2,700 bytes),
    ``refused_by`` the task ``found_by`` that found it on ``found_on`` (pure)."""
    refused = []
    for task in outcome.too_long:
        url = _canonical(str(task.payload["url"]), ()) or str(task.payload["url"])
        payload = {**task.payload, "url": url[:max_url_length], "refused_by": found_by}
        error = (
            f"url_too_long: a link of {len(url)} characters, over max_url_length ({max_url_length}), "
            f"on {found_on}: {url[:200]}…"
        )
        refused.append((NewTask(task.task_type, payload, task.priority, task.group), error))
    return refused


def check_listing(payload: dict[str, Any], page: Listing, outcome: ListingOutcome, config: CrawlConfig) -> None:
    """Refuse a listing page that is not the one its task asked for, or a start page that yields nothing.

    A parsed page is a listing (the site's :meth:`~book_assets.sites.site.Site.parse_listing`); this checks that
    it is *this* listing: a category's page shows that category (books: its heading under Home > Books), a page
    reached by a "next" link shows the number that link promised, and a start page yields a category or a
    record to follow. Only a page that passes is recorded, so a category's removals are decided only from pages that
    were what their task expected (:mod:`book_assets.store.removals`).

    Raises:
        NotAListingPage: the page disagrees with its task (its task fails with that kind, recording nothing).
    """
    site = config.site
    expected = payload.get("category")
    if expected is not None and (page.category is None or not site.categories.same(page.category, str(expected))):
        shows = f"category {page.category!r}" if page.category else "no category heading"
        raise NotAListingPage(f"a listing of {expected!r} shows {shows}")
    number = payload.get("page")
    if number is not None and page.page_number != int(number):
        shows = f"page {page.page_number}" if page.page_number is not None else "no page number"
        raise NotAListingPage(f"page {number} of its chain shows {shows}")
    if payload.get("start") and not outcome.tasks and outcome.next is None:
        raise NotAListingPage(
            f"a start page with nothing to follow: none of its {len(page.category_links)} category links and "
            f"{len(page.details)} {site.record} cards is on an allowed host and among the categories asked for"
            + (f" ({outcome.offsite_skipped} off-site)" if outcome.offsite_skipped else "")
        )


def listing_record(
    payload: dict[str, Any], page: Listing, outcome: ListingOutcome, *, drop_query_params: tuple[str, ...]
) -> dict[str, Any] | None:
    """The ``listing_pages`` row of a processed listing page; None when it listed nothing this crawl follows.

    A start page records the categories it links (to count those not crawled); a category page records its
    detail links only when discovery took them (:attr:`ListingOutcome.followed`), so a page of a category left
    out by ``--categories`` is never evidence that its records are gone. Its links are read as discovery reads
    them (``drop_query_params``), so it names each record as the record's task does. The ``book_urls`` column
    holds every site's detail links.
    """
    start = bool(payload.get("start")) and not outcome.followed
    if not outcome.followed and not start:
        return None
    drop = drop_query_params
    return {
        "url": canonical_url(str(payload["url"])),
        "category": outcome.category if outcome.followed else None,
        "depth": int(payload.get("depth", 1)),
        # A next link that does not parse is kept as served: no page matches it, so the chain stays open.
        "next_url": (_canonical(page.next_url, drop) or page.next_url) if page.next_url and outcome.followed else None,
        "result_count": page.result_count,
        "cards": len(page.details),
        "book_urls": sorted({u for d in page.details if (u := _canonical(d.url, drop))}) if outcome.followed else [],
        "sidebar": sorted({name for name, _url in page.category_links}) if start else [],
    }


def _canonical(url: str, drop_query_params: tuple[str, ...]) -> str | None:
    """The canonical URL without the dropped query parameters, or None for a link that does not parse (a card
    whose link does not parse is neither a task nor a sighting)."""
    try:
        return canonical_url(without_query_params(url, drop_query_params))
    except ValueError:
        return None


def _link(url: str, drop_query_params: tuple[str, ...]) -> str:
    """A discovered link as it is enqueued: canonical, without the dropped query parameters; one that does
    not parse is left for the queue to refuse with its message."""
    return _canonical(url, drop_query_params) or url
