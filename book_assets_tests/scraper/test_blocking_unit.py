"""Translating the block settings into the URL patterns Chromium matches itself (pure functions)."""

from __future__ import annotations

import fnmatch
import re

import pytest

from book_assets.scraper.blocking import blocked_url_patterns, regex_to_patterns, resource_type_patterns
from book_assets.scraper.fetching import FetchSettings
from book_assets.settings import load_settings


def _blocked(patterns: list[str], url: str) -> bool:
    # Chromium's wildcard: "*" is any run of characters and the pattern covers the whole URL (as fnmatch).
    return any(fnmatch.fnmatchcase(url, p.replace("[", "[[]")) for p in patterns)


@pytest.mark.parametrize(
    "regex",
    [r"google-analytics\.com", r"facebook\.(net|com)", r"/ads?/", r"doubleclick\.net", r"adservice\.google\."],
)
def test_translated_patterns_block_exactly_the_urls_the_regex_finds(regex: str) -> None:
    urls = [
        "https://www.google-analytics.com/analytics.js",
        "https://connect.facebook.net/en_US/sdk.js",
        "https://facebook.com/tr?id=1",
        "https://books.toscrape.com/ads/banner.js",
        "https://books.toscrape.com/ad/x.js",
        "https://books.toscrape.com/adsx/x.js",
        "https://ad.doubleclick.net/x",
        "https://adservice.google.com/x",
        "https://books.toscrape.com/catalogue/a-light-in-the-attic_1000/index.html",
    ]
    patterns = regex_to_patterns(regex)
    for url in urls:
        assert _blocked(patterns, url) == bool(re.search(regex, url)), (regex, url, patterns)


@pytest.mark.parametrize("regex", [r"ads.*", r"a+", r"^https", r"x$", r"[ab]", r"\d+", r"(a|(b))", ""])
def test_a_regex_chromium_cannot_match_is_refused_naming_the_setting(regex: str) -> None:
    with pytest.raises(ValueError, match="block_url_patterns"):
        regex_to_patterns(regex)


def test_resource_types_block_their_extensions_with_and_without_query() -> None:
    patterns = resource_type_patterns({"image", "stylesheet"})
    assert _blocked(patterns, "http://127.0.0.1:8800/media/cache/2c/da/2cdad67c.jpg")
    assert _blocked(patterns, "http://127.0.0.1:8800/static/oscar/css/styles.css?v=2")
    assert not _blocked(patterns, "http://127.0.0.1:8800/static/oscar/js/oscar/ui.js")
    assert not _blocked(patterns, "http://127.0.0.1:8800/catalogue/page-2.html")


def test_an_unknown_resource_type_is_refused_naming_the_setting() -> None:
    with pytest.raises(ValueError, match="block_resource_types"):
        FetchSettings(block_resource_types=frozenset({"xhr"}))


def test_no_allowed_hosts_adds_internal_ipv6_literals() -> None:
    patterns = blocked_url_patterns((), (), internal_ipv6=True)
    assert _blocked(patterns, "http://[::1]:8080/secret")
    assert _blocked(patterns, "http://[fd00::5]/x")
    assert not _blocked(patterns, "http://[2001:db8::1]/x")


def test_the_project_defaults_translate() -> None:
    settings = load_settings()
    assert blocked_url_patterns(settings.block_resource_types, settings.block_url_patterns)
    assert blocked_url_patterns(FetchSettings().block_resource_types, FetchSettings().block_url_patterns)
