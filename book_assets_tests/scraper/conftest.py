"""Shared fixtures for scraper tests: the saved real-site pages and a local HTTP server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from book_assets_tests.scraper.scraper_site import LocalSite, serve

REAL_SITE = Path(__file__).resolve().parents[1] / "fixtures" / "real-site"  # vendored copy of shared/fixtures
SITE = "https://books.toscrape.com/"


@pytest.fixture(scope="session")
def real_site() -> Path:
    """Directory of saved live-site pages (vendored with the tests, so never absent)."""
    assert (REAL_SITE / "index.html").exists(), f"real-site fixtures missing at {REAL_SITE}"
    return REAL_SITE


@pytest.fixture
def local_site() -> Iterator[LocalSite]:
    """A fresh local HTTP server per test (see ``scraper_site``)."""
    with serve() as site:
        yield site
