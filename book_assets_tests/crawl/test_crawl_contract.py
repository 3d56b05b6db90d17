"""Crawls of a redesigned site: a product page that breaks the book's field contract fails with its own kind,
naming the field, and never reaches the books it would have overwritten."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets.sandbox.redesign import Redesign, parse_changes
from book_assets_tests.crawl.conftest import sandbox_config, stored_vs_truth

CATEGORIES = ("Travel", "Poetry")  # 30 books


def _failed_details(db: Database) -> dict[str, str]:
    rows = db.query("SELECT payload->>'url' AS url, error FROM tasks WHERE status = 'failed' AND task_type = 'detail'")
    return {r["url"]: r["error"] for r in rows}


@pytest.mark.parametrize(
    ("change", "error", "marker"),
    [
        ("rating_class", "missing_field: missing rating", b'class="rating-stars'),
        ("upc_moved", "missing_field: missing upc", b'class="product-identifiers"'),
    ],
)
def test_redesign_that_hides_a_required_field_fails_every_book_page_and_keeps_the_books(
    db: Database, database_url: str, sandbox_factory: Any, books_rows: Any, change: str, error: str, marker: bytes
) -> None:
    sandbox = sandbox_factory()
    config = sandbox_config(sandbox.url, mode="http", categories=CATEGORIES)
    first = crawl(database_url, config)
    assert first.counts["total"] == 30
    before = {r["url"]: r for r in books_rows()}

    sandbox.set_redesign(Redesign(day=0, changes=parse_changes(change)))
    second = crawl(database_url, config)

    failed = _failed_details(db)
    assert len(failed) == 30 and set(failed) == set(before)
    assert set(failed.values()) == {error}
    assert second.failed_by_reason == {"missing_field": 30}
    # The listings still parse (a card's rating is not the record): every book page was reached.
    assert db.query("SELECT count(*) AS n FROM tasks WHERE task_type = 'listing' AND status = 'failed'")[0]["n"] == 0
    # Nothing of the redesigned pages reached the books: same rows, same versions, no version 2.
    assert {r["url"]: r for r in books_rows()} == before
    assert db.query("SELECT count(*) AS n FROM book_versions WHERE version > 1")[0]["n"] == 0
    # Each failed page's response is kept whole, as served (the redesigned markup), for reextract.
    kept = db.query("SELECT url, body, content_hash FROM pages WHERE url = ANY(%s)", (list(failed),))
    assert len(kept) == 30
    assert all(marker in bytes(r["body"]) for r in kept)
    assert all(hashlib.sha256(bytes(r["body"])).hexdigest() == r["content_hash"] for r in kept)
    truth = {p: b for p, b in sandbox.catalogue.ground_truth().items() if b.category in CATEGORIES}
    assert stored_vs_truth(books_rows(), truth, sandbox.url) == []
