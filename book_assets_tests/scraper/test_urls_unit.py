"""Canonical URLs (pure): one spelling per resource."""

from __future__ import annotations

import pytest

from book_assets.urls import canonical_url, without_query_params


@pytest.mark.parametrize(
    ("spelling", "canonical"),
    [
        ("http://books.toscrape.com/a.html", "http://books.toscrape.com/a.html"),
        ("HTTP://Books.ToScrape.COM/a.html", "http://books.toscrape.com/a.html"),
        ("http://books.toscrape.com:80/a.html", "http://books.toscrape.com/a.html"),
        ("https://books.toscrape.com:443/a.html", "https://books.toscrape.com/a.html"),
        ("https://books.toscrape.com:80/a.html", "https://books.toscrape.com:80/a.html"),
        ("http://books.toscrape.com./a.html", "http://books.toscrape.com/a.html"),
        ("http://books.toscrape.com/a.html#reviews", "http://books.toscrape.com/a.html"),
        ("http://books.toscrape.com", "http://books.toscrape.com/"),
        ("http://books.toscrape.com/x/../catalogue/./a.html", "http://books.toscrape.com/catalogue/a.html"),
        ("http://books.toscrape.com/catalogue/..", "http://books.toscrape.com/"),
        ("http://books.toscrape.com/a/b/..", "http://books.toscrape.com/a/"),
        ("http://books.toscrape.com/a.html?b=2&a=1", "http://books.toscrape.com/a.html?b=2&a=1"),
        ("  http://127.0.0.1:8800/a.html ", "http://127.0.0.1:8800/a.html"),
        ("http://[::1]:8800/a.html", "http://[::1]:8800/a.html"),
        ("http://user@Books.ToScrape.com/a.html", "http://user@books.toscrape.com/a.html"),
    ],
)
def test_spellings_of_one_url_have_one_canonical_form(spelling: str, canonical: str) -> None:
    assert canonical_url(spelling) == canonical
    assert canonical_url(canonical) == canonical  # idempotent


@pytest.mark.parametrize("url", ["http://books.toscrape.com:99999/", "http://[::1/"])
def test_a_url_with_an_unreadable_host_or_port_is_refused(url: str) -> None:
    with pytest.raises(ValueError):
        canonical_url(url)


@pytest.mark.parametrize(
    ("spelling", "canonical"),
    [
        # RFC 3986 6.2.2.1: hex digits upper-cased; 6.2.2.2: encoded unreserved characters decoded.
        ("http://books.toscrape.com/caf%c3%a9_1/index.html", "http://books.toscrape.com/caf%C3%A9_1/index.html"),
        ("http://books.toscrape.com/%61%2D%5f%7e.html", "http://books.toscrape.com/a-_~.html"),
        ("http://books.toscrape.com/a.html?q=%7e%2f", "http://books.toscrape.com/a.html?q=~%2F"),
        # Raw characters a URI cannot hold: the UTF-8 bytes, percent-encoded.
        ("http://books.toscrape.com/café_1/index.html", "http://books.toscrape.com/caf%C3%A9_1/index.html"),
        ("http://books.toscrape.com/a b.html?q=£ x", "http://books.toscrape.com/a%20b.html?q=%C2%A3%20x"),
        ("http://books.toscrape.com/\ud800.html", "http://books.toscrape.com/%ED%A0%80.html"),
        # Reserved characters and a "%" that starts no escape keep their spelling.
        ("http://books.toscrape.com/a%2Fb;c=d.html?x=1&y=%26", "http://books.toscrape.com/a%2Fb;c=d.html?x=1&y=%26"),
        ("http://books.toscrape.com/100%.html?p=5%", "http://books.toscrape.com/100%.html?p=5%"),
        # Decoding comes before dot segments: %2E%2E is "..".
        ("http://books.toscrape.com/x/%2E%2E/a.html", "http://books.toscrape.com/a.html"),
        ("http://us%65r@books.toscrape.com/", "http://user@books.toscrape.com/"),
    ],
)
def test_percent_encoding_variants_of_one_url_have_one_canonical_form(spelling: str, canonical: str) -> None:
    assert canonical_url(spelling) == canonical
    assert canonical_url(canonical) == canonical


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        ("http://h/a.html?utm_source=x&utm_Medium=y", "http://h/a.html"),
        ("http://h/a.html?page=2&fbclid=abc&UTM_CAMPAIGN=z", "http://h/a.html?page=2"),
        ("http://h/a.html?gclid&b=1", "http://h/a.html?b=1"),
        ("http://h/a.html?%75tm_term=1&b=%20", "http://h/a.html?b=%20"),
        ("http://h/a.html?b=2&a=1#top", "http://h/a.html?b=2&a=1#top"),
        ("http://h/a.html?autm_source=1&utm=2", "http://h/a.html?autm_source=1&utm=2"),
        ("http://h/a.html", "http://h/a.html"),
    ],
)
def test_tracking_parameters_are_dropped_by_name_pattern_and_the_rest_kept_as_written(url: str, kept: str) -> None:
    assert without_query_params(url, ("utm_*", "fbclid", "gclid")) == kept


def test_no_patterns_keep_every_query_parameter() -> None:
    url = "http://h/a.html?utm_source=x"
    assert without_query_params(url, ()) == url


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        ("http://shop.example.com/a?sid=1&utm_source=x&p=2", "http://shop.example.com/a?p=2"),
        ("http://Shop.Example.com./a?SID=1", "http://Shop.Example.com./a"),
        ("http://books.toscrape.com/a?sid=1&utm_source=x", "http://books.toscrape.com/a?sid=1"),
    ],
)
def test_a_pattern_with_a_host_drops_its_parameter_on_that_site_only(url: str, kept: str) -> None:
    assert without_query_params(url, ("utm_*", "*.example.com:sid")) == kept
