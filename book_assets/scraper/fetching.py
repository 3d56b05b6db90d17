"""What every fetcher shares: settings, the result type, the protocol, and error classification.

Both fetchers (``fetch_http.HttpFetcher`` and ``fetch_browser.BrowserFetcher``) return a ``FetchResult`` or
raise a ``FetchError`` whose ``kind`` decides ``retryable``; the queue's retry policy only looks at
``retryable`` and ``retry_after``. The classification lives here, as pure functions, so both fetchers
agree on it and it can be unit-tested without a network.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Literal, Protocol, Self
from urllib.parse import quote, urljoin, urlsplit

from book_assets.scraper.blocking import blocked_url_patterns
from book_assets.scraper.charset import decode_html
from book_assets.scraper.errors import ErrorKind, FetchError, url_too_long
from book_assets.scraper.targets import target_allowed
from book_assets.settings import LIVE_SITE_URL, default

__all__ = [
    "FetchError",
    "FetchResult",
    "FetchSettings",
    "Fetcher",
    "Validators",
    "build_result",
    "conditional_headers",
    "error_for_status",
    "fetch_error",
    "host_allowed",
    "not_modified_error",
    "parse_retry_after",
    "redirect_target",
    "refuse_offsite",
    "truncation_error",
    "validators_of",
]

REDIRECT_STATUSES: frozenset[int] = frozenset({301, 302, 303, 307, 308})
NOT_MODIFIED = 304
FetchMode = Literal["browser", "http", "adaptive"]
JavaScript = Literal["on", "off", "auto"]


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """The fetchers' share of the settings; every default is the setting's (:mod:`book_assets.settings`).

    Attributes:
        mode: Which fetcher the crawler builds: "browser" (Playwright Chromium, sees JS-built DOM),
            "http" (aiohttp, faster, served HTML only) or "adaptive" (both: the browser only for the page
            types whose data rendering changes, decided per domain in PostgreSQL, see ``crawl.adaptive``).
        javascript: Browser only: "on", "off", or "auto" (off until a page type is found to need it:
            its served HTML does not parse while the rendered DOM does). With JavaScript off Chromium runs
            no script and the rendered DOM is not serialized (it equals the served HTML).
        concurrency: Requests in flight per fetcher (browser: pages in the pool); the crawl sets it to the
            autoscaler's ceiling.
        timeout_s: Deadline for one fetch including redirects and reading the body.
        block_resource_types: Playwright resource types the browser never downloads; the crawler only
            needs the document, so images/CSS/fonts/media are wasted bandwidth on the site and on us.
        block_url_patterns: Regexes (searched in the URL) of requests the browser aborts: analytics/ads.
        allowed_domains: Hostnames the fetchers may contact; a URL or redirect elsewhere fails with a
            permanent error and is never requested. An empty set allows every host.
        max_body_bytes: Larger bodies fail with "too_large" (10 MB; real pages are ~50 KB).
        max_redirects: Redirects followed per fetch before failing with "redirect_loop".
        recycle_page_after: Browser only: a pooled page (tab) is replaced after this many fetches, bounding
            its renderer's memory, which otherwise grows with every navigation.
        recycle_scripted_page_after: The same for a tab that runs scripts, whose renderer grows faster (the
            scripts' heap); a bound of its own, since a tighter one costs a tab without scripts more of its
            speed than it saves in memory (``docs/benchmarks.md``).
        relaunch_after_pages: The browser is restarted after this many pages, bounding Chromium's memory
            growth over a long crawl.
        user_agent: Sent by both fetchers; identifies the project to the site's operators.
        block_offsite_subresources: Browser only: abort scripts/XHR to hosts outside ``allowed_domains``
            (the live site pulls jQuery from a CDN it does not need for content).
        retry_after_max_s: A server's Retry-After longer than this is clamped to it (and the error says
            so): one page asking for 30 years must not park its domain for 30 years.
        max_url_length: A redirect to a longer URL is not followed: ``url_too_long``, as a link that long is.
    """

    mode: FetchMode = default("fetch_mode")
    javascript: JavaScript = default("javascript")
    concurrency: int = default("max_concurrency")
    timeout_s: float = default("timeout_s")
    block_resource_types: frozenset[str] = frozenset(default("block_resource_types"))
    block_url_patterns: tuple[str, ...] = default("block_url_patterns")
    allowed_domains: frozenset[str] = field(default_factory=lambda: frozenset({urlsplit(LIVE_SITE_URL).hostname or ""}))
    max_body_bytes: int = default("max_body_bytes")
    max_redirects: int = default("max_redirects")
    relaunch_after_pages: int = default("relaunch_after_pages")
    recycle_page_after: int = default("recycle_page_after")
    recycle_scripted_page_after: int = default("recycle_scripted_page_after")
    user_agent: str = default("user_agent")
    block_offsite_subresources: bool = True
    retry_after_max_s: float = default("retry_after_max_s")
    max_url_length: int = default("max_url_length")

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if self.timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        if self.max_body_bytes < 1:
            raise ValueError("max_body_bytes must be >= 1")
        if self.relaunch_after_pages < 1:
            raise ValueError("relaunch_after_pages must be >= 1")
        if self.recycle_page_after < 1 or self.recycle_scripted_page_after < 1:
            raise ValueError("recycle_page_after and recycle_scripted_page_after must be >= 1")
        # Accept any iterable of hostnames; normalise so comparisons are case-insensitive.
        object.__setattr__(self, "allowed_domains", frozenset(h.lower().rstrip(".") for h in self.allowed_domains))
        object.__setattr__(self, "block_resource_types", frozenset(self.block_resource_types))
        object.__setattr__(self, "block_url_patterns", tuple(self.block_url_patterns))
        blocked_url_patterns(self.block_resource_types, self.block_url_patterns)  # raises naming the setting


@dataclass(frozen=True, slots=True)
class FetchResult:
    """One successfully fetched page.

    Attributes:
        url: The URL requested.
        final_url: The URL after redirects; parse links against this one.
        status: HTTP status of the final response: 2xx, or 304 to a conditional request (``body`` empty:
            the stored copy the request's validators describe is still current).
        headers: Final response headers, lower-cased names.
        body: The body exactly as served (after transfer/content decoding), never re-serialised.
        html: ``body`` decoded with ``charset.decode_html``: the served HTML, the same in both modes.
        rendered_html: Browser mode only: ``page.content()`` after load, including JS-built DOM.
        fetched_at: When the fetch started (UTC).
        elapsed_s: Wall time of the whole fetch, redirects included.
        content_hash: sha256 hex of ``body``: lets storage skip unchanged pages.
        request_headers: The headers of the request that got the final response, as sent (lower-cased
            names; the browser's as Chromium reports them), for the archive's request record.
    """

    url: str
    final_url: str
    status: int
    headers: dict[str, str]
    body: bytes
    html: str
    rendered_html: str | None
    fetched_at: datetime
    elapsed_s: float
    content_hash: str
    request_headers: dict[str, str] = field(default_factory=dict)

    @property
    def not_modified(self) -> bool:
        """A 304 to a conditional request: nothing was downloaded, the stored copy stands."""
        return self.status == NOT_MODIFIED


def build_result(
    *,
    url: str,
    final_url: str,
    status: int,
    headers: dict[str, str],
    body: bytes,
    fetched_at: datetime,
    elapsed_s: float,
    rendered_html: str | None = None,
    request_headers: dict[str, str] | None = None,
) -> FetchResult:
    """Assemble a ``FetchResult``, deriving ``html`` and ``content_hash`` from ``body``."""
    return FetchResult(
        url=url,
        final_url=final_url,
        status=status,
        headers=headers,
        body=body,
        html=decode_html(body, headers.get("content-type")),
        rendered_html=rendered_html,
        fetched_at=fetched_at,
        elapsed_s=elapsed_s,
        content_hash=hashlib.sha256(body).hexdigest(),
        request_headers=request_headers or {},
    )


@dataclass(frozen=True, slots=True)
class Validators:
    """What a conditional request sends: the validators of the stored response of ``url``.

    Attributes:
        url: The URL whose response carried them (after redirects); they are sent to that URL only.
        etag: Its ``ETag``, sent back as ``If-None-Match``.
        last_modified: Its ``Last-Modified``, sent back as ``If-Modified-Since``.
        content_hash: sha256 of the stored body: a 304 reuses that copy and no other.
    """

    url: str
    etag: str | None
    last_modified: str | None
    content_hash: str

    @property
    def usable(self) -> bool:
        """True when there is something to send."""
        return bool(self.etag or self.last_modified)


def validators_of(result: FetchResult) -> Validators:
    """The validators a later conditional request for ``result``'s page sends (RFC 9110 section 8.8)."""
    return Validators(
        url=result.final_url,
        etag=(result.headers.get("etag") or "").strip() or None,
        last_modified=(result.headers.get("last-modified") or "").strip() or None,
        content_hash=result.content_hash,
    )


def conditional_headers(validators: Validators | None, url: str) -> dict[str, str]:
    """The request headers that ask ``url`` for a 304 if it still serves the stored response.

    Empty when there is no stored response, when it carried no validator, or when ``url`` is not the URL
    the validators came from (a redirect hop on the way to it): a 304 must describe the stored copy, so
    the headers go only where that copy was served. Both are sent when both are known; a server that
    supports ``If-None-Match`` ignores ``If-Modified-Since`` (RFC 9110 section 13.2.2).
    """
    if validators is None or validators.url != url:
        return {}
    headers: dict[str, str] = {}
    if validators.etag:
        headers["If-None-Match"] = validators.etag
    if validators.last_modified:
        headers["If-Modified-Since"] = validators.last_modified
    return headers


def not_modified_error(url: str) -> FetchError:
    """The permanent error for a 304 to a request without validators: there is no stored copy to reuse."""
    return fetch_error(
        ErrorKind.NOT_MODIFIED_UNASKED,
        "304 Not Modified to a request without validators: no stored copy",
        url=url,
        status=304,
    )


class Fetcher(Protocol):
    """What the crawler needs from a fetcher: ``async with fetcher: await fetcher.fetch(url)``."""

    async def __aenter__(self) -> Self: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def fetch(self, url: str) -> FetchResult:
        """Fetch ``url``; raise ``FetchError`` on any failure."""
        ...

    async def close(self) -> None:
        """Release connections/browsers; safe to call twice."""
        ...

    def stats(self) -> dict[str, int]:
        """Counters since construction (pages_fetched, bytes_fetched, ...), a copy."""
        ...


# --------------------------------------------------------------------------- classification


def fetch_error(
    kind: ErrorKind | str,
    message: str,
    *,
    url: str,
    status: int | None = None,
    retry_after: float | None = None,
) -> FetchError:
    """Build a ``FetchError``; its ``retryable`` is its kind's (a name no kind has is a permanent ``unknown``)."""
    return FetchError(kind, message, url=url, status=status, retry_after=retry_after)


#: What :func:`header_text` leaves as it is: printable ASCII but ``%``, and the space and tab a value may hold.
_HEADER_SAFE = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) != "%") + "\t"


def header_text(value: str) -> str:
    """A response header's value as ASCII that keeps its bytes: a value with a byte outside ASCII (RFC 9110's
    obs-text, Latin-1 mostly) is percent-encoded byte for byte, ``%`` included, so ``unquote_to_bytes`` gives
    back what the server sent; an ASCII value is returned as it is (pure).

    aiohttp hands a byte that is not UTF-8 over as a lone surrogate (``surrogateescape``), which neither
    PostgreSQL (``jsonb``) nor a WARC header block can hold: a page with one would fail on every fetch.
    """
    if value.isascii():
        return value
    return quote(value.encode("utf-8", "surrogateescape"), safe=_HEADER_SAFE)


def host_allowed(url: str, allowed_domains: frozenset[str]) -> bool:
    """True if ``url`` is http(s) and its host (and port, for a ``host:port`` entry) is allowed.

    An empty set allows any host by name but no IP literal or ``localhost``; the rules are
    :func:`book_assets.scraper.targets.target_allowed`. A URL whose host or port cannot be read is never
    allowed (the queue would refuse it anyway).
    """
    return target_allowed(url, allowed_domains)


def refuse_offsite(url: str, allowed_domains: frozenset[str], counters: dict[str, int]) -> None:
    """Raise the permanent ``offsite`` error for a URL outside ``allowed_domains``, counted as blocked."""
    if not host_allowed(url, allowed_domains):
        counters["offsite_blocked"] += 1
        raise fetch_error(ErrorKind.OFFSITE, "host not in allowed_domains", url=url)


def redirect_target(
    url: str, current: str, location: str, allowed_domains: frozenset[str], max_url_length: int | None = None
) -> str:
    """The URL a redirect from ``current`` sends the fetch of ``url`` to (pure).

    Raises:
        FetchError: ``bad_redirect`` when ``location`` names no http(s) URL with a readable host and port
            (``http://[::1``, ``javascript:...``, a port past 65535): the same answer every time, so
            permanent; ``offsite_redirect`` when its host is not allowed; ``url_too_long`` when it is longer
            than ``max_url_length``.
    """
    try:
        target = urljoin(current, location.strip())
        parts = urlsplit(target)
        parts.port  # noqa: B018 - raises on a malformed or out-of-range port
    except ValueError as exc:
        raise fetch_error(ErrorKind.BAD_REDIRECT, f"redirect to {location[:200]!r}: {exc}", url=url) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise fetch_error(ErrorKind.BAD_REDIRECT, f"redirect to {location[:200]!r}: not an http(s) URL", url=url)
    if not host_allowed(target, allowed_domains):
        raise fetch_error(ErrorKind.OFFSITE_REDIRECT, f"redirect to {target} outside allowed_domains", url=url)
    if max_url_length is not None and len(target) > max_url_length:
        raise fetch_error(ErrorKind.URL_TOO_LONG, url_too_long("redirect to a URL", target, max_url_length), url=url)
    return target


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP-date; None if absent/invalid.

    Negative results (a date in the past) become 0; a huge number (``999999999``, ``1e300``, ``inf``)
    comes back as it is, for :func:`clamp_retry_after` to bound.
    """
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return None if math.isnan(seconds) else max(0.0, seconds)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    now = now or datetime.now(UTC)
    return max(0.0, (when - now).total_seconds())


def clamp_retry_after(seconds: float | None, max_s: float) -> tuple[float | None, str]:
    """``seconds`` bounded by ``max_s``, and a note for the task's error when it had to be bounded."""
    if seconds is None or seconds <= max_s:
        return seconds, ""
    shown = f"{seconds:.0f}" if math.isfinite(seconds) and seconds < 1e15 else f"{seconds:g}"
    return max_s, f"; Retry-After {shown}s clamped to {max_s:g}s (retry_after_max_s)"


def error_for_status(
    url: str, status: int, headers: dict[str, str], *, retry_after_max_s: float | None = None
) -> FetchError | None:
    """The error for a final (non-redirect-followed) response status, or None for 2xx.

    5xx, 408 and 429 are retryable (the Scrapy retry set, generalised to all 5xx); 404 and other 4xx are
    permanent. Retry-After is read for 429 and 5xx (503 is the usual one) and bounded by
    ``retry_after_max_s`` (unset: the setting's default).
    """
    if 200 <= status < 300:
        return None
    max_s = default("retry_after_max_s") if retry_after_max_s is None else retry_after_max_s
    retry_after, clamped = clamp_retry_after(parse_retry_after(headers.get("retry-after")), max_s)
    if status == NOT_MODIFIED:  # a fetcher that sent validators handles its 304 before asking here
        return not_modified_error(url)
    if status == 404:
        return fetch_error(ErrorKind.HTTP_404, "not found", url=url, status=status)
    if status == 429:
        return fetch_error(
            ErrorKind.HTTP_429, f"too many requests{clamped}", url=url, status=status, retry_after=retry_after
        )
    if status == 408:
        return fetch_error(
            ErrorKind.HTTP_408, f"request timeout{clamped}", url=url, status=status, retry_after=retry_after
        )
    if 500 <= status < 600:
        return fetch_error(
            ErrorKind.HTTP_5XX, f"server error {status}{clamped}", url=url, status=status, retry_after=retry_after
        )
    if 400 <= status < 500:
        return fetch_error(ErrorKind.HTTP_4XX, f"client error {status}", url=url, status=status)
    if 300 <= status < 400:
        return fetch_error(ErrorKind.HTTP_3XX, f"redirect {status} without a usable Location", url=url, status=status)
    return fetch_error(ErrorKind.HTTP_OTHER, f"unexpected status {status}", url=url, status=status)


def truncation_error(url: str, headers: dict[str, str], received: int) -> FetchError | None:
    """A "truncated" error when Content-Length promises more bytes than the ``received`` body, else None.

    ``received`` counts the body as delivered, after content decoding. A content-encoded response's
    Content-Length is its encoded size, which the transport checks as it decodes, so it is not compared here.
    """
    if headers.get("content-encoding", "identity").strip().lower() not in ("", "identity"):
        return None
    expected = declared_length(headers)
    if expected is not None and received < expected:
        return fetch_error(ErrorKind.TRUNCATED, f"got {received} of {expected} bytes", url=url)
    return None


def too_large_error(url: str, size: int, limit: int) -> FetchError:
    """The permanent error for a body over ``max_body_bytes``."""
    return fetch_error(ErrorKind.TOO_LARGE, f"body of {size} bytes exceeds limit of {limit}", url=url)


def declared_length(headers: dict[str, str]) -> int | None:
    """Content-Length as an int, or None when absent or malformed."""
    value = headers.get("content-length")
    if value is None:
        return None
    try:
        return int(value.split(",")[0].strip())
    except ValueError:
        return None


_META_TAG = re.compile(rb"<meta\b[^>]*>", re.IGNORECASE)
_REFRESH = re.compile(rb"""http-equiv\s*=\s*["']?\s*refresh\b""", re.IGNORECASE)
_REFRESH_URL = re.compile(rb"""content\s*=\s*["']?\s*[\d.]*\s*[;,]?\s*url\s*=\s*["']?([^"'>\s]+)""", re.IGNORECASE)


def meta_refresh_target(body: bytes, base_url: str) -> str | None:
    """The absolute URL a ``<meta http-equiv="refresh" content="N; url=...">`` in ``body`` sends a browser to.

    Read from the served bytes, not from the browser's navigation events: Chromium starts a 0-second
    refresh right after the load event, so whether the fetch still sees it is a race; the markup is not.
    Only the first 64 KiB are read (the tag belongs in the head).
    """
    from urllib.parse import urljoin

    for tag in _META_TAG.findall(body[:65536]):
        if _REFRESH.search(tag):
            match = _REFRESH_URL.search(tag)
            if match:
                return urljoin(base_url, bytes(match.group(1)).decode("utf-8", "replace"))
    return None


def utc_now() -> datetime:
    """Timezone-aware current UTC time (``FetchResult.fetched_at``)."""
    return datetime.now(UTC)
