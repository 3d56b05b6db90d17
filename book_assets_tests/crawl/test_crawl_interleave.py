"""Discovery and details interleave: details start right after the first page that lists books."""

from __future__ import annotations

from typing import Any

from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets_tests.crawl.conftest import sandbox_config


def test_first_detail_page_is_fetched_before_the_second_book_listing_page_finishes(
    db: Database, database_url: str, sandbox: Any
) -> None:
    config = sandbox_config(
        sandbox.url, mode="http", concurrency=1, interleave=5, categories=("Travel", "Mystery", "Poetry")
    )
    crawl(database_url, config)
    listings = db.query(
        "SELECT completed_at FROM tasks WHERE task_type = 'listing' AND NOT (payload ? 'start') ORDER BY completed_at"
    )
    first_detail = db.query("SELECT min(started_at) AS t FROM tasks WHERE task_type = 'detail'")[0]["t"]
    assert len(listings) >= 3
    assert first_detail < listings[1]["completed_at"]
    # The ratio holds while both kinds have work: a run of details that ends with a listing page (which was
    # pending all along: listing pages only appear when the previous listing page completes) is at most 5.
    order = [r["task_type"] for r in db.query("SELECT task_type FROM tasks ORDER BY started_at, id")]
    runs, run = [], 0
    for task_type in order:
        if task_type == "detail":
            run += 1
        else:
            runs.append(run)
            run = 0
    assert runs[2:] and max(runs[2:]) <= 5, runs
