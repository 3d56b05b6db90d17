"""Plain-HTTP fetcher on aiohttp: fast, keep-alive, no JavaScript.

aiohttp rather than httpx: over sandbox book pages on 8 connections, httpx (whose connection pool checks
every pooled socket on each request) spends several times aiohttp's client CPU per page
(``benchmarks/browser_cpu.py --runs http``), and the client's CPU is taken from the crawl's parsing and
storing.

Redirects are followed by hand, one hop at a time, so each target's host is checked against
``allowed_domains`` *before* it is requested (automatic redirects would fetch it first).
Bodies are streamed so an oversized page is cut off at ``max_body_bytes`` instead of filling memory.
Given the stored response's ``Validators``, a fetch is conditional: a 304 comes back as a ``FetchResult``
with ``not_modified`` set and no body (see ``fetching.conditional_headers``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Self

import aiohttp
from aiohttp.helpers import basicauth_from_netrc, get_env_proxy_for_url, netrc_from_env
from yarl import URL

from book_assets.scraper.errors import ErrorKind, FetchError
from book_assets.scraper.fetching import (
    NOT_MODIFIED,
    REDIRECT_STATUSES,
    FetchResult,
    FetchSettings,
    Validators,
    build_result,
    conditional_headers,
    declared_length,
    error_for_status,
    fetch_error,
    header_text,
    redirect_target,
    refuse_offsite,
    too_large_error,
    truncation_error,
    utc_now,
)

#: Bytes read from the body per step.
CHUNK_BYTES = 64 * 1024


class EnvironmentRoutes:
    """The proxy (``HTTP_PROXY``, ``HTTPS_PROXY``, ``NO_PROXY``) and ``~/.netrc`` credentials the environment
    gives each origin, read once per origin with aiohttp's own rules.

    Why not ``trust_env=True``: aiohttp then parses the environment and the netrc file again for every
    request, each in a thread of its own (two executor hops per page), about a quarter of the client's CPU
    on the sandbox (``benchmarks/browser_cpu.py --runs http``). The environment of a crawl does not change
    while it runs.
    """

    def __init__(self) -> None:
        self._options: dict[tuple[str, str | None, int | None], dict[str, Any]] = {}

    def options(self, url: URL) -> dict[str, Any]:
        """Keyword arguments for one request to ``url``: ``proxy``, ``proxy_auth`` and ``auth`` as they apply."""
        origin = (url.scheme, url.host, url.port)
        found = self._options.get(origin)
        if found is None:
            found = self._options[origin] = self._read(url)
        return found

    @staticmethod
    def _read(url: URL) -> dict[str, Any]:
        options: dict[str, Any] = {}
        with contextlib.suppress(LookupError):  # no proxy for this scheme, or NO_PROXY names the host
            options["proxy"], options["proxy_auth"] = get_env_proxy_for_url(url)
        netrc = netrc_from_env()
        if netrc is not None and url.host is not None and url.user is None:
            with contextlib.suppress(LookupError):
                options["auth"] = basicauth_from_netrc(netrc, url.host)
        return options


class HttpFetcher:
    """Fetch pages with aiohttp; see ``fetching.Fetcher`` for the contract.

    Usage::

        async with HttpFetcher(FetchSettings(mode="http")) as fetcher:
            result = await fetcher.fetch("https://example.com/")
    """

    def __init__(self, settings: FetchSettings | None = None) -> None:
        self.settings = settings or FetchSettings(mode="http")
        self._session: aiohttp.ClientSession | None = None
        self._routes = EnvironmentRoutes()
        self._semaphore = asyncio.Semaphore(self.settings.concurrency)
        self._counters: dict[str, int] = {
            "pages_fetched": 0,
            "bytes_fetched": 0,
            "requests": 0,
            "redirects_followed": 0,
            "errors": 0,
            "offsite_blocked": 0,
            "not_modified": 0,
        }

    async def __aenter__(self) -> Self:
        self._ensure_session()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def stats(self) -> dict[str, int]:
        """Counters since construction (a copy): pages_fetched, bytes_fetched, requests, errors, ..."""
        return dict(self._counters)

    def _ensure_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            timeout_s = self.settings.timeout_s
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.settings.concurrency),
                timeout=aiohttp.ClientTimeout(total=None, connect=timeout_s, sock_read=timeout_s),
                headers={"User-Agent": self.settings.user_agent},
                # Cookies a site sets are sent back to it, on IP-addressed hosts too (as a browser would).
                cookie_jar=aiohttp.CookieJar(unsafe=True),
                trust_env=False,  # proxies and netrc credentials come from EnvironmentRoutes, once per origin
            )
        return self._session

    async def close(self) -> None:
        """Close the connection pool; safe to call twice."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def fetch(
        self, url: str, validators: Validators | None = None, *, first_bytes: int | None = None
    ) -> FetchResult:
        """Fetch ``url`` following on-domain redirects; raise a classified ``FetchError`` on failure.

        With ``validators`` (of the stored response) the request is conditional, and a 304 is returned as
        a result whose ``not_modified`` is set; without them a 304 is a ``not_modified_unasked`` error.
        With ``first_bytes`` only that many bytes of the body are read and the rest is ignored, where
        ``max_body_bytes`` would fail the fetch (robots.txt: RFC 9309 2.5 parses the first 500 KiB).
        """
        try:
            refuse_offsite(url, self.settings.allowed_domains, self._counters)
            async with self._semaphore:
                started, fetched_at = time.monotonic(), utc_now()
                try:
                    async with asyncio.timeout(self.settings.timeout_s):
                        result = await self._follow(url, started, fetched_at, validators, first_bytes)
                except TimeoutError as exc:
                    raise fetch_error(
                        ErrorKind.TIMEOUT, f"no complete response in {self.settings.timeout_s}s", url=url
                    ) from exc
        except FetchError:
            self._counters["errors"] += 1
            raise
        self._counters["pages_fetched"] += 1
        self._counters["bytes_fetched"] += len(result.body)
        self._counters["not_modified"] += result.not_modified
        return result

    async def _follow(
        self, url: str, started: float, fetched_at: datetime, validators: Validators | None, first_bytes: int | None
    ) -> FetchResult:
        current = url
        for _ in range(self.settings.max_redirects + 1):
            conditional = conditional_headers(validators, current)
            status, headers, body, sent = await self._get(current, conditional, first_bytes)
            location = headers.get("location")
            if status in REDIRECT_STATUSES and location:
                try:
                    target = redirect_target(
                        url, current, location, self.settings.allowed_domains, self.settings.max_url_length
                    )
                except FetchError as exc:
                    if exc.kind is ErrorKind.OFFSITE_REDIRECT:
                        self._counters["offsite_blocked"] += 1
                    exc.status = status
                    raise
                self._counters["redirects_followed"] += 1
                current = target
                continue
            if status == NOT_MODIFIED and conditional:
                return build_result(
                    url=url,
                    final_url=current,
                    status=status,
                    headers=headers,
                    body=b"",
                    fetched_at=fetched_at,
                    elapsed_s=time.monotonic() - started,
                    request_headers=sent,
                )
            error = error_for_status(current, status, headers, retry_after_max_s=self.settings.retry_after_max_s)
            if error is not None:
                raise error
            return build_result(
                url=url,
                final_url=current,
                status=status,
                headers=headers,
                body=body,
                fetched_at=fetched_at,
                elapsed_s=time.monotonic() - started,
                request_headers=sent,
            )
        raise fetch_error(ErrorKind.REDIRECT_LOOP, f"more than {self.settings.max_redirects} redirects", url=url)

    async def _get(
        self, url: str, extra_headers: dict[str, str] | None = None, first_bytes: int | None = None
    ) -> tuple[int, dict[str, str], bytes, dict[str, str]]:
        """One GET without following redirects: (status, lower-cased headers, body, request headers sent).

        Error bodies and redirect bodies are not read: nothing uses them, and skipping them keeps a
        misbehaving server from streaming megabytes at us. With ``first_bytes`` the body is cut there.
        """
        session = self._ensure_session()
        limit = self.settings.max_body_bytes if first_bytes is None else first_bytes
        self._counters["requests"] += 1
        try:
            target = _request_url(url)
            options = self._routes.options(target)
            async with session.get(target, headers=extra_headers, allow_redirects=False, **options) as response:
                headers = _lower(response.headers.items())
                sent = _lower(response.request_info.headers.items())
                status = response.status
                if not 200 <= status < 300:
                    return status, headers, b"", sent
                declared = declared_length(headers)
                if declared is not None and declared > limit and first_bytes is None:
                    raise too_large_error(url, declared, limit)
                chunks: list[bytes] = []
                size = 0
                try:
                    async for chunk in response.content.iter_chunked(CHUNK_BYTES):
                        if size + len(chunk) > limit:
                            if first_bytes is None:
                                raise too_large_error(url, size + len(chunk), limit)
                            chunks.append(chunk[: limit - size])
                            return status, headers, b"".join(chunks), sent
                        size += len(chunk)
                        chunks.append(chunk)
                except aiohttp.ClientError as exc:
                    # The peer closed (or reset) before Content-Length or the last chunk arrived.
                    raise fetch_error(
                        ErrorKind.TRUNCATED, f"body cut short: {_describe(exc)}", url=url, status=status
                    ) from exc
                truncated = truncation_error(url, headers, size)
                if truncated is not None:
                    raise truncated
                return status, headers, b"".join(chunks), sent
        except FetchError:
            raise
        except (aiohttp.ServerTimeoutError, aiohttp.ConnectionTimeoutError, aiohttp.SocketTimeoutError) as exc:
            raise fetch_error(ErrorKind.TIMEOUT, _describe(exc), url=url) from exc
        except (aiohttp.InvalidURL, aiohttp.NonHttpUrlClientError, ValueError) as exc:
            raise fetch_error(ErrorKind.BAD_URL, _describe(exc), url=url) from exc
        except aiohttp.ClientError as exc:
            raise fetch_error(ErrorKind.CONNECTION, _describe(exc), url=url) from exc


def _request_url(url: str) -> URL:
    """``url`` as requested: sent as written when it is already percent-encoded ASCII, else encoded."""
    return URL(url, encoded=url.isascii() and " " not in url)


def _lower(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Headers by lower-cased name, values kept as ASCII (:func:`header_text`); a repeated header's values
    joined with ", " (RFC 9110, 5.3)."""
    headers: dict[str, str] = {}
    for name, raw in items:
        key, value = header_text(name.lower()), header_text(raw)
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return headers


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
