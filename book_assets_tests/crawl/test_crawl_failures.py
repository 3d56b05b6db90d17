"""Nothing wrong is ever stored: error pages become the right kind of task failure, never book rows."""

from __future__ import annotations

from typing import Any

import pytest

from book_assets.crawl.config import DETAIL, DETAIL_PRIORITY, make_queue
from book_assets.crawl.discovery import listing_tasks
from book_assets.crawl.pipeline import crawl, drain, prepare
from book_assets.db.connection import Database
from book_assets.sandbox import Faults
from book_assets.scraper.models import BookCard, ListingPage
from book_assets.sites.books import as_listing
from book_assets_tests.crawl.conftest import sandbox_config, stored_vs_truth


def _failed(db: Database) -> dict[str, str]:
    rows = db.query("SELECT payload->>'url' AS url, error FROM tasks WHERE status = 'failed'")
    return {r["url"]: r["error"] for r in rows}


def _enqueue_details(db: Database, config: Any, urls: list[str]) -> None:
    queue = make_queue(db, config)
    for url in urls:
        queue.enqueue(DETAIL, {"url": url, "category": "Travel"}, priority=DETAIL_PRIORITY, group="Travel")


def test_error_pages_end_as_the_right_failure_and_are_never_stored(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    truth = sandbox_factory().catalogue.ground_truth()
    book, flaky, cut = list(truth)[:3]
    server = sandbox_factory(
        faults=Faults(scripted={book: [500] * 10, flaky: [503, 200], cut: ["truncate"] * 10}),
    )
    config = sandbox_config(server.url, mode="http", max_attempts=3)
    prepare(db, config)
    urls = {
        "missing": server.url_for("/catalogue/no-such-book_99999/index.html"),
        "listing": server.url_for("/catalogue/page-2.html"),
        "500": server.url_for(book),
        "flaky": server.url_for(flaky),
        "cut": server.url_for(cut),
    }
    _enqueue_details(db, config, list(urls.values()))
    drain(database_url, config, task_types=(DETAIL,), workers=1)

    failed = _failed(db)
    assert failed[urls["missing"]].startswith("http_404")
    assert failed[urls["listing"]].startswith("not_a_book_page")
    assert failed[urls["500"]].startswith("http_5xx")
    assert failed[urls["cut"]].startswith("truncated")
    attempts = db.query("SELECT payload->>'url' AS url, attempts FROM tasks")
    by_url = {r["url"]: r["attempts"] for r in attempts}
    assert by_url[urls["missing"]] == 1 and by_url[urls["listing"]] == 1  # permanent: no retry
    assert by_url[urls["500"]] == 3 and by_url[urls["cut"]] == 3  # retryable: up to max_attempts
    stored = [r["url"] for r in db.query("SELECT url FROM books")]
    assert stored == [urls["flaky"]]  # the one that recovered after a 503, and nothing else


@pytest.mark.browser
def test_javascript_built_pages_need_the_browser_and_http_mode_fails_clearly(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    server = sandbox_factory(js_mode=True)
    http = crawl(database_url, sandbox_config(server.url, mode="http", categories=("Travel",)))
    assert http.counts["total"] == 0
    assert http.failed_by_reason == {"not_a_book_page": 11}

    db.query("TRUNCATE tasks")
    browser = crawl(database_url, sandbox_config(server.url, mode="browser", concurrency=4, categories=("Travel",)))
    assert browser.counts["total"] == 11
    truth = {p: b for p, b in server.catalogue.ground_truth().items() if b.category == "Travel"}
    assert stored_vs_truth(db.query("SELECT * FROM books"), truth, server.url) == []


def test_off_domain_cards_and_next_links_are_never_enqueued() -> None:
    config = sandbox_config("http://127.0.0.1:9/")
    page = ListingPage(
        url="http://127.0.0.1:9/catalogue/category/books/travel_2/index.html",
        cards=[
            BookCard("http://127.0.0.1:9/catalogue/a_1/index.html", "A", price=1, price_text="£1", rating=1),  # type: ignore[arg-type]
            BookCard("https://evil.example/catalogue/b_2/index.html", "B", price=1, price_text="£1", rating=1),  # type: ignore[arg-type]
        ],
        next_url="https://evil.example/page-2.html",
        category="Travel",
        page_number=1,
        page_count=2,
        result_count=40,
    )
    outcome = listing_tasks({"url": page.url, "depth": 1, "category": "Travel"}, as_listing(page), config)
    assert [t.payload["url"] for t in outcome.tasks] == ["http://127.0.0.1:9/catalogue/a_1/index.html"]
    assert outcome.offsite_skipped == 2
