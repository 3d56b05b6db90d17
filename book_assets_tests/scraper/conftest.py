"""Shared fixtures for scraper tests: paths to the real-site pages."""

from __future__ import annotations

from pathlib import Path

import pytest

REAL_SITE = Path("/work/shared/fixtures/real-site")
SITE = "https://books.toscrape.com/"


@pytest.fixture(scope="session")
def real_site() -> Path:
    """Directory of saved live-site pages; skips (rather than errors) where the fixtures are absent."""
    if not (REAL_SITE / "index.html").exists():
        pytest.skip(f"real-site fixtures not found at {REAL_SITE}")
    return REAL_SITE
