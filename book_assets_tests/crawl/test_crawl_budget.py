"""Budgeted, weighted crawls: each category gets exactly its weight's quota of the deep budget."""

from __future__ import annotations

from collections import Counter
from typing import Any

from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets_tests.crawl.conftest import sandbox_config


def test_deep_budget_is_split_across_categories_by_weight_and_the_rest_stays_pending(
    db: Database, database_url: str, sandbox: Any
) -> None:
    weights = {"Travel": 3.0, "Mystery": 2.0, "Sequential Art": 0.0}
    config = sandbox_config(sandbox.url, mode="http", weights={**weights, "*": 1.0}, deep_budget=200)
    report = crawl(database_url, config)
    assert report.counts["total"] == 200 == sum(report.quotas.values())
    stored = {r["category"]: r["n"] for r in db.query("SELECT category, count(*) AS n FROM books GROUP BY 1")}
    assert stored == {k: v for k, v in report.quotas.items() if v}
    assert "Sequential Art" not in stored
    assert report.quotas["Travel"] == 11  # 3/52 of 200 is 11.5, capped by the 11 books that exist
    assert report.quotas["Mystery"] > report.quotas["Default"] > 0
    # Checked against the site, not the code's own quotas: every category gets one common share per unit of
    # weight (give or take the one book of rounding), unless it has fewer books than that share.
    exist = Counter(book.category for book in sandbox.catalogue.ground_truth().values())
    weight = {c: weights.get(c, 1.0) for c in exist}
    uncapped = [stored.get(c, 0) / weight[c] for c in exist if weight[c] > 0 and stored.get(c, 0) < exist[c]]
    assert max(uncapped) - min(uncapped) <= 1.0, sorted(uncapped)
    capped = [c for c in exist if weight[c] > 0 and stored.get(c, 0) == exist[c]]
    assert all(exist[c] / weight[c] <= max(uncapped) + 1 for c in capped)
    assert sum(stored.values()) == 200
    pending = db.query("SELECT count(*) AS n FROM tasks WHERE task_type = 'detail' AND status = 'pending'")[0]["n"]
    assert pending == 1000 - 200
