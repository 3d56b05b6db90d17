"""Conditional re-crawls against the sandbox: 304s for what did not change, 200s for exactly what did.

Four categories keep each crawl to ~120 pages while covering every case of day 1: Mystery (3 books
change, two listing pages), Health (2 books added), Add a comment (2 change, 1 removed, four listing
pages) and Travel (nothing changes: its listing is answered 304 and its books must still be found).
"""

from __future__ import annotations

from typing import Any

import pytest

from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets.sandbox.faults import Faults
from book_assets_tests.crawl.conftest import sandbox_config, stored_vs_truth

CATEGORIES = ("Mystery", "Health", "Add a comment", "Travel")


def _book_paths(catalogue: Any, ids: frozenset[int] | None = None) -> set[str]:
    return {b.url_path for b in catalogue.books if b.category in CATEGORIES and (ids is None or b.id in ids)}


def _truth(catalogue: Any) -> dict[str, Any]:
    return {path: book for path, book in catalogue.ground_truth().items() if book.category in CATEGORIES}


def test_day0_recrawl_gets_304_for_every_book_page_and_downloads_under_5_percent_of_the_bytes(
    db: Database, database_url: str, sandbox_factory: Any, books_rows: Any
) -> None:
    site = sandbox_factory()
    config = sandbox_config(site.url, categories=CATEGORIES)
    first = crawl(database_url, config)
    first_bytes = site.stats().bytes_sent
    books = _book_paths(site.catalogue)
    assert first.counts["total"] == len(books) == 114
    before = {r["url"]: (r["version"], r["updated_at"], r["raw_html"], r["fetched_at"]) for r in books_rows()}

    site.reset_stats()
    again = crawl(database_url, config)
    stats = site.stats()

    assert stats.statuses(304).keys() >= books
    assert stats.statuses(200) == {}, "nothing changed, so nothing is downloaded"
    assert stats.bytes_sent < 0.05 * first_bytes, (stats.bytes_sent, first_bytes)
    assert (again.run.books_unchanged, again.run.books_new, again.run.books_changed) == (114, 0, 0)
    assert again.run.not_modified == again.stats.fetcher["not_modified"] == sum(stats.statuses(304).values())
    assert again.failed_by_reason == {}
    rows = books_rows()
    assert {r["url"]: (r["version"], r["updated_at"], r["raw_html"]) for r in rows} == {
        url: value[:3] for url, value in before.items()
    }
    assert all(r["fetched_at"] > before[r["url"]][3] for r in rows), "a 304 records that the book was re-validated"


def test_day1_recrawl_downloads_exactly_the_changed_books_and_stores_the_day1_site(
    db: Database, database_url: str, sandbox_factory: Any, books_rows: Any
) -> None:
    site = sandbox_factory()
    config = sandbox_config(site.url, categories=CATEGORIES)
    crawl(database_url, config)
    day0_books = _book_paths(site.catalogue)
    site.set_day(1)
    site.reset_stats()

    report = crawl(database_url, config)
    stats = site.stats()

    catalogue = site.catalogue
    changed = _book_paths(catalogue, catalogue.changed_ids)
    added = _book_paths(catalogue, catalogue.added_ids)
    books = _book_paths(catalogue)
    removed = day0_books - books
    assert (len(changed), len(added), len(removed)) == (5, 2, 1)
    assert {p for p in stats.statuses(200) if p in books} == changed | added
    assert {p for p in stats.statuses(304) if p in books} == books - changed - added
    assert (report.run.books_changed, report.run.books_new) == (5, 2)
    assert report.run.books_unchanged == len(books) - 7
    assert "/catalogue/category/books/travel_2/index.html" in stats.statuses(304)
    assert report.failed_by_reason == {}

    rows = books_rows()
    prefix = site.url.rstrip("/")
    assert (
        stored_vs_truth([r for r in rows if r["url"].removeprefix(prefix) not in removed], _truth(catalogue), site.url)
        == []
    )
    assert {r["url"].removeprefix(prefix) for r in rows} - set(_truth(catalogue)) == removed  # kept, not deleted


def test_recrawl_with_conditional_requests_off_downloads_every_page_again(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    site = sandbox_factory()
    crawl(database_url, sandbox_config(site.url, categories=("Travel",)))
    first_bytes = site.stats().bytes_sent
    site.reset_stats()

    again = crawl(database_url, sandbox_config(site.url, categories=("Travel",), conditional_requests=False))

    assert site.stats().statuses(304) == {}
    assert site.stats().bytes_sent == first_bytes
    assert again.run.not_modified == 0 and again.run.books_unchanged == 11


def test_a_304_to_a_request_without_validators_is_a_recorded_failure(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    catalogue = sandbox_factory().catalogue
    book = next(b for b in catalogue.books if b.category == "Travel")
    site = sandbox_factory(faults=Faults(scripted={book.url_path: [304]}))

    report = crawl(database_url, sandbox_config(site.url, categories=("Travel",)))

    assert report.failed_by_reason == {"not_modified_unasked": 1}
    assert report.counts["total"] == 10
    stored = db.query("SELECT count(*) AS n FROM books WHERE url = %s", (site.url_for(book.url_path),))
    assert stored[0]["n"] == 0


def test_a_304_whose_stored_copy_changed_meanwhile_is_fetched_again_in_full(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    site = sandbox_factory()
    config = sandbox_config(site.url, categories=("Travel",))
    crawl(database_url, config)
    book = next(b for b in site.catalogue.books if b.category == "Travel")
    listing = "/catalogue/category/books/travel_2/index.html"
    # The book's stored copy is no longer the one its validators describe; the listing's copy is gone.
    db.query("UPDATE books SET content_hash = 'elsewhere' WHERE url = %s", (site.url_for(book.url_path),))
    db.query("UPDATE pages SET body = NULL WHERE url = %s", (site.url_for(listing),))
    site.reset_stats()

    report = crawl(database_url, config)

    assert report.stats.errors == {"stale_copy": 2}
    assert report.failed_by_reason == {}
    assert site.stats().responses[book.url_path] == [304, 200]
    assert site.stats().responses[listing] == [304, 200]
    assert report.run.books_unchanged == 11
    row = db.query("SELECT content_hash FROM books WHERE url = %s", (site.url_for(book.url_path),))[0]
    assert row["content_hash"] != "elsewhere"


@pytest.mark.browser
def test_adaptive_recrawl_is_conditional_once_plain_http_is_trusted_and_keeps_the_books(
    db: Database, database_url: str, sandbox_factory: Any, books_rows: Any
) -> None:
    site = sandbox_factory()
    config = sandbox_config(site.url, mode="adaptive", concurrency=4, categories=("Mystery", "Travel"))
    crawl(database_url, config)
    before = {r["url"]: (r["version"], r["updated_at"], r["raw_html"]) for r in books_rows()}
    site.reset_stats()

    again = crawl(database_url, config)

    books = {p for p in _book_paths(site.catalogue) if site.catalogue.book_by_path(p).category in ("Mystery", "Travel")}
    not_modified = {p for p in site.stats().statuses(304) if p in books}
    # Probes and the re-checked sample download the page (there must be something to compare); the rest is 304.
    assert len(not_modified) > len(books) / 2, (len(not_modified), len(books))
    assert again.run.books_unchanged == len(books) == 43 and again.failed_by_reason == {}
    assert {r["url"]: (r["version"], r["updated_at"], r["raw_html"]) for r in books_rows()} == before
