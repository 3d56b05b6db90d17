"""Parsers on synthesized pages: category pages, error pages, truncated HTML, and the small helpers."""

from __future__ import annotations

from decimal import Decimal

import pytest

from book_assets.scraper.errors import ContractViolation, ErrorKind, NotABookPage, NotAListingPage, ParseError
from book_assets.scraper.parsers import (
    parse_book,
    parse_listing,
    parse_price,
    parse_stock,
    rating_from_word,
)

SITE = "https://books.toscrape.com/"
MYSTERY = SITE + "catalogue/category/books/mystery_3/index.html"


def _card(slug: str, title: str, price: str, rating: str) -> str:
    # Attribute order and whitespace differ from the root listing on purpose.
    return f"""
    <li class="col-xs-6 col-sm-4 col-md-3 col-lg-3">
      <article class="product_pod">
        <div class="image_container">
          <a href="../../../{slug}/index.html"><img src="../../../../media/cache/x.jpg" alt="{title}"
             class="thumbnail"></a>
        </div>
        <p class="star-rating {rating}">
          <i class="icon-star"></i>
        </p>
        <h3><a title="{title}"   href="../../../{slug}/index.html" >{title[:10]}...</a></h3>
        <div class="product_price">
          <p class="price_color">  {price}
          </p>
          <p class="instock availability"><i class="icon-ok"></i> In stock </p>
        </div>
      </article>
    </li>"""


def category_page(
    name: str,
    cards: list[str],
    *,
    results: str,
    pager: str = "",
    breadcrumb_ancestors: str = '<li><a href="../../books_1/index.html">Books</a></li>',
) -> str:
    """A category page shaped like the live site's ``catalogue/category/books/<slug>_<id>/`` pages."""
    return f"""<!DOCTYPE html><html lang="en-us" class="no-js"><head>
    <title>{name} | Books to Scrape - Sandbox</title>
    <meta http-equiv="content-type" content="text/html; charset=UTF-8" /></head>
    <body id="default" class="default"><div class="container-fluid page"><div class="page_inner">
    <ul class="breadcrumb">
      <li><a href="../../../../index.html">Home</a></li>
      {breadcrumb_ancestors}
      <li class="active">{name}</li>
    </ul>
    <div class="row"><div class="col-sm-8 col-md-9">
      <div class="page-header action"><h1>{name}</h1></div>
      <form method="get" class="form-horizontal"><div style="display:none"></div>{results}</form>
      <section><div class="alert alert-warning" role="alert"><strong>Warning!</strong> demo</div>
        <div><ol class="row">{"".join(cards)}</ol>
        <div>{pager}</div></div>
      </section>
    </div></div></div></div><footer class="footer container-fluid"></footer></body></html>"""


TWENTY = [_card(f"book-{i}_{100 + i}", f"Mystery Book &amp; Co. {i}", f"£{10 + i}.50", "Four") for i in range(20)]
MYSTERY_PAGER = """<ul class="pager"><li class="current">
            Page 1 of 2
        </li><li class="next"><a href="page-2.html">next</a></li></ul>"""


def test_category_page_gives_category_and_resolves_parent_relative_links() -> None:
    html = category_page(
        "Mystery",
        TWENTY,
        results="<strong>32</strong> results - showing <strong>1</strong> to <strong>20</strong>.",
        pager=MYSTERY_PAGER,
    )
    listing = parse_listing(html, MYSTERY)
    assert listing.category == "Mystery"
    assert len(listing.cards) == 20
    assert listing.cards[0].url == SITE + "catalogue/book-0_100/index.html"
    assert listing.cards[0].title == "Mystery Book & Co. 0"
    assert listing.cards[0].price == Decimal("10.50")
    assert listing.cards[0].price_text == "£10.50"
    assert listing.cards[0].rating == 4
    assert listing.next_url == SITE + "catalogue/category/books/mystery_3/page-2.html"
    assert (listing.page_number, listing.page_count, listing.result_count) == (1, 2, 32)


def test_single_page_category_has_no_pager_and_no_next() -> None:
    cards = TWENTY[:3]
    html = category_page("Poetry", cards, results="<strong>3</strong> results.")
    listing = parse_listing(html, SITE + "catalogue/category/books/poetry_23/index.html")
    assert listing.category == "Poetry"
    assert listing.next_url is None
    assert (listing.page_number, listing.page_count, listing.result_count) == (None, None, 3)
    assert [c.url for c in listing.cards] == [SITE + f"catalogue/book-{i}_{100 + i}/index.html" for i in range(3)]


def test_all_books_category_counts_as_uncategorised() -> None:
    html = category_page(
        "Books",
        TWENTY,
        breadcrumb_ancestors="",
        pager=MYSTERY_PAGER.replace("2", "50"),
        results="<strong>1000</strong> results - showing <strong>1</strong> to <strong>20</strong>.",
    )
    listing = parse_listing(html, SITE + "catalogue/category/books_1/index.html")
    assert listing.category is None
    # ../../../ from catalogue/category/books_1/ climbs above the site root; urljoin clamps it there.
    assert listing.cards[0].url == SITE + "book-0_100/index.html"


def test_listing_with_fewer_cards_than_announced_is_rejected_as_truncated() -> None:
    html = category_page(
        "Mystery",
        TWENTY[:7],
        results="<strong>32</strong> results - showing <strong>1</strong> to <strong>20</strong>.",
        pager=MYSTERY_PAGER,
    )
    with pytest.raises(NotAListingPage, match="truncated"):
        parse_listing(html, MYSTERY)


def test_listing_that_lost_its_next_link_is_rejected() -> None:
    pager = '<ul class="pager"><li class="current">Page 1 of 2</li></ul>'
    html = category_page("Mystery", TWENTY, results="<strong>32</strong> results.", pager=pager)
    with pytest.raises(NotAListingPage, match="next link"):
        parse_listing(html, MYSTERY)


def notice_page(heading: str, *, sidebar: str = "") -> str:
    """A page of the site's template that is no listing: breadcrumb, page header, a message (and a sidebar)."""
    return f"""<!DOCTYPE html><html lang="en-us"><head><title>Server error | Books to Scrape</title></head>
    <body id="default" class="default"><div class="container-fluid page"><div class="page_inner">
    <ul class="breadcrumb"><li><a href="../../../../index.html">Home</a></li><li class="active">Error</li></ul>
    <div class="row">{sidebar}<div class="col-sm-8 col-md-9">
      <div class="page-header action"><h1>{heading}</h1></div>
      <p>We're sorry, but an error occurred. Please try again later.</p>
    </div></div></div></div></body></html>"""


SIDEBAR = """<aside class="sidebar"><div class="side_categories"><ul class="nav nav-list"><li>
    <a href="../books_1/index.html">Books</a><ul><li><a href="../travel_2/index.html">Travel</a></li></ul></li></ul>
    </div></aside>"""


@pytest.mark.parametrize(
    "html",
    [
        notice_page("Something went wrong"),
        notice_page("We'll be back soon"),
        notice_page("Something went wrong", sidebar=SIDEBAR),  # the sidebar alone does not make a listing
        category_page("Mystery", [], results=""),  # a listing's chrome with neither cards nor a count
    ],
)
def test_a_page_of_the_site_template_without_cards_or_a_result_count_is_not_a_listing(html: str) -> None:
    with pytest.raises(NotAListingPage, match="no book cards and no result count"):
        parse_listing(html, MYSTERY)


def test_an_explicit_zero_results_listing_is_an_empty_listing() -> None:
    listing = parse_listing(category_page("Mystery", [], results="<strong>0</strong> results."), MYSTERY)
    assert (listing.cards, listing.result_count, listing.next_url) == ([], 0, None)


@pytest.mark.parametrize(
    ("cards", "results", "pager", "message"),
    [
        ([], "<strong>32</strong> results.", "", "shows 32 results but no book card"),
        (TWENTY[:3], "<strong>2</strong> results.", "", "has 3 cards but shows 2 results"),
        (TWENTY[:3], "<strong>5</strong> results.", "", "a single page of 5 results with 3 cards"),
        (
            TWENTY,
            "<strong>12</strong> results - showing <strong>1</strong> to <strong>20</strong>.",
            MYSTERY_PAGER,
            "shows results 1-20 of 12",
        ),
        (
            TWENTY,
            "<strong>32</strong> results - showing <strong>1</strong> to <strong>20</strong>.",
            MYSTERY_PAGER.replace("Page 1 of 2", "Page 3 of 2"),
            "shows page 3 of 2",
        ),
    ],
)
def test_a_listing_whose_cards_count_and_pager_disagree_is_rejected(
    cards: list[str], results: str, pager: str, message: str
) -> None:
    with pytest.raises(NotAListingPage, match=message):
        parse_listing(category_page("Mystery", cards, results=results, pager=pager), MYSTERY)


def test_last_listing_page_has_no_next_url() -> None:
    pager = (
        '<ul class="pager"><li class="previous"><a href="page-49.html">previous</a></li>'
        '<li class="current">Page 50 of 50</li></ul>'
    )
    html = category_page("Mystery", TWENTY, results="", pager=pager)
    listing = parse_listing(html, SITE + "catalogue/page-50.html")
    assert listing.next_url is None
    assert (listing.page_number, listing.page_count) == (50, 50)


BOOK = """<html><body>
<ul class="breadcrumb"><li><a href="../../index.html">Home</a></li>
<li><a href="../category/books_1/index.html">Books</a></li>
<li><a href="../category/books/poetry_23/index.html">Poetry &amp; Verse</a></li>
<li class="active">X</li></ul>
<article class="product_page"><div class="row"><div class="col-sm-6 product_main">
<h1>  Tom &amp; Jerry: Ça va   </h1><p class="price_color">£1,051.07</p>
<p class="star-rating two"><i class="icon-star"></i></p>
<p class="instock availability"><i class="icon-ok"></i>
   Out of stock
</p>
</div></div>
<div id="product_description" class="sub-header"><h2>Product Description</h2></div>
<p>  Café &lt;b&gt; crème  </p>
<table class="table table-striped">
<tr><th>UPC</th><td>abc</td></tr><tr><th>Product Type</th><td>Books</td></tr>
<tr><th>Price (excl. tax)</th><td>£1,000.00</td></tr><tr><th>Price   (incl. tax)</th><td>£1,051.07</td></tr>
<tr><th>Tax</th><td>£51.07</td></tr>
<tr><th>Number of reviews</th><td>3</td></tr>
</table></article></body></html>"""


def test_book_page_without_availability_row_reads_it_from_the_product_box() -> None:
    book = parse_book(BOOK, SITE + "catalogue/x_1/index.html")
    assert book.title == "Tom & Jerry: Ça va"
    assert book.category == "Poetry & Verse"
    assert book.description == "Café <b> crème"
    assert book.price == Decimal("1051.07")
    assert book.price_excl_tax == Decimal("1000.00")
    assert book.tax == Decimal("51.07")
    assert book.availability == "Out of stock"
    assert book.stock == 0
    assert book.num_reviews == 3
    assert (book.rating, book.rating_text) == (2, "two")


NOT_FOUND = """<!DOCTYPE html><html><head><title>404 Not Found</title></head>
<body><h1>Not Found</h1><p>The requested URL was not found on the server.</p></body></html>"""


@pytest.mark.parametrize(
    "html",
    [
        NOT_FOUND,
        "",
        "\x00\x01garbage<<<>>>",
        "<html><body><p>hello</p></body></html>",
        BOOK[: BOOK.index("<article")],  # cut off before the product box
        BOOK.replace("<h1>  Tom &amp; Jerry: Ça va   </h1>", "<h1> </h1>"),
    ],
    ids=["404", "empty", "garbage", "plain", "truncated-before-product", "blank-title"],
)
def test_html_that_is_not_a_product_page_raises_not_a_book_page(html: str) -> None:
    with pytest.raises(NotABookPage):
        parse_book(html, SITE)


@pytest.mark.parametrize(
    ("html", "message"),
    [
        (BOOK.replace('<p class="star-rating two">', '<p class="rating-stars two">'), "missing rating"),
        (BOOK.replace("<tr><th>UPC</th><td>abc</td></tr>", ""), "missing upc"),
        (BOOK.replace('<p class="price_color">£1,051.07</p>', ""), "missing price"),
        (
            BOOK.replace('<li><a href="../category/books/poetry_23/index.html">Poetry &amp; Verse</a></li>', ""),
            "missing category",
        ),
        (BOOK[: BOOK.index("<table")], "missing upc, product_type, price_excl_tax, price_incl_tax, tax, num_reviews"),
    ],
    ids=["rating-class-renamed", "no-upc", "no-price", "no-category", "truncated-before-table"],
)
def test_product_page_without_a_required_field_is_a_missing_field_naming_it(html: str, message: str) -> None:
    with pytest.raises(ContractViolation) as info:
        parse_book(html, SITE)
    assert info.value.kind is ErrorKind.MISSING_FIELD
    assert str(info.value) == message


def test_product_page_without_its_optional_description_still_parses() -> None:
    html = BOOK.replace('<div id="product_description" class="sub-header">', '<div id="product-description">')
    assert parse_book(html, SITE).description is None


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("<td>£1,000.00</td>", "<td>£-1.00</td>", "bad price_excl_tax (negative: -1.00)"),
        ("<td>£1,000.00</td>", "<td>£1e308</td>", "bad price_excl_tax (not an amount: '£1e308')"),
        ("<td>£51.07</td>", "<td>£1.234,56</td>", "bad tax (not an amount: '£1.234,56')"),
        ("<td>£51.07</td>", "<td>£0.125</td>", "bad tax (more than two decimal places: 0.125)"),
        ("<td>3</td>", "<td>2147483648</td>", "bad num_reviews (too large: 2147483648)"),
        ("<td>3</td>", "<td>three</td>", "bad num_reviews (not a number: 'three')"),
        ("Out of stock", "In stock (2147483648 available)", "bad stock (too large: 2147483648)"),
        ('"star-rating two"', '"star-rating"', "bad rating (no rating word in class 'star-rating')"),
    ],
    ids=[
        "negative",
        "exponent",
        "ambiguous-separators",
        "three-places",
        "reviews-overflow",
        "reviews-word",
        "stock-overflow",
        "rating-without-word",
    ],
)
def test_product_page_with_a_value_out_of_its_type_is_a_bad_value_naming_it(old: str, new: str, message: str) -> None:
    assert old in BOOK
    with pytest.raises(ContractViolation) as info:
        parse_book(BOOK.replace(old, new, 1), SITE)
    assert (info.value.kind, str(info.value)) == (ErrorKind.BAD_VALUE, message)


def test_a_missing_field_outweighs_a_bad_value_and_both_are_named_on_one_line() -> None:
    html = BOOK.replace("<tr><th>UPC</th><td>abc</td></tr>", "").replace("<td>3</td>", "<td>-</td>")
    with pytest.raises(ContractViolation) as info:
        parse_book(html, SITE)
    assert info.value.kind is ErrorKind.MISSING_FIELD
    assert str(info.value) == "missing upc; bad num_reviews (not a number: '-')"
    assert info.value.fields == ("upc", "num_reviews")


@pytest.mark.parametrize("html", [NOT_FOUND, "", "garbage", BOOK])
def test_non_listing_html_raises_not_a_listing_page(html: str) -> None:
    with pytest.raises(NotAListingPage):
        parse_listing(html, SITE)


def test_not_a_book_page_message_is_one_line() -> None:
    with pytest.raises(NotABookPage) as info:
        parse_book(NOT_FOUND, SITE)
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ParseError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        ("£51.77", "51.77"),
        ("  £0.00 ", "0.00"),
        ("£1,234.50", "1234.50"),
        ("51", "51"),
        ("€ 3.5", "3.5"),
        ("£-1.00", "-1.00"),
    ],
)
def test_parse_price_reads_amount(text: str, amount: str) -> None:
    assert parse_price(text) == Decimal(amount)


@pytest.mark.parametrize("text", ["£", "£1e308", "£1.234,56", "£1,23", "£51.77 £2.00", "£ NaN"])
def test_parse_price_refuses_what_is_not_one_plain_amount(text: str) -> None:
    with pytest.raises(ParseError):
        parse_price(text)


@pytest.mark.parametrize(
    ("word", "value"),
    [
        ("One", 1),
        ("two", 2),
        ("THREE", 3),
        ("Four", 4),
        ("Five", 5),
        ("Zero", None),
        ("", None),
        (None, None),
    ],
)
def test_rating_from_word(word: str | None, value: int | None) -> None:
    assert rating_from_word(word) == value


@pytest.mark.parametrize(
    ("text", "stock"),
    [
        ("In stock (22 available)", 22),
        ("In stock (1 available)", 1),
        ("  In stock\n   (1,200 available) ", 1200),
        ("Out of stock", 0),
        ("In stock", None),
        ("", None),
    ],
)
def test_parse_stock(text: str, stock: int | None) -> None:
    assert parse_stock(text) == stock
