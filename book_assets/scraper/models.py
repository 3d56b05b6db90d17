"""Typed results of parsing a page of books.toscrape.com.

Frozen so a parsed page can be shared between the crawler, the storage layer and tests without anyone
mutating it behind the others' backs. Money is ``Decimal`` (never float) so prices round-trip exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from book_assets.scraper.contract import FieldSpec, FieldType, RecordContract


@dataclass(frozen=True, slots=True)
class BookCard:
    """One book as shown on a listing page (``article.product_pod``).

    Attributes:
        url: Absolute URL of the book page.
        title: Full title, from the link's ``title`` attribute (the link text is truncated with "...").
        price: Price as a Decimal, e.g. ``Decimal("51.77")``.
        price_text: Price as shown, e.g. ``"£51.77"``.
        rating: Star rating 1-5, or None if the card shows none.
    """

    url: str
    title: str
    price: Decimal
    price_text: str
    rating: int | None


@dataclass(frozen=True, slots=True)
class ListingPage:
    """A page listing books: the root, ``catalogue/page-N.html`` or a category page.

    Attributes:
        url: The URL the page was fetched from (links are resolved against it).
        cards: Books on the page, in page order.
        next_url: Absolute URL of the next page, or None on the last page.
        category: Category name on a category page; None on the root listing and the all-books category.
        page_number: X of "Page X of Y", or None when the page has no pager (a single-page listing).
        page_count: Y of "Page X of Y", or None when the page has no pager.
        result_count: Total results across all pages ("1000 results"), or None if not shown.
        category_links: ``(name, absolute URL)`` of every category in the sidebar, in page order.
    """

    url: str
    cards: list[BookCard]
    next_url: str | None
    category: str | None
    page_number: int | None
    page_count: int | None
    result_count: int | None
    category_links: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class BookDetail:
    """A book page (``catalogue/<slug>_<id>/index.html``).

    Attributes:
        url: The URL the page was fetched from.
        title: Full title from ``div.product_main h1``.
        category: The breadcrumb's third link (e.g. "Poetry").
        description: Text of the paragraph after ``#product_description``; None when the book has none.
        upc: The "UPC" row of the product table.
        product_type: The "Product Type" row (e.g. "Books").
        price_excl_tax: "Price (excl. tax)" row.
        price_incl_tax: "Price (incl. tax)" row.
        tax: "Tax" row.
        price: Price shown in ``p.price_color`` of the product box.
        price_text: That price as shown, e.g. "£51.77".
        availability: Availability text, e.g. "In stock (22 available)".
        stock: Count parsed from availability; 0 when out of stock; None when no count is shown.
        num_reviews: "Number of reviews" row.
        rating: Star rating 1-5, or None when the page shows none.
        rating_text: The rating's class word (e.g. "Three"), or None.
    """

    url: str
    title: str
    category: str
    description: str | None
    upc: str
    product_type: str
    price_excl_tax: Decimal
    price_incl_tax: Decimal
    tax: Decimal
    price: Decimal
    price_text: str
    availability: str
    stock: int | None
    num_reviews: int
    rating: int | None
    rating_text: str | None


#: The book record's field contract (:mod:`book_assets.scraper.contract`): every book page of the site shows
#: these, but a description (some books have none) and a stock count (a listing's "In stock" shows none).
BOOK_CONTRACT = RecordContract(
    "book",
    (
        FieldSpec("title", FieldType.TEXT),
        FieldSpec("category", FieldType.TEXT),
        FieldSpec("upc", FieldType.TEXT),
        FieldSpec("product_type", FieldType.TEXT),
        FieldSpec("price", FieldType.MONEY),
        FieldSpec("price_excl_tax", FieldType.MONEY),
        FieldSpec("price_incl_tax", FieldType.MONEY),
        FieldSpec("tax", FieldType.MONEY),
        FieldSpec("availability", FieldType.TEXT),
        FieldSpec("num_reviews", FieldType.COUNT),
        FieldSpec("rating", FieldType.RATING),
        FieldSpec("description", FieldType.TEXT, required=False),
        FieldSpec("stock", FieldType.COUNT, required=False),
    ),
)
