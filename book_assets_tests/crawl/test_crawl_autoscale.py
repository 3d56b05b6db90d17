"""A crawl without ``--concurrency`` autoscales its pages in flight within the configured bounds."""

from __future__ import annotations

from typing import Any

from book_assets.crawl.config import CrawlConfig
from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets.settings import load_settings


def test_an_unpinned_crawl_starts_at_the_minimum_and_never_exceeds_the_maximum(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    server = sandbox_factory()
    settings = load_settings(
        fetch_mode="http", min_concurrency=2, max_concurrency=3, base_url=server.url, workers=1, categories=("Travel",)
    )
    config = CrawlConfig.from_settings(settings)
    server.reset_stats()
    report = crawl(database_url, config)
    assert report.counts["total"] == 11
    assert report.stats.concurrency[0] == 2 and max(report.stats.concurrency) <= 3
    assert server.stats().max_concurrency <= 3
