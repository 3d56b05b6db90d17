"""A link over max_url_length becomes no task of its listing but a failure of its own (pure functions)."""

from __future__ import annotations

from decimal import Decimal

from book_assets.crawl.config import DETAIL, LISTING, CrawlConfig
from book_assets.crawl.discovery import listing_tasks, refused_links
from book_assets.scraper.models import BookCard, ListingPage
from book_assets.settings import load_settings
from book_assets.sites.books import as_listing

BASE = "http://127.0.0.1:8080/catalogue/category/books/mystery_3/index.html"


def _card(url: str) -> BookCard:
    return BookCard(url=url, title="t", price=Decimal("1.00"), price_text="£1.00", rating=3)


def test_cards_and_next_links_over_the_cap_are_refused_and_the_rest_enqueued() -> None:
    config = CrawlConfig.from_settings(load_settings(base_url=BASE, max_url_length=256))
    long_card = "http://127.0.0.1:8080/catalogue/" + "x" * 300 + "/index.html"
    long_next = "http://127.0.0.1:8080/catalogue/category/books/mystery_3/" + "p" * 300 + ".html"
    good = [f"http://127.0.0.1:8080/catalogue/book_{i}/index.html" for i in range(3)]
    page = ListingPage(
        url=BASE,
        cards=[_card(u) for u in [good[0], long_card, *good[1:]]],
        next_url=long_next,
        category="Mystery",
        page_number=1,
        page_count=2,
        result_count=24,
        category_links=(),
    )
    outcome = listing_tasks({"url": BASE, "depth": 1, "category": "Mystery"}, as_listing(page), config)

    assert [t.payload["url"] for t in outcome.tasks] == good
    assert [(t.task_type, t.payload["url"]) for t in outcome.too_long] == [(DETAIL, long_card), (LISTING, long_next)]
    refused = refused_links(outcome, 7, BASE, config.max_url_length)
    assert [len(t.payload["url"]) for t, _ in refused] == [256, 256]
    assert all(t.payload["refused_by"] == 7 for t, _ in refused)
    assert refused[0][1].startswith(f"url_too_long: a link of {len(long_card)} characters, over max_url_length (256)")
