"""Exceptions raised by the scraper package.

Kept in one module so callers (the crawler, the queue's retry policy) can import every failure type from a
single place without pulling in Playwright or httpx.
"""

from __future__ import annotations


class ParseError(ValueError):
    """A page could not be parsed into the expected model; the message is one line naming what was missing."""


class NotABookPage(ParseError):
    """The HTML is not a complete book detail page (404 page, listing, garbage, or truncated HTML)."""


class NotAListingPage(ParseError):
    """The HTML is not a complete listing page (root, ``catalogue/page-N``, or a category page)."""


class ChromiumNotFound(RuntimeError):
    """No usable Chromium executable; the message says how to provide one."""


class FetchError(Exception):
    """A fetch failed; ``kind`` names why and ``retryable`` tells the queue whether to try again.

    The crawler never inspects messages: it decides on ``retryable`` (and waits ``retry_after`` seconds
    when the server asked for it), and records ``kind`` for reporting.
    """

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        url: str,
        retryable: bool,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{kind}: {message} ({url})")
        self.kind = kind
        self.url = url
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
