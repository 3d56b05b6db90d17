"""Helpers for crawl tests: a CrawlConfig pointed at a sandbox, and ground-truth comparison."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from book_assets.crawl.config import CrawlConfig
from book_assets.db.connection import Database
from book_assets.sandbox.truth import stored_vs_truth
from book_assets.settings import load_settings

__all__ = ["books_rows", "sandbox_config", "stored_vs_truth"]


def sandbox_config(base_url: str, **overrides: Any) -> CrawlConfig:
    """A crawl of the sandbox: politeness off (it is ours), short back-offs, one worker unless asked.

    ``overrides`` are settings (``mode`` is short for ``fetch_mode``), validated as the CLI's are.
    """
    settings: dict[str, Any] = {
        "base_url": base_url,
        "fetch_mode": overrides.pop("mode", "http"),
        "concurrency": 8,
        "min_interval_s": 0.0,
        "workers": 1,
        "backoff_base_s": 0.05,
        "backoff_max_s": 0.5,
        "lease_s": 30.0,
    }
    return CrawlConfig.from_settings(load_settings(**{**settings, **overrides}))


@pytest.fixture
def books_rows(db: Database) -> Callable[[], list[dict[str, Any]]]:
    def _rows() -> list[dict[str, Any]]:
        return db.query("SELECT * FROM books ORDER BY id")

    return _rows
