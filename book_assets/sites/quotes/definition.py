"""The quotes.toscrape.com definition: a thin adapter from the :class:`~book_assets.sites.site.Site` interface to
the quotes' parsers (:mod:`.parsers`) and store (:mod:`.store`).

What a crawl of it reads:

- the start page ``/`` and its pager (``/page/N/``): its listings carry the quotes themselves (stored with the
  page, :meth:`QuotesSite.write_listing`) and link each quote's author page (``/author/<slug>/``, the detail
  kind, stored as ``authors``). A quote may have no tag, so the start page's own chain is followed besides its
  categories (:attr:`~book_assets.sites.site.Listing.records_in_categories` False);
- its categories are the tags its sidebar links ("Top Ten tags", ``/tag/<tag>/`` and their pager): the fairness
  groups of the weighted round-robin, an author's group the tag whose listing first linked it (none: the
  start page's chain);
- ``/js/`` and its pager write the same quotes with a script, and no page of the site links ``/js/``: it is a
  start page the definition declares (:attr:`QuotesSite.start_paths`), of a listing kind of its own
  (``quotes_js``), so adaptive mode, deciding per (domain, kind), renders those pages and only those.

Its kinds are named apart from every other site's (the queue's task types are shared by the catalogues on one
database, and a worker claims only its crawl's), and its records are quotes and authors, which the books' field
drift and removals do not read (:attr:`QuotesSite.drift_and_removals` False).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from book_assets.sites.quotes import store
from book_assets.sites.quotes.models import Author, Quote, QuotesPage
from book_assets.sites.quotes.parsers import parse_author, parse_quotes_page
from book_assets.sites.quotes.publishing import QuotesPublishing
from book_assets.sites.site import Categories, DataCheck, DetailLink, Listing, PageKind, Role, Stored, records_agree
from book_assets.sql import load_queries
from book_assets.store.pages import StaleCopy, confirm_page

if TYPE_CHECKING:
    from book_assets.db.connection import Cursor, Database
    from book_assets.scraper.fetching import FetchResult, Validators

#: quotes.toscrape.com itself: where a crawl starts when ``base_url`` is not set.
LIVE_QUOTES_URL = "https://quotes.toscrape.com/"
#: The listings served whole: their quotes, or the pager every listing shows (an empty one says "No quotes found!").
LISTING = PageKind("quotes", Role.LISTING, markers=(b'class="quote"', b'class="pager"'))
#: ``/js/`` and its pager: the quotes only a script writes (their served HTML holds the script and the pager).
JS_LISTING = PageKind("quotes_js", Role.LISTING, markers=(b"document.write", b'class="pager"'))
AUTHOR = PageKind("author", Role.DETAIL, markers=(b"author-details",))
#: The path of the listings whose quotes a script writes.
JS_PREFIX = "/js/"
#: A tag is named as its pages print it; two spellings of one differ in case at most.
TAGS = Categories((), lambda name: name.strip().lower())
Q = load_queries("quotes")
#: The rules the stored authors and quotes hold after a crawl (named queries of ``quotes.sql``), each a blocking
#: check of the quotes' details asset.
QUOTES_DATA_CHECKS = (
    DataCheck(
        "unique_urls", Q["duplicate_author_urls"], "one row per URL", "No author URL is stored twice.", "authors"
    ),
    DataCheck(
        "raw_html_present",
        Q["authors_missing_raw_html"],
        "raw HTML stored",
        "Every stored author keeps the raw HTML of its page.",
        "authors",
    ),
    DataCheck(
        "required_fields_present",
        Q["authors_missing_required_fields"],
        "name, birth date and birth place present",
        "Name, birth date and birth place are present on every author.",
        "authors",
    ),
    DataCheck(
        "quote_authors_stored",
        Q["quotes_without_their_author"],
        "the author it links is stored",
        "Every stored quote that links its author page has that author stored.",
        "quotes",
    ),
)


def as_listing(page: QuotesPage) -> Listing:
    """A quotes listing as discovery reads it: its author links are the links to detail pages, its sidebar's
    tags the categories it links, its tag (a tag page's) the category it lists, its quotes its records."""
    return Listing(
        url=page.url,
        details=tuple(DetailLink(link) for link in page.author_links),
        next_url=page.next_url,
        category=page.tag,
        category_links=page.tag_links,
        records=page.quotes,
        records_in_categories=False,
    )


@dataclass(frozen=True)
class QuotesSite:
    """quotes.toscrape.com: quote listings (served and script-written) that carry quotes, author pages."""

    name: str = "quotes"
    default_base_url: str = LIVE_QUOTES_URL
    page_kinds: tuple[PageKind, ...] = (LISTING, JS_LISTING, AUTHOR)
    record: str = "author"
    #: ``/js/``: linked from no page of the site, so a crawl starts there too.
    start_paths: tuple[str, ...] = (JS_PREFIX.lstrip("/"),)
    drift_and_removals: bool = False
    #: The quotes and authors exported, their feed from their versions, the authors re-extracted, the quotes'
    #: snapshot by tag (:mod:`.publishing`).
    publishing: QuotesPublishing = field(default_factory=QuotesPublishing)
    data_checks: tuple[DataCheck, ...] = QUOTES_DATA_CHECKS

    @property
    def categories(self) -> Categories:
        """Tags, as the pages print them; the site has no fixed list of them."""
        return TAGS

    def kind_of(self, url: str, role: Role) -> str:
        """An author page is an ``author``; a listing under ``/js/`` a ``quotes_js``, every other one ``quotes``."""
        if role is Role.DETAIL:
            return AUTHOR.name
        return JS_LISTING.name if urlsplit(url).path.startswith(JS_PREFIX) else LISTING.name

    def parse_listing(self, html: str, url: str) -> Listing:
        return as_listing(parse_quotes_page(html, url))

    def parse_detail(self, html: str, rendered_html: str | None, url: str) -> Author:
        """An author page, from its served HTML (the site serves it whole)."""
        return parse_author(html, url)

    def records_agree(self, kind: str, plain_html: str, rendered_html: str | None, url: str) -> bool:
        """The quotes' own parse of each form compared (a listing's quotes, pager and links; an author's fields)."""
        parse = parse_author if kind == AUTHOR.name else parse_quotes_page
        return records_agree(parse, plain_html, rendered_html, url)

    def write_detail(self, cur: Cursor, record: Author, fetched: FetchResult, *, requested_url: str) -> Stored:
        stored = store.write_author(cur, record, fetched)
        return Stored(stored.id, stored.outcome)

    def revalidate_detail(self, cur: Cursor, url: str, validators: Validators, response: FetchResult) -> Stored:
        """A 304 for an author page: the stored author stands when it holds the copy the validators describe."""
        final_url = confirm_page(cur, url, validators, response)
        hashed = {"url": final_url, "content_hash": validators.content_hash, "fetched_at": response.fetched_at}
        cur.execute(Q["confirm_author"], hashed)
        row = cur.fetchone()
        if row is None:
            raise StaleCopy(url)
        return Stored(row["id"], "unchanged")

    def write_listing(self, cur: Cursor, listing: Listing, fetched: FetchResult) -> None:
        """Store the quotes the page carries (by text and author), pointing at this fetch of the page."""
        quotes = tuple(record for record in listing.records if isinstance(record, Quote))
        page = QuotesPage(listing.url, quotes, listing.next_url, listing.category, ())
        store.write_quotes(cur, page, fetched)

    def record_counts(self, db: Database) -> dict[str, int]:
        """The stored authors (this site's detail records) and their versions."""
        row = db.query(Q["author_counts"])[0]
        return {
            "total": row["total"],
            "unique_urls": row["total"],
            "with_html": row["with_html"],
            "versions": row["versions"],
        }

    def versions_since(self, db: Database, since: datetime) -> tuple[int, int]:
        """Authors stored as new (their first version) and as changed (a later one) since ``since``."""
        row = db.query(Q["authors_since"], {"since": since})[0]
        return int(row["new"]), int(row["changed"])


#: The quotes.toscrape.com definition.
QUOTES = QuotesSite()
