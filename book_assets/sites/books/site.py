"""The books.toscrape.com definition: a thin adapter from the :class:`~book_assets.sites.site.Site` interface to
the books' parsers, store and categories."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from book_assets.categories import KNOWN_CATEGORIES, slugify
from book_assets.scraper.models import BookDetail, ListingPage
from book_assets.scraper.parsers import parse_book, parse_listing
from book_assets.settings import LIVE_SITE_URL
from book_assets.sites.site import Categories, DataCheck, DetailLink, Listing, PageKind, Role, Stored, records_agree
from book_assets.sql import load_queries
from book_assets.store import books
from book_assets.store.pages import revalidate_book

if TYPE_CHECKING:
    from book_assets.db.connection import Cursor, Database
    from book_assets.scraper.fetching import FetchResult, Validators
    from book_assets.sites.books.publishing import BooksPublishing

#: A listing's markers: its book cards, and the "N results" form an empty listing still shows.
LISTING = PageKind("listing", Role.LISTING, markers=(b"product_pod", b"form-horizontal"))
DETAIL = PageKind("detail", Role.DETAIL, markers=(b"product_page",))
BOOK_CATEGORIES = Categories(KNOWN_CATEGORIES, slugify)
_CHECKS = load_queries("checks")
#: The rules every stored book holds (the named queries of ``checks.sql``), each a blocking check of
#: ``book_details``: all four guard against corrupt data, so a failure stops the day's publication.
BOOK_DATA_CHECKS = (
    DataCheck("unique_urls", _CHECKS["duplicate_urls"], "one row per URL", "No book URL is stored twice.", "books"),
    DataCheck(
        "raw_html_present",
        _CHECKS["missing_raw_html"],
        "raw HTML stored",
        "Every stored book keeps the raw HTML of its page.",
        "books",
    ),
    DataCheck(
        "no_error_pages",
        _CHECKS["error_pages_stored"],
        "a product page served with HTTP 200",
        "No error page was stored as a book: product block present, real title, HTTP 200.",
        "books",
    ),
    DataCheck(
        "required_fields_present",
        _CHECKS["missing_required_fields"],
        "title, price, UPC and category present",
        "Title, price, UPC and category are present on every book.",
        "books",
    ),
)


def as_listing(page: ListingPage) -> Listing:
    """A books listing page as discovery reads it: its cards are the links to book pages, each with the title,
    price and rating the card shows."""
    return Listing(
        url=page.url,
        details=tuple(
            DetailLink(card.url, {"title": card.title, "price": str(card.price), "rating": card.rating})
            for card in page.cards
        ),
        next_url=page.next_url,
        category=page.category,
        category_links=page.category_links,
        page_number=page.page_number,
        result_count=page.result_count,
    )


@dataclass(frozen=True)
class BooksSite:
    """books.toscrape.com: listing and book pages, books stored with their versions, categories by slug."""

    name: str = "books"
    default_base_url: str = LIVE_SITE_URL
    page_kinds: tuple[PageKind, ...] = (LISTING, DETAIL)
    record: str = "book"
    #: Every page is linked from the start page's chain or its categories.
    start_paths: tuple[str, ...] = ()
    drift_and_removals: bool = True
    data_checks: tuple[DataCheck, ...] = BOOK_DATA_CHECKS

    @property
    def publishing(self) -> BooksPublishing:
        """The books table exported, its versions' feed and snapshot, its pages re-extracted: imported when
        asked, as the snapshot reads pandas, which a crawl's processes never need (about 0.6 s and 60 MB each)."""
        from book_assets.sites.books.publishing import BooksPublishing

        return BooksPublishing()

    @property
    def categories(self) -> Categories:
        """The site's 50 categories, a name or its Django slug naming each."""
        return BOOK_CATEGORIES

    def kind_of(self, url: str, role: Role) -> str:
        """Every listing is a ``listing``, every book page a ``detail``: the site serves all its data in HTML."""
        return LISTING.name if role is Role.LISTING else DETAIL.name

    def parse_listing(self, html: str, url: str) -> Listing:
        return as_listing(parse_listing(html, url))

    def parse_detail(self, html: str, rendered_html: str | None, url: str) -> BookDetail:
        return books.parse_served_or_rendered(html, rendered_html, url)

    def records_agree(self, kind: str, plain_html: str, rendered_html: str | None, url: str) -> bool:
        """The books' own parse of each form compared (a listing's cards, pager and sidebar; a book's fields)."""
        parse = parse_listing if kind == LISTING.name else parse_book
        return records_agree(parse, plain_html, rendered_html, url)

    def write_detail(self, cur: Cursor, record: BookDetail, fetched: FetchResult, *, requested_url: str) -> Stored:
        stored = books.write_book(cur, record, fetched, requested_url=requested_url)
        return Stored(stored.book_id, stored.outcome, stored.version)

    def revalidate_detail(self, cur: Cursor, url: str, validators: Validators, response: FetchResult) -> Stored:
        stored, _category = revalidate_book(cur, url, validators, response)
        return Stored(stored.book_id, stored.outcome, stored.version)

    def write_listing(self, cur: Cursor, listing: Listing, fetched: FetchResult) -> None:
        """A books listing carries no records of its own: its books are stored from their pages."""

    def record_counts(self, db: Database) -> dict[str, int]:
        return books.book_counts(db)

    def versions_since(self, db: Database, since: datetime) -> tuple[int, int]:
        return books.versions_since(db, since)


#: The books.toscrape.com definition, the default site.
BOOKS = BooksSite()
