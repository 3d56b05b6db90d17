"""Recording a new catalogue's pages for its parser test (``book-pipeline site new NAME --record URL [URL]``).

Each page is fetched once, in turn, with the project's own HTTP fetcher (its User-Agent, timeouts, size limit
and charset decoding, redirects followed on the page's host only), and kept as the decoded HTML the crawl's
parsers would read: the first URL as the listing, the second as a detail page.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from book_assets.scraper.errors import FetchError
from book_assets.scraper.fetch_http import HttpFetcher
from book_assets.scraper.fetching import FetchSettings
from book_assets.settings import ConfigError

#: The files the recorded pages are saved as, in the order their URLs are given.
RECORDED_AS = ("listing.html", "detail.html")


@dataclass(frozen=True)
class Recorded:
    """One page recorded: the file it is saved as, the URL it was served from (after redirects), its HTML."""

    file: str
    url: str
    html: str


async def _fetch_each(urls: Sequence[str]) -> list[Recorded]:
    hosts = frozenset(urlsplit(url).hostname or "" for url in urls)
    async with HttpFetcher(FetchSettings(mode="http", allowed_domains=hosts)) as fetcher:
        pages = []
        for file, url in zip(RECORDED_AS, urls, strict=False):
            result = await fetcher.fetch(url)
            pages.append(Recorded(file, result.final_url, result.html))
        return pages


def record(urls: Sequence[str]) -> tuple[Recorded, ...]:
    """Fetch ``urls`` (a listing, then a detail page); a :class:`ConfigError` in one line when there are too many
    or one cannot be fetched, before anything is saved."""
    if len(urls) > len(RECORDED_AS):
        raise ConfigError(f"--record takes at most {len(RECORDED_AS)} URLs (a listing, then a detail page)")
    for url in urls:
        if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
            raise ConfigError(f"--record {url!r}: not an http(s) URL")
    try:
        return tuple(asyncio.run(_fetch_each(urls)))
    except FetchError as exc:
        raise ConfigError(f"--record {exc.url}: {exc.kind}: {exc}") from None
