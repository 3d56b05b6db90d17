"""Decompression bombs on a site fail as ``too_large`` on their first attempt, in every fetch mode.

Three book pages are served as 1 MB of gzip that inflates to 1 GiB of HTML (``Faults`` step "bomb", every
time they are asked for, so a retry would meet the bomb again). The body limit holds on the decoded bytes in
plain HTTP, in the browser and in adaptive mode's renders: each bomb is one permanent failure after one
request, every other book is stored as the site serves it, and nothing else fails.
"""

from __future__ import annotations

from typing import Any

import pytest

from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets.sandbox.catalogue import Catalogue
from book_assets.sandbox.faults import Faults
from book_assets_tests.crawl.conftest import sandbox_config, stored_vs_truth

pytestmark = pytest.mark.chaos

CATEGORIES = ("Travel", "Poetry")


@pytest.mark.parametrize(
    "mode",
    ["http", pytest.param("browser", marks=pytest.mark.browser), pytest.param("adaptive", marks=pytest.mark.browser)],
)
@pytest.mark.timeout(300)
def test_every_bomb_fails_as_too_large_on_its_first_attempt_and_every_other_book_is_stored(
    mode: str, db: Database, database_url: str, sandbox_factory: Any
) -> None:
    truth = {p: b for p, b in Catalogue().ground_truth().items() if b.category in CATEGORIES}
    bombs = sorted(truth)[:3]
    site = sandbox_factory(faults=Faults(scripted={path: ["bomb"] * 5 for path in bombs}))
    config = sandbox_config(site.url, mode=mode, concurrency=4, max_attempts=3, categories=CATEGORIES)

    report = crawl(database_url, config)

    failed = db.query("SELECT payload->>'url' AS url, error_kind, attempts FROM tasks WHERE status = 'failed'")
    assert sorted((r["url"], r["error_kind"], r["attempts"]) for r in failed) == sorted(
        (site.url_for(path), "too_large", 1) for path in bombs
    )
    assert report.failed_by_reason == {"too_large": len(bombs)}
    hits = site.stats().hits
    assert {path: hits.get(path) for path in bombs} == dict.fromkeys(bombs, 1)  # one request each, no retry
    kept = {path: book for path, book in truth.items() if path not in bombs}
    rows = db.query("SELECT * FROM books")
    assert stored_vs_truth(rows, kept, site.url) == [] and len(rows) == len(kept)
