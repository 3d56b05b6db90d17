"""Exceptions raised by the scraper package.

Kept in one module so callers (the crawler, the queue's retry policy) can import every failure type from a
single place without pulling in Playwright or aiohttp.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from book_assets.scraper.contract import Problem


class ErrorKind(StrEnum):
    """Why a page failed, recorded on its task (``tasks.error_kind``) and counted by the summaries.

    Values are strings, so a kind compares equal to its name and is stored as it is.
    """

    # retryable: the server or the network was having a bad moment
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    HTTP_5XX = "http_5xx"
    HTTP_429 = "http_429"
    HTTP_408 = "http_408"
    TRUNCATED = "truncated"
    BROWSER_CRASHED = "browser_crashed"
    BROWSER_ERROR = "browser_error"
    INTERNAL = "internal"  # a bug or an outage on our side
    STALE_COPY = "stale_copy"  # a 304 whose stored copy changed or vanished meanwhile: fetched again in full
    ROBOTS_UNREACHABLE = "robots_unreachable"  # the site's robots.txt could not be read: nothing is fetched yet
    SOFT_BLOCK = "soft_block"  # a 200 that is not the page (a challenge, a login wall, an empty body): backed off
    # permanent: the same request fails the same way every time
    HTTP_404 = "http_404"
    HTTP_4XX = "http_4xx"
    HTTP_3XX = "http_3xx"
    HTTP_OTHER = "http_other"
    OFFSITE = "offsite"
    OFFSITE_REDIRECT = "offsite_redirect"
    REDIRECT_LOOP = "redirect_loop"
    BAD_REDIRECT = "bad_redirect"  # a redirect whose Location is no http(s) URL (unparsable, javascript:, a bad port)
    TOO_LARGE = "too_large"
    BAD_URL = "bad_url"
    DOWNLOAD = "download"
    NOT_MODIFIED_UNASKED = "not_modified_unasked"  # a 304 to a request that sent no validators
    NOT_A_BOOK_PAGE = "not_a_book_page"
    NOT_A_LISTING_PAGE = "not_a_listing_page"
    NOT_A_DETAIL_PAGE = "not_a_detail_page"  # a site's detail page that is not one (an author page without a name)
    MISSING_FIELD = "missing_field"  # a book page without a field its contract requires (a redesign, mostly)
    BAD_VALUE = "bad_value"  # a book page whose field's value is not of its type (a negative price, 1e308)
    ROBOTS_DISALLOWED = "robots_disallowed"  # the site's robots.txt disallows the URL: it is never requested
    LISTING_TRAP = "listing_trap"  # listing pages in a row that bring no new book (listing_trap_pages): not followed
    URL_TOO_LONG = "url_too_long"  # a link longer than max_url_length: never enqueued, failed alone
    VALUE_OUT_OF_RANGE = "value_out_of_range"  # a value past its column's range (SQLSTATE 22003, 22008)
    UNSTORABLE = "unstorable"  # a value the store cannot hold (other SQLSTATE class 22, a NUL, lone surrogates)
    ROW_TOO_LARGE = "row_too_large"  # past one of PostgreSQL's limits (SQLSTATE class 54: an index row too large)
    UNKNOWN = "unknown"  # a name no member has: a bug in the code that raised it, so retrying cannot help

    @property
    def retryable(self) -> bool:
        """Whether trying the page again later can succeed: the kinds above the "permanent" line."""
        return self in _RETRYABLE

    @classmethod
    def of(cls, name: str) -> ErrorKind:
        """The kind named ``name``; :attr:`UNKNOWN` for a name no member has.

        Why not retryable: a misspelt kind is a bug, and retrying it would only repeat the request against
        the site until the attempts run out, hiding the bug behind a plausible transient failure.
        """
        try:
            return cls(name)
        except ValueError:
            return cls.UNKNOWN


_RETRYABLE: frozenset[ErrorKind] = frozenset(
    {
        ErrorKind.TIMEOUT,
        ErrorKind.CONNECTION,
        ErrorKind.HTTP_5XX,
        ErrorKind.HTTP_429,
        ErrorKind.HTTP_408,
        ErrorKind.TRUNCATED,
        ErrorKind.BROWSER_CRASHED,
        ErrorKind.BROWSER_ERROR,
        ErrorKind.INTERNAL,
        ErrorKind.STALE_COPY,
        ErrorKind.ROBOTS_UNREACHABLE,
        ErrorKind.SOFT_BLOCK,
    }
)


#: SQLSTATEs of a value past its type's range: numeric_value_out_of_range, datetime_field_overflow.
_OUT_OF_RANGE_STATES = frozenset({"22003", "22008"})


def url_too_long(what: str, url: str, max_url_length: int) -> str:
    """The error of a redirect refused as ``url_too_long``: ``what`` the URL is, its length and the cap, and its
    start (the URL itself may be megabytes)."""
    return f"{what} of {len(url)} characters, over max_url_length ({max_url_length}): {url[:200]}…"


def refusal_kind(sqlstate: str | None) -> ErrorKind:
    """The kind of a task whose data the database refused with ``sqlstate`` (None: refused before it was sent,
    a string the driver cannot encode); every refusal is permanent, as the same value is refused again."""
    if sqlstate in _OUT_OF_RANGE_STATES:
        return ErrorKind.VALUE_OUT_OF_RANGE
    if sqlstate is not None and sqlstate.startswith("54"):
        return ErrorKind.ROW_TOO_LARGE
    return ErrorKind.UNSTORABLE


class ParseError(ValueError):
    """A page could not be parsed into the expected model; the message is one line naming what was missing."""

    kind: ErrorKind = ErrorKind.NOT_A_BOOK_PAGE


class NotABookPage(ParseError):
    """The HTML is not a product page at all: no product box or no title (a 404 page, a listing, garbage, a
    page cut off before its product box). A product page that lacks fields is a :class:`ContractViolation`."""

    kind = ErrorKind.NOT_A_BOOK_PAGE


class ContractViolation(ParseError):
    """A product page whose fields break the record's contract (:mod:`book_assets.scraper.contract`).

    The page is what it claims to be (it has a product box and a title), so it is not a :class:`NotABookPage`:
    what it lacks is data, which is what a redesign does to a parser. Its kind is ``missing_field`` when a
    required field is absent, else ``bad_value``; the message is one line naming every field, e.g.
    ``missing rating, upc; bad price (negative: -1.00)``, and :attr:`problems` keeps them for readers.
    """

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        missing = [p.field for p in self.problems if p.missing]
        bad = [p.line() for p in self.problems if not p.missing]
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + ([f"bad {', '.join(bad)}"] if bad else [])
        super().__init__("; ".join(parts))
        self.kind = ErrorKind.MISSING_FIELD if missing else ErrorKind.BAD_VALUE

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields that break the contract, in the contract's order."""
        return tuple(p.field for p in self.problems)


class NotAListingPage(ParseError):
    """The HTML is not a complete listing page (root, ``catalogue/page-N``, or a category page)."""

    kind = ErrorKind.NOT_A_LISTING_PAGE


class ChromiumNotFound(RuntimeError):
    """No usable Chromium executable; the message says how to provide one."""


class FetchError(Exception):
    """A fetch failed; ``kind`` names why, and its ``retryable`` tells the queue whether to try again.

    The crawler never inspects messages: it decides on ``retryable`` (and waits ``retry_after`` seconds
    when the server asked for it), and records ``kind`` for reporting. A ``kind`` given as a name no
    :class:`ErrorKind` has becomes :attr:`ErrorKind.UNKNOWN`, and the message keeps the name.
    """

    def __init__(
        self,
        kind: ErrorKind | str,
        message: str,
        *,
        url: str,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.kind = ErrorKind.of(kind)
        if self.kind is ErrorKind.UNKNOWN and kind != ErrorKind.UNKNOWN:
            message = f"error kind {str(kind)!r} is not an ErrorKind: {message}"
        super().__init__(f"{self.kind}: {message} ({url})")
        self.url = url
        self.status = status
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        return self.kind.retryable
