"""AutoThrottle in a crawl: the domain's shared interval rises under 429s and comes down after them."""

from __future__ import annotations

from typing import Any

import pytest

from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets.queue import domain_of
from book_assets.sandbox import Faults
from book_assets_tests.crawl.conftest import sandbox_config


def test_the_interval_rises_under_429s_and_comes_down_after_them(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    catalogue = sandbox_factory().catalogue
    (category,) = [c for c in catalogue.categories if c.name == "Travel"]
    travel = [b.url_path for b in catalogue.books_in(category)]  # in listing order: the order of their tasks
    # The first request for the first 6 of the 11 books is a 429 (Retry-After 0: only AutoThrottle slows
    # down); the 4 claimed first meet theirs together.
    faults = Faults(latency_s=0.02, retry_after_s=0, scripted={path: [429] for path in travel[:6]})
    server = sandbox_factory(faults=faults)
    config = sandbox_config(
        server.url, categories=("Travel",), concurrency=4, autothrottle=True, autothrottle_max_interval_s=1.0
    )
    report = crawl(database_url, config)

    assert report.counts["total"] == 11 and report.stats.errors["http_429"] == 6
    assert report.stats.max_interval_s >= 0.4  # several 429s in a row: doubled from 0.1 at least twice
    (policy,) = [p for p in report.politeness if p["domain"] == domain_of(server.url)]
    assert policy["max_interval_s"] == 1.0 and policy["floor_interval_s"] == 0.0
    # After the 429s, fast answers (20 ms) bring it back toward latency / target concurrency.
    assert policy["min_interval_s"] < report.stats.max_interval_s / 4
    assert policy["latency_s"] == pytest.approx(0.02, abs=0.05)
    assert any(line.startswith(f"autothrottle {domain_of(server.url)}: interval") for line in report.summary_lines())
