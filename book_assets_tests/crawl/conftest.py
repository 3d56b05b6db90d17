"""Helpers for crawl tests: a CrawlConfig pointed at a sandbox, and ground-truth comparison."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from book_assets.crawl.config import CrawlConfig
from book_assets.settings import load_settings


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


def stored_vs_truth(rows: list[dict[str, Any]], truth: dict[str, Any], base_url: str) -> list[str]:
    """Every difference between stored rows and the sandbox's ground truth, as readable lines."""
    problems: list[str] = []
    by_url = {r["url"]: r for r in rows}
    expected_urls = {base_url.rstrip("/") + "/" + path.lstrip("/") for path in truth}
    for missing in sorted(expected_urls - set(by_url))[:10]:
        problems.append(f"missing {missing}")
    for extra in sorted(set(by_url) - expected_urls)[:10]:
        problems.append(f"unexpected {extra}")
    for path, book in truth.items():
        row = by_url.get(base_url.rstrip("/") + "/" + path.lstrip("/"))
        if row is None:
            continue
        expected = {
            "title": book.title,
            "category": book.category,
            "price_amount": book.price,
            "price_excl_tax": book.price_excl_tax,
            "price_incl_tax": book.price_incl_tax,
            "tax": book.tax,
            "rating_value": book.rating,
            "upc": book.upc,
            "product_type": book.product_type,
            "availability": book.availability,
            "stock": book.stock,
            "num_reviews": book.num_reviews,
            "description": book.description,
            "price": f"£{book.price:.2f}",
        }
        for key, value in expected.items():
            got = row[key]
            if isinstance(value, Decimal):
                got = Decimal(str(got)) if got is not None else None
            if got != value:
                problems.append(f"{path} {key}: stored {got!r}, served {value!r}")
    return problems


@pytest.fixture
def books_rows(db: Any) -> Any:
    def _rows() -> list[dict[str, Any]]:
        return db.query("SELECT * FROM books ORDER BY id")

    return _rows
