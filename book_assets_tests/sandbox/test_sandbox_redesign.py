"""A redesign changes the markup from its day on and nothing else: not a URL, not a value, not an earlier day.

Each change is read back with the same selectolax selectors a scraper would use, on the redesign's day and on
the day before, and the last test shows the redesigned markup reaching the pipeline's current parser.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import httpx
import pytest
from selectolax.lexbor import LexborHTMLParser as HTMLParser

from book_assets.sandbox import Book, Catalogue, Change, Redesign, SandboxServer, Site
from book_assets.sandbox.redesign import DROP_SHARE, TODAY, parse_changes
from book_assets.sandbox.testing import SandboxFactory
from book_assets.sandbox.truth import absent_on_pages, stored_vs_truth
from book_assets.scraper.errors import ContractViolation, ErrorKind
from book_assets.scraper.parsers import parse_book, parse_listing

DAY = 2


@pytest.fixture(scope="module")
def catalogue() -> Catalogue:
    return Catalogue(seed=0, day=DAY)


def _page(site: Site, path: str) -> str:
    body = site.get(path)
    assert body is not None, path
    return body.decode("utf-8")


def _described(catalogue: Catalogue, redesign: Redesign) -> Book:
    """A book unchanged since day 0, with a description, in a category that keeps it."""
    dropped = redesign.dropped_categories(catalogue.categories)
    return next(
        b for b in catalogue if b.description and b.category_id not in dropped and catalogue.book_changed_on(b) == 0
    )


def _hrefs(html: str) -> list[str]:
    return [a.attributes.get("href") or "" for a in HTMLParser(html).css("a")]


def _markers(html: str) -> dict[str, Any]:
    """What each change touches, read as a scraper reads it."""
    tree = HTMLParser(html)
    rows = {th.text(strip=True) for th in tree.css("table tr th")}
    old_description = tree.css_first("div#product_description + p")
    new_description = tree.css_first("div#product-description + p")
    dd = tree.css_first("div.product_main dl.product-identifiers dd")
    return {
        "star-rating": [(n.attributes.get("class") or "").split()[1] for n in tree.css("p.star-rating")],
        "rating-stars": [(n.attributes.get("class") or "").split()[1] for n in tree.css("p.rating-stars")],
        "product_description": old_description.text(strip=True) if old_description else None,
        "product-description": new_description.text(strip=True) if new_description else None,
        "upc_row": "UPC" in rows,
        "upc_dl": dd.text(strip=True) if dd else None,
        "table_rows": len(rows),
    }


# --- each change, from its day and not before --------------------------------------------------------------


@pytest.mark.parametrize("change", list(Change), ids=lambda c: c.value)
def test_the_day_before_the_redesign_renders_exactly_as_the_live_markup(change: Change) -> None:
    before = Catalogue(seed=0, day=DAY - 1)
    redesigned, live = Site(before, redesign=Redesign(DAY, frozenset({change}))), Site(before)

    for path in ["/index.html", "/catalogue/page-3.html", before.books[0].url_path, before.books[-1].url_path]:
        assert redesigned.get(path) == live.get(path), path
    assert redesigned.markup == TODAY


def test_rating_class_renames_the_class_on_book_pages_and_listing_cards_keeping_the_word(catalogue: Catalogue) -> None:
    site = Site(catalogue, redesign=Redesign(DAY, frozenset({Change.RATING_CLASS})))
    book = catalogue.books[0]

    page = _markers(_page(site, book.url_path))
    listing = _markers(_page(site, "/index.html"))

    assert page["star-rating"] == [] and page["rating-stars"] == [book.rating_word]
    assert listing["star-rating"] == []
    assert listing["rating-stars"] == [b.rating_word for b in catalogue.books[:20]]
    assert page["product_description"] == book.description  # the other changes stay out
    assert page["upc_row"] and page["upc_dl"] is None


def test_description_id_renames_the_heading_id_and_keeps_the_paragraph(catalogue: Catalogue) -> None:
    redesign = Redesign(DAY, frozenset({Change.DESCRIPTION_ID}))
    book = _described(catalogue, redesign)

    page = _markers(_page(Site(catalogue, redesign=redesign), book.url_path))

    assert page["product_description"] is None
    assert page["product-description"] == book.description
    assert page["star-rating"] == [book.rating_word]


def test_description_teaser_puts_a_few_words_where_the_paragraph_was_and_keeps_the_full_text(
    catalogue: Catalogue,
) -> None:
    redesign = Redesign(DAY, frozenset({Change.DESCRIPTION_TEASER}))
    book = _described(catalogue, redesign)
    html = _page(Site(catalogue, redesign=redesign), book.url_path)

    parsed = parse_book(html, f"https://books.toscrape.com{book.url_path}")
    assert book.description is not None and parsed.description is not None
    assert parsed.description.startswith(" ".join(book.description.split()[:3]))
    assert len(parsed.description) < 40 < len(book.description)
    full = HTMLParser(html).css_first("div#full-description p")
    assert full is not None and full.text() == book.description


def test_rating_widget_puts_one_star_above_the_rating_which_keeps_its_word(catalogue: Catalogue) -> None:
    redesign = Redesign(DAY, frozenset({Change.RATING_WIDGET}))
    book = next(b for b in catalogue.books if b.rating != 1)
    html = _page(Site(catalogue, redesign=redesign), book.url_path)

    assert parse_book(html, f"https://books.toscrape.com{book.url_path}").rating == 1
    own = HTMLParser(html).css_first("p.rating-stars")
    assert own is not None and book.rating_word in (own.attributes.get("class") or "")


def test_upc_moved_takes_the_upc_out_of_the_table_into_a_dl_and_keeps_the_other_rows(catalogue: Catalogue) -> None:
    book = catalogue.books[0]
    live = _markers(_page(Site(catalogue), book.url_path))

    page = _markers(_page(Site(catalogue, redesign=Redesign(DAY, frozenset({Change.UPC_MOVED}))), book.url_path))

    assert live["upc_row"] and live["upc_dl"] is None
    assert not page["upc_row"]
    assert page["upc_dl"] == book.upc
    assert page["table_rows"] == live["table_rows"] - 1


def test_description_dropped_removes_it_from_exactly_the_chosen_categories(catalogue: Catalogue) -> None:
    redesign = Redesign(DAY, frozenset({Change.DESCRIPTION_DROPPED}))
    dropped = redesign.dropped_categories(catalogue.categories)
    site, live = Site(catalogue, redesign=redesign), Site(catalogue)
    shown: dict[int, tuple[str | None, str]] = {}
    for book in catalogue:
        html = _page(site, book.url_path)
        meta = HTMLParser(html).css_first('meta[name="description"]')
        assert meta is not None
        shown[book.id] = (_markers(html)["product_description"], (meta.attributes.get("content") or "").strip())

    assert len(dropped) == round(len(catalogue.categories) * DROP_SHARE) == 10
    assert redesign.dropped_categories(Catalogue(seed=0, day=5).categories) == dropped  # the same every day
    for book in catalogue:
        if book.category_id in dropped:
            assert shown[book.id] == (None, ""), book.url_path
        else:
            assert shown[book.id] == (book.description, book.description or ""), book.url_path
            assert site.get(book.url_path) == live.get(book.url_path)  # nothing else changes on those pages
    assert any(book.description and book.category_id in dropped for book in catalogue)


def test_every_change_at_once_keeps_every_url_and_every_link(catalogue: Catalogue) -> None:
    site, live = Site(catalogue, redesign=Redesign(DAY)), Site(catalogue)
    paths = [*catalogue.listing_paths(), *(book.url_path for book in catalogue)]

    for path in paths:
        redesigned, original = _page(site, path), _page(live, path)
        assert redesigned != original, path
        assert _hrefs(redesigned) == _hrefs(original), path
    assert site.get("/catalogue/no-such-book_9999/index.html") is None


def test_js_mode_pages_carry_the_redesigned_markup_in_their_script(catalogue: Catalogue) -> None:
    site = Site(catalogue, js_mode=True, redesign=Redesign(DAY, frozenset({Change.RATING_CLASS, Change.UPC_MOVED})))
    book = catalogue.books[0]

    encoded = re.search(r'atob\("([A-Za-z0-9+/=]+)"\)', _page(site, book.url_path))
    assert encoded is not None
    payload = json.loads(base64.b64decode(encoded.group(1)))

    assert f'class="rating-stars {book.rating_word}"' in payload["main"]
    assert f"<dd>{book.upc}</dd>" in payload["main"]
    assert "UPC" not in payload["table"]


def test_validators_move_to_the_redesign_day_only_for_pages_the_redesign_changed(catalogue: Catalogue) -> None:
    redesign = Redesign(DAY, frozenset({Change.DESCRIPTION_DROPPED}))
    site, live = Site(catalogue, redesign=redesign), Site(catalogue)
    dropped = redesign.dropped_categories(catalogue.categories)
    unchanged = [b for b in catalogue if catalogue.book_changed_on(b) == 0]
    lost = next(b for b in unchanged if b.description and b.category_id in dropped)
    kept = next(b for b in unchanged if b.category_id not in dropped)

    assert site.changed_on(lost.url_path) == DAY
    assert site.etag(lost.url_path) != live.etag(lost.url_path)
    assert site.changed_on(kept.url_path) == 0
    assert site.etag(kept.url_path) == live.etag(kept.url_path)
    assert Site(catalogue, redesign=Redesign(DAY)).changed_on(kept.url_path) == DAY  # the rating class is on it


# --- the ground truth --------------------------------------------------------------------------------------


def test_the_truth_keeps_every_value_and_names_the_fields_a_page_no_longer_shows(catalogue: Catalogue) -> None:
    redesign = Redesign(DAY)
    dropped = redesign.dropped_categories(catalogue.categories)

    absent = absent_on_pages(catalogue, redesign)

    assert absent_on_pages(catalogue, None) == {}
    assert absent_on_pages(Catalogue(seed=0, day=DAY - 1), redesign) == {}
    assert absent == {
        b.url_path: frozenset({"description"}) for b in catalogue if b.description and b.category_id in dropped
    }


def _row(base: str, book: Book, **changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "url": base + book.url_path,
        "title": book.title,
        "category": book.category,
        "price_amount": book.price,
        "price_excl_tax": book.price_excl_tax,
        "price_incl_tax": book.price_incl_tax,
        "tax": book.tax,
        "rating_value": book.rating,
        "upc": book.upc,
        "product_type": book.product_type,
        "availability": book.availability,
        "stock": book.stock,
        "num_reviews": book.num_reviews,
        "description": book.description,
        "price": f"£{book.price:.2f}",
    }
    return row | changes


def test_stored_vs_truth_accepts_a_kept_or_absent_dropped_field_and_flags_anything_else(catalogue: Catalogue) -> None:
    base, redesign = "http://sandbox", Redesign(DAY)
    absent = absent_on_pages(catalogue, redesign)
    lost = next(b for b in catalogue if b.url_path in absent)
    kept = next(b for b in catalogue if b.description and b.url_path not in absent)
    truth = {b.url_path: b for b in (lost, kept)}

    as_kept = [_row(base, lost), _row(base, kept)]
    as_absent = [_row(base, lost, description=None), _row(base, kept)]
    wrong = [_row(base, lost, description="garbage"), _row(base, kept, description=None)]

    assert stored_vs_truth(as_kept, truth, base, absent) == []
    assert stored_vs_truth(as_absent, truth, base, absent) == []
    assert len(stored_vs_truth(as_absent, truth, base)) == 1  # without ``absent`` a NULL is a difference
    problems = stored_vs_truth(wrong, truth, base, absent)
    assert len(problems) == 2 and all("description" in p for p in problems)


# --- the value and its checks ------------------------------------------------------------------------------


def test_changes_parse_from_names_and_a_bad_name_is_refused_naming_the_known_ones() -> None:
    assert parse_changes("rating_class, UPC_MOVED") == {Change.RATING_CLASS, Change.UPC_MOVED}
    assert parse_changes("all") == frozenset(Change)
    assert Redesign(1).changes == frozenset(Change)
    with pytest.raises(ValueError, match="unknown redesign change 'rating'; use one of: all, rating_class"):
        parse_changes("rating")
    with pytest.raises(ValueError, match="redesign day must be >= 0"):
        Redesign(-1)
    with pytest.raises(ValueError, match="drop_share"):
        Redesign(1, drop_share=0)


# --- over the wire -----------------------------------------------------------------------------------------


def test_a_redesign_set_at_runtime_serves_from_the_next_request_and_can_be_switched_off(
    sandbox_factory: SandboxFactory,
) -> None:
    server: SandboxServer = sandbox_factory(day=1)
    book = server.catalogue.books[0]
    before = httpx.get(server.url_for(book.url_path), timeout=10).text

    set_ = httpx.post(server.url_for("/__sandbox__/redesign?day=1&changes=rating_class,description_id"), timeout=10)
    during = httpx.get(server.url_for(book.url_path), timeout=10).text
    refused = httpx.post(server.url_for("/__sandbox__/redesign?changes=rating_clas"), timeout=10)
    still = httpx.get(server.url_for("/__sandbox__/redesign"), timeout=10).json()
    off = httpx.post(server.url_for("/__sandbox__/redesign?changes=none"), timeout=10)
    after = httpx.get(server.url_for(book.url_path), timeout=10).text

    assert set_.json() == {"redesign": {"day": 1, "changes": ["description_id", "rating_class"], "drop_share": 0.2}}
    assert _markers(before)["star-rating"] == _markers(during)["rating-stars"] == [book.rating_word]
    assert refused.status_code == 400 and "unknown redesign change 'rating_clas'" in refused.json()["error"]
    assert still == set_.json()
    assert off.json() == {"redesign": None}
    assert after == before


def test_a_redesign_from_a_later_day_lands_when_the_day_moves_on(sandbox_factory: SandboxFactory) -> None:
    server = sandbox_factory(day=0, redesign=Redesign(1, frozenset({Change.RATING_CLASS})))

    day0 = _markers(httpx.get(server.url_for("/index.html"), timeout=10).text)
    httpx.post(server.url_for("/__sandbox__/day"), timeout=10)
    day1 = _markers(httpx.get(server.url_for("/index.html"), timeout=10).text)

    assert day0["rating-stars"] == [] and len(day0["star-rating"]) == 20
    assert day1["star-rating"] == [] and len(day1["rating-stars"]) == 20
    assert server.redesign == Redesign(1, frozenset({Change.RATING_CLASS}))


# --- what the redesign does to the pipeline's parser today ---------------------------------------------------


def test_the_redesign_reaches_the_parser_as_a_page_that_breaks_the_books_contract(
    catalogue: Catalogue,
) -> None:
    """The sandbox's renamed class and id reach ``parse_book`` as a product page without its rating: a
    ``ContractViolation`` naming the required field (the description is optional, so only the crawl's drift
    judgement can tell its loss from a book without one); listing cards, which are not the record, read no
    rating."""
    redesign = Redesign(DAY, frozenset({Change.RATING_CLASS, Change.DESCRIPTION_ID}))
    book = _described(catalogue, redesign)
    url = "http://sandbox" + book.url_path
    before = Catalogue(seed=0, day=DAY - 1)

    the_day_before = parse_book(_page(Site(before, redesign=redesign), book.url_path), url)
    with pytest.raises(ContractViolation) as violation:
        parse_book(_page(Site(catalogue, redesign=redesign), book.url_path), url)
    cards = parse_listing(_page(Site(catalogue, redesign=redesign), "/index.html"), "http://sandbox/index.html").cards

    assert (the_day_before.rating, the_day_before.description) == (book.rating, book.description)
    assert violation.value.kind is ErrorKind.MISSING_FIELD and violation.value.fields == ("rating",)
    assert [card.rating for card in cards] == [None] * 20
