"""What a site definition declares: the one interface through which the crawl engine reaches a site.

The engine (the queue, the crawl worker, discovery, adaptive fetching, the crawl's composition) knows page
*roles*, not a site's pages: a listing page links to further pages (and may carry records), a detail page is one
record. A site declares the rest (:class:`Site`): its name and start page, its page kinds (the queue's task
types, each with its role and the bytes that prove a page is of that kind), which kind a discovered link is,
how its pages parse (listings into the generic :class:`Listing`, detail pages into the site's own record), how
its records are compared (adaptive mode's sampling), stored and revalidated, and what a category is.

Parsers stay pure functions of HTML and URL; the store hooks run inside the worker's transaction, which
completes the task under its lease, so a record is stored exactly when its task completes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from book_assets.scraper.errors import ParseError

if TYPE_CHECKING:
    from book_assets.db.connection import Cursor, Database
    from book_assets.publish.publishing import Publishing
    from book_assets.scraper.fetching import FetchResult, Validators


class Role(StrEnum):
    """What a page does for the crawl; every page kind of a site has one."""

    #: Links to other pages (detail pages, further listings, categories); may carry records of its own.
    LISTING = "listing"
    #: One record (a book, an author).
    DETAIL = "detail"


@dataclass(frozen=True, slots=True)
class PageKind:
    """One kind of page of a site: a task type of the queue.

    Attributes:
        name: The task type (``listing``, ``detail``); adaptive mode decides per (domain, kind), so a kind whose
            pages need JavaScript (quotes' ``/js/``) is a kind of its own.
        role: How the worker handles its pages.
        markers: Bytes only this kind's HTML carries: a response holding one is never taken for a soft block
            (:func:`~book_assets.scraper.softblock.soft_block`).
    """

    name: str
    role: Role
    markers: tuple[bytes, ...] = ()


@dataclass(frozen=True, slots=True)
class DetailLink:
    """A link from a listing to a detail page, with what the listing shows of its record (carried in the detail
    task's payload as ``listing``: JSON-ready values)."""

    url: str
    shown: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Listing:
    """A parsed listing page, as discovery reads it (every site's listing parser returns one).

    Attributes:
        url: The URL the page was fetched from.
        details: Links to detail pages, in page order.
        next_url: The next page of the listing's chain, or None on its last page.
        category: The category whose records the page lists; None on a page that lists no one category (a start
            page, the all-records listing).
        category_links: ``(name, absolute URL)`` of the categories the page links to (a start page's sidebar).
        page_number: The page's number in its chain as the page shows it (checked against the number its "next"
            link promised), or None when it shows none.
        result_count: The records the whole listing holds as the page shows it ("1000 results"), or None: the
            proof that a chain was read whole (:mod:`book_assets.store.removals`).
        records: Records the page carries itself (quotes on a quotes listing), stored with the page
            (:meth:`Site.write_listing`); empty for a site whose records are all detail pages.
        records_in_categories: On a start page that links categories, whether every record arrives through
            them, so discovery follows only the categories (books: every book is in a category the sidebar
            links); False: the page's own detail links and chain are followed too (quotes: a quote may have no
            tag, and the sidebar links ten tags).
    """

    url: str
    details: tuple[DetailLink, ...]
    next_url: str | None
    category: str | None = None
    category_links: tuple[tuple[str, str], ...] = ()
    page_number: int | None = None
    result_count: int | None = None
    records: tuple[object, ...] = ()
    records_in_categories: bool = True


@dataclass(frozen=True, slots=True)
class Stored:
    """One detail record written: its row, whether it was new, changed or unchanged, and its version where the
    site keeps versions (None where it does not)."""

    id: int
    outcome: str
    version: int | None = None


@dataclass(frozen=True, slots=True)
class DataCheck:
    """One rule a site's stored records must hold after a crawl: a blocking check of its details asset.

    The engine runs ``sql`` (a named query of the site's own SQL file) and fails the check when a row breaks
    the rule; what a record must hold is the site's to say, how a check is run and reported the engine's.

    Attributes:
        name: The check's name in the catalog (``unique_urls``).
        sql: One statement returning one row: ``bad`` (rows that break the rule), ``total`` (rows looked at)
            and ``sample`` (up to five offending URLs, or NULL).
        rule: The rule in a few words, for the result ("one row per URL").
        description: What the check guards, for the catalog.
        rows: What the rows looked at are called in the result ("books").
        params: The statement's parameters (``%(site)s``), where it takes any: a check of a table that several
            sites share names its site (:mod:`book_assets.sites.generic`); None: a statement without any.
    """

    name: str
    sql: str
    rule: str
    description: str
    rows: str
    params: Mapping[str, Any] | None = field(default=None, hash=False)


@dataclass(frozen=True)
class Categories:
    """What a category of a site is: the names the site shows, and the rule that makes two spellings one.

    Attributes:
        known: The site's categories as it names them; weights given by key are mapped to these names.
        key: The site's rule from a name to its key (books: Django's slug, ``"Sequential Art"`` ->
            ``"sequential-art"``): every entry point accepts a name or its key, in any case.
    """

    known: tuple[str, ...]
    key: Callable[[str], str]

    def same(self, a: str, b: str) -> bool:
        """Whether ``a`` and ``b`` name the same category."""
        return self.key(a) == self.key(b)

    def is_one_of(self, name: str, picked: Iterable[str] | None) -> bool:
        """Whether ``name`` is among ``picked`` (names or keys, any case); no pick means every category."""
        wanted = {self.key(p) for p in picked or () if p.strip()}
        return not wanted or self.key(name) in wanted

    def known_name(self, name: str) -> str:
        """The known category ``name`` (a name or key) names, or ``name`` itself when it names none."""
        by_key = {self.key(known): known for known in self.known}
        return by_key.get(self.key(name), name)


class Site(Protocol):
    """A site definition: everything the engine needs that only the site knows."""

    @property
    def name(self) -> str:
        """The name ``--site`` picks it by (``books``)."""
        ...

    @property
    def default_base_url(self) -> str:
        """Where a crawl starts when ``base_url`` is not set."""
        ...

    @property
    def page_kinds(self) -> tuple[PageKind, ...]:
        """The page kinds (task types) it uses: one detail kind (its records: the fairness groups, weights and
        budgets are its), and as many listing kinds as it needs; the first of each role is the role's default."""
        ...

    @property
    def start_paths(self) -> tuple[str, ...]:
        """Further start pages, relative to the base URL, that no page of the site links (quotes' ``js/``): a
        crawl is seeded with each beside its base URL."""
        ...

    @property
    def drift_and_removals(self) -> bool:
        """Whether a crawl's end judges its fields for drift and settles its removals
        (:mod:`book_assets.store.drift`, :mod:`book_assets.store.removals`, written for the books' tables);
        False: the crawl is closed with its removals undecided and its fields unjudged."""
        ...

    @property
    def data_checks(self) -> tuple[DataCheck, ...]:
        """The rules its stored records hold after a crawl: each a blocking check of its details asset, run
        beside the checks the engine gives every catalogue (the crawl ran to its end, it found records, no
        listing page failed)."""
        ...

    @property
    def categories(self) -> Categories:
        """What a category of the site is (its fairness groups, weights and ``--categories``)."""
        ...

    @property
    def record(self) -> str:
        """What one detail record is called, for messages and summaries ("book")."""
        ...

    @property
    def publishing(self) -> Publishing | None:
        """What it publishes from its stored records (``export``, ``changes``, ``reextract``, the daily snapshot:
        :mod:`book_assets.publish.publishing`); None: nothing yet, and those commands refuse it in one line."""
        ...

    def kind_of(self, url: str, role: Role) -> str:
        """The page kind of a discovered link to a page of ``role`` (a URL rule; the role's default kind)."""
        ...

    def parse_listing(self, html: str, url: str) -> Listing:
        """Parse a listing page (pure); raises a ``ParseError`` (``NotAListingPage``) for a page that is none."""
        ...

    def parse_detail(self, html: str, rendered_html: str | None, url: str) -> Any:
        """Parse a detail page into its record (pure), from the served HTML or, where only scripts build the
        data, the rendered DOM; raises a ``ParseError`` for a page that is not a valid detail page."""
        ...

    def records_agree(self, kind: str, plain_html: str, rendered_html: str | None, url: str) -> bool:
        """Whether the plain HTML of a page of ``kind`` parses to the record its rendered DOM does (pure)."""
        ...

    def write_detail(self, cur: Cursor, record: Any, fetched: FetchResult, *, requested_url: str) -> Stored:
        """Store a parsed detail record in the caller's transaction (the one that completes its task)."""
        ...

    def revalidate_detail(self, cur: Cursor, url: str, validators: Validators, response: FetchResult) -> Stored:
        """A 304 for detail page ``url``: its stored record stands, confirmed at ``response.fetched_at``; raises
        :class:`~book_assets.store.pages.StaleCopy` when no record holds the copy the validators describe."""
        ...

    def write_listing(self, cur: Cursor, listing: Listing, fetched: FetchResult) -> None:
        """Store the records a listing page carries (:attr:`Listing.records`), in the caller's transaction."""
        ...

    def record_counts(self, db: Database) -> dict[str, int]:
        """The stored records: ``total``, ``unique_urls``, ``with_html`` and ``versions``."""
        ...

    def versions_since(self, db: Database, since: datetime) -> tuple[int, int]:
        """Records stored as new and as changed since ``since`` (by the database's clock)."""
        ...


def kind_named(site: Site, name: str) -> PageKind:
    """The page kind ``name`` of ``site``; a ``KeyError`` naming the site's kinds when it has none of that name."""
    for kind in site.page_kinds:
        if kind.name == name:
            return kind
    raise KeyError(f"site {site.name} has no page kind {name!r} (it has {', '.join(k.name for k in site.page_kinds)})")


def default_kind(site: Site, role: Role) -> str:
    """The first page kind of ``role`` that ``site`` declares."""
    return next(kind.name for kind in site.page_kinds if kind.role is role)


def kinds_of(site: Site, role: Role) -> tuple[str, ...]:
    """Every page kind of ``role`` that ``site`` declares, in its order."""
    return tuple(kind.name for kind in site.page_kinds if kind.role is role)


def records_agree(parse: Callable[[str, str], object], plain_html: str, rendered_html: str | None, url: str) -> bool:
    """True when ``plain_html`` parses (with ``parse``, pure) to the same record as the rendered DOM.

    A render that does not parse either (an error page) is no evidence that rendering helps: agreement.
    """
    try:
        rendered = parse(rendered_html if rendered_html is not None else plain_html, url)
    except ParseError:
        return True
    try:
        return bool(parse(plain_html, url) == rendered)
    except ParseError:
        return False
