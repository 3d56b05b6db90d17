"""Plain-HTTP fetcher on httpx: fast, keep-alive, no JavaScript.

Redirects are followed by hand, one hop at a time, so each target's host is checked against
``allowed_domains`` *before* it is requested (httpx's own ``follow_redirects`` would fetch it first).
Bodies are streamed so an oversized page is cut off at ``max_body_bytes`` instead of filling memory.
Given the stored response's ``Validators``, a fetch is conditional: a 304 comes back as a ``FetchResult``
with ``not_modified`` set and no body (see ``fetching.conditional_headers``).
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Self
from urllib.parse import urljoin

import httpx

from book_assets.scraper.errors import FetchError
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
    host_allowed,
    too_large_error,
    truncation_error,
    utc_now,
)


class HttpFetcher:
    """Fetch pages with httpx; see ``fetching.Fetcher`` for the contract.

    Usage::

        async with HttpFetcher(FetchSettings(mode="http")) as fetcher:
            result = await fetcher.fetch("https://books.toscrape.com/")
    """

    def __init__(self, settings: FetchSettings | None = None) -> None:
        self.settings = settings or FetchSettings(mode="http")
        self._client: httpx.AsyncClient | None = None
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
        self._ensure_client()
        await _load_network_backend()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def stats(self) -> dict[str, int]:
        """Counters since construction (a copy): pages_fetched, bytes_fetched, requests, errors, ..."""
        return dict(self._counters)

    def _ensure_client(self) -> httpx.AsyncClient:
        if self._client is None:
            limits = httpx.Limits(
                max_connections=self.settings.concurrency,
                max_keepalive_connections=self.settings.concurrency,
            )
            self._client = httpx.AsyncClient(
                follow_redirects=False,
                timeout=httpx.Timeout(self.settings.timeout_s),
                limits=limits,
                headers={"User-Agent": self.settings.user_agent},
            )
        return self._client

    async def close(self) -> None:
        """Close the connection pool; safe to call twice."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def fetch(self, url: str, validators: Validators | None = None) -> FetchResult:
        """Fetch ``url`` following on-domain redirects; raise a classified ``FetchError`` on failure.

        With ``validators`` (of the stored response) the request is conditional, and a 304 is returned as
        a result whose ``not_modified`` is set; without them a 304 is a ``not_modified_unasked`` error.
        """
        try:
            if not host_allowed(url, self.settings.allowed_domains):
                self._counters["offsite_blocked"] += 1
                raise fetch_error("offsite", "host not in allowed_domains", url=url)
            async with self._semaphore:
                started, fetched_at = time.monotonic(), utc_now()
                try:
                    async with asyncio.timeout(self.settings.timeout_s):
                        result = await self._follow(url, started, fetched_at, validators)
                except TimeoutError as exc:
                    raise fetch_error(
                        "timeout", f"no complete response in {self.settings.timeout_s}s", url=url
                    ) from exc
        except FetchError:
            self._counters["errors"] += 1
            raise
        self._counters["pages_fetched"] += 1
        self._counters["bytes_fetched"] += len(result.body)
        self._counters["not_modified"] += result.not_modified
        return result

    async def _follow(
        self, url: str, started: float, fetched_at: datetime, validators: Validators | None
    ) -> FetchResult:
        current = url
        for _ in range(self.settings.max_redirects + 1):
            conditional = conditional_headers(validators, current)
            status, headers, body, sent = await self._get(current, conditional)
            location = headers.get("location")
            if status in REDIRECT_STATUSES and location:
                target = urljoin(current, location.strip())
                if not host_allowed(target, self.settings.allowed_domains):
                    self._counters["offsite_blocked"] += 1
                    raise fetch_error(
                        "offsite_redirect", f"redirect to {target} outside allowed_domains", url=url, status=status
                    )
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
        raise fetch_error("redirect_loop", f"more than {self.settings.max_redirects} redirects", url=url)

    async def _get(
        self, url: str, extra_headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes, dict[str, str]]:
        """One GET without following redirects: (status, lower-cased headers, body, request headers sent).

        Error bodies and redirect bodies are not read: nothing uses them, and skipping them keeps a
        misbehaving server from streaming megabytes at us.
        """
        client = self._ensure_client()
        limit = self.settings.max_body_bytes
        self._counters["requests"] += 1
        try:
            async with client.stream("GET", url, headers=extra_headers) as response:
                headers = {k.lower(): v for k, v in response.headers.items()}
                sent = {k.lower(): v for k, v in response.request.headers.items()}
                status = response.status_code
                if not 200 <= status < 300:
                    return status, headers, b"", sent
                declared = declared_length(headers)
                if declared is not None and declared > limit:
                    raise too_large_error(url, declared, limit)
                chunks: list[bytes] = []
                size = 0
                try:
                    async for chunk in response.aiter_bytes():
                        size += len(chunk)
                        if size > limit:
                            raise too_large_error(url, size, limit)
                        chunks.append(chunk)
                except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
                    # httpx raises when the peer closes before Content-Length / the last chunk arrived.
                    raise fetch_error("truncated", f"body cut short: {exc}", url=url, status=status) from exc
                truncated = truncation_error(url, headers, response.num_bytes_downloaded)
                if truncated is not None:
                    raise truncated
                return status, headers, b"".join(chunks), sent
        except FetchError:
            raise
        except httpx.TimeoutException as exc:
            raise fetch_error("timeout", f"{type(exc).__name__}: {exc}", url=url) from exc
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise fetch_error("bad_url", str(exc), url=url) from exc
        except httpx.TransportError as exc:
            raise fetch_error("connection", f"{type(exc).__name__}: {exc}", url=url) from exc


async def _load_network_backend() -> None:
    """Import what httpx loads on its first connection (httpcore's anyio backend), before any request waits.

    Loaded lazily, it made a worker's first request leave 0.1-0.4 s after its politeness slot on a loaded
    host, and so closer than the interval to the next slot's request.
    """
    import anyio
    import anyio.lowlevel
    import anyio.streams.tls  # loaded here rather than on the first connection

    await anyio.lowlevel.checkpoint()  # loads anyio's asyncio backend
