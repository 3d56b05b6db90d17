"""HttpFetcher's conditional requests against the sandbox: a 304 is a result without a body."""

from __future__ import annotations

import asyncio

import pytest

from book_assets.sandbox.faults import Faults
from book_assets.sandbox.server import SandboxServer
from book_assets.scraper.errors import FetchError
from book_assets.scraper.fetch_http import HttpFetcher
from book_assets.scraper.fetching import FetchResult, FetchSettings, Validators, validators_of


def _fetch(url: str, validators: Validators | None = None) -> tuple[FetchResult, dict[str, int]]:
    async def main() -> tuple[FetchResult, dict[str, int]]:
        settings = FetchSettings(mode="http", allowed_domains=frozenset({"127.0.0.1"}), timeout_s=5.0)
        async with HttpFetcher(settings) as fetcher:
            return await fetcher.fetch(url, validators), fetcher.stats()

    return asyncio.run(main())


def test_a_fetch_with_the_stored_validators_gets_a_304_without_a_body(sandbox_factory: object) -> None:
    site: SandboxServer = sandbox_factory()  # type: ignore[operator]
    url = site.url_for(site.catalogue.books[0].url_path)
    first, _ = _fetch(url)
    assert first.status == 200 and first.headers["etag"] and first.headers["last-modified"]

    again, stats = _fetch(url, validators_of(first))

    assert again.not_modified and again.body == b"" and again.final_url == url
    assert stats["not_modified"] == 1 and stats["bytes_fetched"] == 0
    assert site.stats().responses[site.catalogue.books[0].url_path] == [200, 304]


def test_validators_of_another_url_are_not_sent(sandbox_factory: object) -> None:
    site: SandboxServer = sandbox_factory()  # type: ignore[operator]
    first, _ = _fetch(site.url_for("/index.html"))
    other = site.url_for(site.catalogue.books[0].url_path)

    again, _ = _fetch(other, validators_of(first))

    assert again.status == 200 and again.body


def test_a_304_without_validators_is_an_error(sandbox_factory: object) -> None:
    site: SandboxServer = sandbox_factory(faults=Faults(scripted={"/index.html": [304]}))  # type: ignore[operator]
    with pytest.raises(FetchError) as info:
        _fetch(site.url_for("/index.html"))
    assert info.value.kind == "not_modified_unasked" and not info.value.retryable
