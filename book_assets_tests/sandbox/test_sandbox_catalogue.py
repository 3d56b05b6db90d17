"""The catalogue is the live site's shape, the same for the same seed, and changes day by day as documented."""

from __future__ import annotations

import re
import time
from decimal import Decimal

import httpx
from selectolax.lexbor import LexborHTMLParser

from book_assets.categories import slugify
from book_assets.sandbox import BOOK_COUNT, CATEGORY_SIZES, Catalogue, SandboxServer, Site
from book_assets.sandbox.testing import SandboxFactory

SAMPLE_PATHS = [
    "/index.html",
    "/catalogue/page-7.html",
    "/catalogue/category/books/default_15/page-3.html",
    "/catalogue/category/books_1/page-50.html",
]


def test_day_zero_has_the_live_categories_ids_and_sizes() -> None:
    catalogue = Catalogue(seed=0)
    assert len(catalogue) == BOOK_COUNT == 1000
    assert [(c.name, c.size) for c in catalogue.categories] == list(CATEGORY_SIZES)
    assert [c.id for c in catalogue.categories] == list(range(2, 52))
    assert catalogue.categories[0].key == "travel_2"
    assert catalogue.categories[-1].key == "crime_51"
    assert next(c for c in catalogue.categories if c.name == "Add a comment").key == "add-a-comment_18"
    assert sorted(b.id for b in catalogue.books) == list(range(1, 1001))
    assert catalogue.page_count == 50


def test_books_have_complete_typed_records() -> None:
    catalogue = Catalogue(seed=1)
    for book in catalogue:
        assert book.url_path == f"/catalogue/{book.slug}_{book.id}/index.html"
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", book.slug)
        assert book.price == book.price_excl_tax == book.price_incl_tax
        assert book.price.as_tuple().exponent == -2
        assert book.tax == Decimal("0.00")
        assert 1 <= book.rating <= 5
        assert re.fullmatch(r"[0-9a-f]{16}", book.upc)
        assert book.product_type == "Books"
        assert book.availability == f"In stock ({book.stock} available)"
        assert book.num_reviews == 0
        assert catalogue.book_by_path(book.url_path) is book
    titles = "".join(b.title for b in catalogue)
    for tricky in ('"', ":", "#", "&", "'", "é"):
        assert tricky in titles
    assert any(ord(ch) > 0x24F for ch in titles)  # a non-Latin script, which slugs drop
    assert 1 <= sum(b.description is None for b in catalogue) <= 10


def test_slugs_follow_djangos_slugify() -> None:
    assert slugify("A Court of Thorns and Roses (A Court of Thorns and Roses #1)") == (
        "a-court-of-thorns-and-roses-a-court-of-thorns-and-roses-1"
    )
    assert slugify("The Bridge to Consciousness: I'm Writing") == "the-bridge-to-consciousness-im-writing"
    assert slugify("Crème Brûlée & Señor Zoë") == "creme-brulee-senor-zoe"


def test_same_seed_gives_identical_pages_and_other_seeds_differ() -> None:
    one, two, other = Site(Catalogue(seed=5)), Site(Catalogue(seed=5)), Site(Catalogue(seed=6))
    book_path = one.catalogue.books[123].url_path
    for path in [*SAMPLE_PATHS, book_path]:
        assert one.get(path) == two.get(path)
    for path in SAMPLE_PATHS:
        assert one.get(path) != other.get(path)
    assert one.catalogue.ground_truth() == two.catalogue.ground_truth()


def test_days_change_prices_and_stock_and_add_and_remove_books() -> None:
    day0, day1 = Catalogue(seed=0), Catalogue(seed=0, day=1)
    assert day1.removed_ids and len(day1.removed_ids) <= 3
    assert day1.added_ids and len(day1.added_ids) <= 3
    assert len(day1) == 1000 - len(day1.removed_ids) + len(day1.added_ids)
    changed = [b for b in day1 if (old := day0.book_by_id(b.id)) is not None and old != b]
    assert 40 <= len(changed) <= 60
    assert all(day0.book_by_id(b.id).price != b.price for b in changed)  # type: ignore[union-attr]
    assert all(day0.book_by_id(b.id).stock != b.stock for b in changed)  # type: ignore[union-attr]
    assert {b.id for b in changed} == day1.changed_ids
    for book_id in day1.removed_ids:
        assert day1.book_by_id(book_id) is None
    assert min(day1.added_ids) == 1001
    assert day1.books[0].id == max(day1.added_ids)  # newest first, like the live site
    assert sum(c.size for c in day1.categories) == len(day1)
    assert Catalogue(seed=0, day=3).ground_truth() == Catalogue(seed=0, day=3).ground_truth()
    assert Catalogue(seed=0, day=3).ground_truth() != day1.ground_truth()


def test_listing_pages_reflect_the_day(sandbox_factory: SandboxFactory) -> None:
    server = sandbox_factory(day=2)
    catalogue = server.catalogue
    with httpx.Client(base_url=server.url) as client:
        first = LexborHTMLParser(client.get("/index.html").text)
        assert first.css("form.form-horizontal strong")[0].text() == str(len(catalogue))
        hrefs = [a.attributes["href"] for a in first.css("article.product_pod h3 a")]
        assert hrefs[0] == "catalogue" + catalogue.books[0].url_path.removeprefix("/catalogue")
        removed = Catalogue(seed=0).book_by_id(min(catalogue.removed_ids))
        assert removed is not None
        assert client.get(removed.url_path).status_code == 404
        listed = 0
        for n in range(1, catalogue.page_count + 1):
            listed += len(LexborHTMLParser(client.get(f"/catalogue/page-{n}.html").text).css("article.product_pod"))
        assert listed == len(catalogue)
        changed = catalogue.book_by_id(min(catalogue.changed_ids))
        assert changed is not None
        page = LexborHTMLParser(client.get(changed.url_path).text)
        price = page.css_first("p.price_color")
        assert price is not None and price.text() == f"£{changed.price}"


def test_stats_count_hits_concurrency_and_start_times(sandbox: SandboxServer) -> None:
    sandbox.reset_stats()
    before = time.time()
    with httpx.Client(base_url=sandbox.url) as client:
        for path in ("/index.html", "/index.html", "/nope?x=1"):
            client.get(path)
        remote = client.get("/__sandbox__/stats").json()
        local = sandbox.stats()
        assert remote["hits"] == local.hits == {"/index.html": 2, "/nope": 1}
        assert remote["total_requests"] == 3
        assert remote["max_concurrency"] == 1
        assert len(local.request_times) == 3
        assert before <= local.request_times[0] <= local.request_times[-1] <= time.time()
        assert client.get("/__sandbox__/reset").json() == {"reset": True}
        assert client.get("/__sandbox__/stats").json()["hits"] == {}
    assert sandbox.stats().total_requests == 0
