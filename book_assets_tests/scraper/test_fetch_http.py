"""HttpFetcher against a real local HTTP server: success, classified failures, redirects and limits."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from datetime import UTC
from typing import TypeVar

import pytest

from book_assets.sandbox.server import SandboxServer
from book_assets.scraper.errors import FetchError
from book_assets.scraper.fetch_http import HttpFetcher
from book_assets.scraper.fetching import FetchResult, FetchSettings
from book_assets_tests.scraper.scraper_site import POUND_PAGE, LocalSite

T = TypeVar("T")


def settings(**overrides: object) -> FetchSettings:
    base: dict[str, object] = {"mode": "http", "allowed_domains": frozenset({"127.0.0.1"}), "timeout_s": 5.0}
    base.update(overrides)
    return FetchSettings(**base)  # type: ignore[arg-type]


def run_with(fetcher_settings: FetchSettings, action: Callable[[HttpFetcher], Awaitable[T]]) -> T:
    async def main() -> T:
        async with HttpFetcher(fetcher_settings) as fetcher:
            return await action(fetcher)

    return asyncio.run(main())


def fetch(url: str, **overrides: object) -> FetchResult:
    return run_with(settings(**overrides), lambda f: f.fetch(url))


def fetch_error(url: str, **overrides: object) -> FetchError:
    with pytest.raises(FetchError) as info:
        fetch(url, **overrides)
    return info.value


def test_ok_page_returns_served_bytes_decoded_as_utf8(local_site: LocalSite) -> None:
    result = fetch(local_site.url("/ok"))
    assert result.status == 200
    assert result.url == result.final_url == local_site.url("/ok")
    assert result.body == POUND_PAGE
    assert "Price £51.77" in result.html and "Â£" not in result.html
    assert result.rendered_html is None
    assert result.content_hash == hashlib.sha256(POUND_PAGE).hexdigest()
    assert result.headers["content-type"] == "text/html"
    assert result.fetched_at.tzinfo == UTC
    assert result.elapsed_s >= 0


def test_user_agent_is_sent(local_site: LocalSite) -> None:
    fetch(local_site.url("/ok"), user_agent="book-pipeline-test/1")
    assert local_site.server.user_agents == ["book-pipeline-test/1"]


def test_404_is_permanent(local_site: LocalSite) -> None:
    error = fetch_error(local_site.url("/404"))
    assert (error.kind, error.retryable, error.status) == ("http_404", False, 404)


@pytest.mark.parametrize(("path", "retry_after"), [("/500", None), ("/503", 7.0)])
def test_server_errors_are_retryable(local_site: LocalSite, path: str, retry_after: float | None) -> None:
    error = fetch_error(local_site.url(path))
    assert (error.kind, error.retryable, error.retry_after) == ("http_5xx", True, retry_after)


def test_429_is_retryable_with_retry_after(local_site: LocalSite) -> None:
    error = fetch_error(local_site.url("/429"))
    assert (error.kind, error.retryable, error.retry_after, error.status) == ("http_429", True, 3.0, 429)


def test_truncated_body_is_retryable(local_site: LocalSite) -> None:
    error = fetch_error(local_site.url("/truncated"))
    assert (error.kind, error.retryable) == ("truncated", True)


def test_slow_response_times_out_retryably(local_site: LocalSite) -> None:
    error = fetch_error(local_site.url("/slow"), timeout_s=0.5)
    assert (error.kind, error.retryable) == ("timeout", True)


def test_connection_refused_is_retryable(local_site: LocalSite) -> None:
    url = local_site.url("/ok")
    local_site.server.shutdown()
    local_site.server.server_close()
    error = fetch_error(url)
    assert (error.kind, error.retryable) == ("connection", True)


def test_offsite_redirect_is_refused_without_fetching_target(local_site: LocalSite) -> None:
    error = fetch_error(local_site.url("/offsite"))
    assert (error.kind, error.retryable) == ("offsite_redirect", False)
    assert local_site.paths_hit() == ["/offsite"]


def test_offsite_url_is_never_requested(local_site: LocalSite) -> None:
    error = fetch_error(f"http://localhost:{local_site.port}/ok")
    assert (error.kind, error.retryable) == ("offsite", False)
    assert local_site.hits == []


def test_on_domain_redirects_are_followed_to_final_url(local_site: LocalSite) -> None:
    result = fetch(local_site.url("/chain/3"))
    assert result.url == local_site.url("/chain/3")
    assert result.final_url == local_site.url("/ok")
    assert result.body == POUND_PAGE


def test_redirect_loop_is_permanent(local_site: LocalSite) -> None:
    error = fetch_error(local_site.url("/loop"), max_redirects=10)
    assert (error.kind, error.retryable) == ("redirect_loop", False)
    assert local_site.paths_hit().count("/loop") == 11


@pytest.mark.parametrize("path", ["/bad-location", "/bad-port-location", "/javascript-location"])
def test_a_redirect_to_a_location_that_is_no_http_url_fails_for_good_as_bad_redirect(
    local_site: LocalSite, path: str
) -> None:
    error = fetch_error(local_site.url(path))
    assert (error.kind, error.retryable, error.status) == ("bad_redirect", False, 302)
    assert local_site.paths_hit() == [path]


def test_redirect_chain_longer_than_limit_is_a_loop(local_site: LocalSite) -> None:
    error = fetch_error(local_site.url("/chain/5"), max_redirects=3)
    assert error.kind == "redirect_loop"


@pytest.mark.parametrize("path", ["/big", "/big-unannounced"])
def test_too_large_body_is_permanent(local_site: LocalSite, path: str) -> None:
    error = fetch_error(local_site.url(path), max_body_bytes=1024 * 1024)
    assert (error.kind, error.retryable) == ("too_large", False)


def test_a_decompression_bomb_fails_as_too_large_on_its_decoded_size(local_site: LocalSite) -> None:
    error = fetch_error(local_site.url("/bomb"))
    assert (error.kind, error.retryable) == ("too_large", False)
    assert "exceeds limit of 10485760" in str(error)


def test_concurrent_fetches_share_one_client_and_count_stats(local_site: LocalSite) -> None:
    async def many(fetcher: HttpFetcher) -> dict[str, int]:
        results = await asyncio.gather(*(fetcher.fetch(local_site.url("/ok")) for _ in range(8)))
        assert all(r.body == POUND_PAGE for r in results)
        with pytest.raises(FetchError):
            await fetcher.fetch(local_site.url("/404"))
        return fetcher.stats()

    stats = run_with(settings(concurrency=3), many)
    assert stats["pages_fetched"] == 8
    assert stats["bytes_fetched"] == 8 * len(POUND_PAGE)
    assert stats["errors"] == 1


def test_close_twice_is_safe_and_releases_the_connection_pool() -> None:
    async def main() -> tuple[bool, bool]:
        fetcher = HttpFetcher(settings())
        async with fetcher:
            opened = fetcher._session is not None
        await fetcher.close()
        await fetcher.close()
        return opened, fetcher._session is None

    assert asyncio.run(main()) == (True, True)


def test_a_proxy_from_the_environment_carries_the_requests_and_no_proxy_bypasses_it(
    sandbox: SandboxServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sandbox answers absolute-form requests as a forward proxy would: a page of a host that does not
    # resolve can only arrive through it.
    monkeypatch.setenv("HTTP_PROXY", sandbox.url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    before = sandbox.stats().hits.get("/index.html", 0)
    proxied = fetch("http://books.invalid/index.html", allowed_domains=frozenset({"books.invalid", "127.0.0.1"}))
    direct = fetch(sandbox.url_for("/index.html"), allowed_domains=frozenset({"books.invalid", "127.0.0.1"}))

    assert proxied.status == direct.status == 200
    assert proxied.body == direct.body
    assert sandbox.stats().hits["/index.html"] - before == 2


def test_no_proxy_is_used_when_the_environment_names_none(
    sandbox: SandboxServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    before = sandbox.stats().total_requests
    error = fetch_error("http://books.invalid/index.html", allowed_domains=frozenset({"books.invalid"}))

    assert error.kind.retryable  # the host does not resolve: a connection error, not a proxied page
    assert sandbox.stats().total_requests == before
