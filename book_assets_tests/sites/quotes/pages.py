"""The quotes.toscrape.com page fixtures (book_assets_tests/fixtures/quotes_parse/README.md)."""

from __future__ import annotations

from book_assets.settings import PROJECT_ROOT

FIXTURES = PROJECT_ROOT / "book_assets_tests" / "fixtures" / "quotes_parse"
SITE = "https://quotes.toscrape.com/"
EINSTEIN = SITE + "author/albert-einstein/"


def fixture(name: str) -> str:
    """The HTML of one fixture page."""
    return (FIXTURES / name).read_text(encoding="utf-8")
