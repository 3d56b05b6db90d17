"""Canonical URLs (pure): one spelling per resource."""

from __future__ import annotations

import pytest

from book_assets.urls import canonical_url


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
