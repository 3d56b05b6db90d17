"""Pure parsers for books.toscrape.com pages: functions of ``(html, url)``, no I/O.

Each page is parsed once with selectolax (Lexbor), which decodes entities (``&amp;`` -> ``&``) and tolerates
the site's markup; every link is resolved against the page URL with ``urljoin`` because the site uses
relative links whose base differs by page (``catalogue/x_1/index.html`` on the root, ``x_1/index.html`` on
``catalogue/page-2.html``, ``../../../x_1/index.html`` on category pages).

A page that is not what it should be raises a ``ParseError`` subclass rather than producing a half-filled
row: a book page is first a product page (:class:`NotABookPage` if not), then a record that keeps the book's
field contract (:class:`ContractViolation` naming the fields if not); neither is ever stored as a book.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import urljoin, urlsplit

from selectolax.lexbor import LexborHTMLParser, LexborNode

from book_assets.scraper.contract import Problem
from book_assets.scraper.errors import ContractViolation, NotABookPage, NotAListingPage, ParseError
from book_assets.scraper.models import BOOK_CONTRACT, BookCard, BookDetail, ListingPage

RATING_WORDS: dict[str, int] = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}

# A currency sign or code, then one plain amount: "£51.77", "€ 3.5", "£1,234.50", "£-1.00", "51".
_PRICE_RE = re.compile(
    r"(?P<pre_sign>-?)\s*[^\d\s.,+-]*\s*(?P<sign>-?)(?P<amount>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)"
)
_STOCK_RE = re.compile(r"\((\d[\d,]*)\s+available\)", re.IGNORECASE)
_PAGE_OF_RE = re.compile(r"Page\s+(\d+)\s+of\s+(\d+)", re.IGNORECASE)
_WS_RE = re.compile(r"\s+")
# The all-books category ("Books") lists the same books as the root; it is treated as uncategorised.
_ALL_BOOKS_CATEGORY_RE = re.compile(r"/category/books_1/(?:index\.html|page-\d+\.html)?$")


# --------------------------------------------------------------------------- small pure helpers


def parse_price(text: str) -> Decimal:
    """Return the amount of a price text such as ``"£51.77"`` (a currency sign or code and spaces ignored).

    Strict on purpose: the whole text must be one plain amount, digits with an optional thousands comma
    every three digits and an optional decimal point. ``£1e308`` is not an amount (Decimal would read the
    exponent), and ``£1.234,56`` is ambiguous (a continental thousands dot): reading its first number would
    store 1.234 for 1234.56, so it is refused rather than guessed. A sign is kept, for the contract to judge.

    Raises:
        ParseError: ``text`` is not one plain amount.
    """
    match = _PRICE_RE.fullmatch(text.strip())
    if match is None:
        raise ParseError(f"not a price: {text.strip()!r}")
    sign = "-" if match.group("pre_sign") or match.group("sign") else ""
    return Decimal(sign + match.group("amount").replace(",", ""))


def rating_from_word(word: str | None) -> int | None:
    """Map a star-rating class word ("One".."Five", any case) to 1-5; None for anything else."""
    if word is None:
        return None
    return RATING_WORDS.get(word.strip().lower())


def parse_stock(text: str) -> int | None:
    """Stock count from an availability text.

    ``"In stock (22 available)"`` -> 22; ``"Out of stock"`` -> 0; ``"In stock"`` (no count, as on listing
    cards) -> None.
    """
    match = _STOCK_RE.search(text)
    if match is not None:
        return int(match.group(1).replace(",", ""))
    if re.search(r"\bout\s+of\s+stock\b", text, re.IGNORECASE):
        return 0
    return None


def collapse_ws(text: str) -> str:
    """Strip and collapse runs of whitespace to one space (template indentation is not content)."""
    return _WS_RE.sub(" ", text).strip()


def resolve_link(base: str, href: str) -> str:
    """``href`` resolved against ``base``; an href too malformed to resolve (``http://[::1``) is returned as
    written, so one bad link is dropped by the crawler's host check instead of failing its whole page."""
    try:
        return urljoin(base, href)
    except ValueError:
        return href


# --------------------------------------------------------------------------- DOM helpers


def _text(node: LexborNode | None) -> str | None:
    """Stripped text of a node (entities decoded), or None when the node is absent."""
    if node is None:
        return None
    return (node.text(deep=True, separator="", strip=False) or "").strip()


def _rating_word(node: LexborNode | None) -> str | None:
    """The rating word among a ``p.star-rating`` element's classes (e.g. "Three")."""
    if node is None:
        return None
    classes = (node.attributes.get("class") or "").split()
    for cls in classes:
        if cls.lower() in RATING_WORDS:
            return cls
    return None


# --------------------------------------------------------------------------- listing pages


def _parse_card(article: LexborNode, url: str) -> BookCard:
    link = article.css_first("h3 a[href]") or article.css_first("a[href]")
    if link is None:
        raise NotAListingPage("book card without a link")
    href = (link.attributes.get("href") or "").strip()
    title = link.attributes.get("title")
    if title is None or not title.strip():
        img = article.css_first("img[alt]")
        title = (img.attributes.get("alt") if img is not None else None) or _text(link) or ""
    title = title.strip()
    if not href or not title:
        raise NotAListingPage("book card without an href or title")
    price_text = _text(article.css_first("p.price_color"))
    if not price_text:
        raise NotAListingPage(f"book card {href!r} without a price")
    return BookCard(
        url=resolve_link(url, href),
        title=title,
        price=parse_price(price_text),
        price_text=price_text,
        rating=rating_from_word(_rating_word(article.css_first("p.star-rating"))),
    )


def _listing_category(tree: LexborHTMLParser, url: str) -> str | None:
    """Category name on a category page; None on the root listing and the all-books category.

    A category page's breadcrumb is Home > Books > <Category> (the active item); the root listing's is
    Home > All products and the all-books category's is Home > Books, i.e. no ancestor link besides Home.
    """
    if "/category/" not in urlsplit(url).path or _ALL_BOOKS_CATEGORY_RE.search(urlsplit(url).path):
        return None
    heading = _text(tree.css_first("div.page-header h1"))
    if not heading:
        return None
    crumbs = tree.css("ul.breadcrumb li")
    if crumbs and len(crumbs) < 3:
        return None
    return heading


def _result_numbers(tree: LexborHTMLParser) -> tuple[int | None, int | None, int | None]:
    """(result_count, first, last) from "<b>1000</b> results - showing <b>1</b> to <b>20</b>."."""
    form = tree.css_first("form.form-horizontal")
    if form is None:
        return None, None, None
    numbers: list[int] = []
    for strong in form.css("strong"):
        text = (_text(strong) or "").replace(",", "")
        if text.isdigit():
            numbers.append(int(text))
    if not numbers:
        return None, None, None
    if len(numbers) >= 3:
        return numbers[0], numbers[1], numbers[2]
    return numbers[0], None, None


@dataclass(frozen=True)
class _Shown:
    """What a listing page shows about itself, for :func:`_listing_problem`."""

    cards: int
    result_count: int | None
    first: int | None
    last: int | None
    page_number: int | None
    page_count: int | None
    has_next: bool


def _listing_problem(shown: _Shown) -> str | None:
    """Why a listing page disagrees with itself, or None when its cards, "N results - showing X to Y" and
    "Page N of M" tell one story.

    The site (Django Oscar) shows the range and the pager only when the listing has more than one page, so a
    page that shows neither holds all of its results.
    """
    cards, results, first, last = shown.cards, shown.result_count, shown.first, shown.last
    number, count = shown.page_number, shown.page_count
    if first is not None and last is not None:
        if last - first + 1 != cards:
            return f"shows results {first}-{last} but has {cards} cards (truncated?)"
        if first < 1 or (results is not None and last > results):
            return f"shows results {first}-{last} of {results}"
    if results is not None and cards > results:
        return f"has {cards} cards but shows {results} results"
    if results and not cards:
        return f"shows {results} results but no book card"
    if results is not None and first is None and number is None and cards != results:
        return f"a single page of {results} results with {cards} cards (truncated?)"
    if number is not None and count is not None:
        if not 1 <= number <= count:
            return f"shows page {number} of {count}"
        if number < count and not shown.has_next:
            return f"page {number} of {count} has no next link (truncated?)"
    return None


def parse_listing(html: str, url: str) -> ListingPage:
    """Parse a listing page (root, ``catalogue/page-N.html``, category page) into a ``ListingPage``.

    A page is a listing only when it proves itself one, by what only a listing shows: book cards, or an
    explicit result count ("0 results" is an empty listing). A page in the site's own template without
    either (a 200 "Something went wrong", a maintenance page, a login wall) is not an empty listing: read as
    one, it would tell the crawl that its category has no books left. What the page shows must then agree
    with itself (:func:`_listing_problem`), so a page cut short or assembled wrong is never stored as whole.
    Whether it is the listing its task asked for (its category, its place in the chain) is the crawl's to
    judge (:func:`~book_assets.crawl.discovery.check_listing`).

    Raises:
        NotAListingPage: not a listing (book page, error or notice page, garbage) or visibly incomplete.
    """
    tree = LexborHTMLParser(html)
    if tree.css_first("article.product_page") is not None:
        raise NotAListingPage("is a book page")
    articles = tree.css("ol.row article.product_pod") or tree.css("article.product_pod")
    result_count, first, last = _result_numbers(tree)
    if not articles and result_count is None:
        heading = _text(tree.css_first("div.page-header h1")) or _text(tree.css_first("title")) or ""
        named = f" (heading {collapse_ws(heading)[:80]!r})" if heading else ""
        raise NotAListingPage(f"no book cards and no result count{named}")
    cards = [_parse_card(article, url) for article in articles]

    page_number = page_count = None
    current = _text(tree.css_first("ul.pager li.current"))
    if current:
        match = _PAGE_OF_RE.search(current)
        if match:
            page_number, page_count = int(match.group(1)), int(match.group(2))

    next_link = tree.css_first("ul.pager li.next a[href]")
    next_href = (next_link.attributes.get("href") or "").strip() if next_link is not None else ""
    next_url = resolve_link(url, next_href) if next_href else None

    shown = _Shown(len(cards), result_count, first, last, page_number, page_count, next_url is not None)
    problem = _listing_problem(shown)
    if problem is not None:
        raise NotAListingPage(problem)

    return ListingPage(
        url=url,
        cards=cards,
        next_url=next_url,
        category=_listing_category(tree, url),
        page_number=page_number,
        page_count=page_count,
        result_count=result_count,
        category_links=tuple(_category_links(tree, url)),
    )


# --------------------------------------------------------------------------- book pages


def _product_table(tree: LexborHTMLParser) -> dict[str, str]:
    """Rows of the product information table keyed by lower-cased header ("upc", "price (excl. tax)")."""
    rows: dict[str, str] = {}
    for tr in tree.css("article.product_page table tr"):
        th, td = tr.css_first("th"), tr.css_first("td")
        key, value = _text(th), _text(td)
        if key and value is not None:
            rows[collapse_ws(key).lower()] = value
    return rows


class _Reader:
    """The values of one product page's fields, each None when the page does not show it; a value shown but
    unreadable as its type (a price that is not an amount) is a problem of that field instead."""

    def __init__(self) -> None:
        self.unreadable: list[Problem] = []

    def money(self, field: str, text: str | None) -> Decimal | None:
        if not text:
            return None
        try:
            return parse_price(text)
        except ParseError:
            self.unreadable.append(Problem(field, f"not an amount: {text!r}"))
            return None

    def count(self, field: str, text: str | None) -> int | None:
        if not text:
            return None
        digits = text.replace(",", "")
        if not digits.isdigit():
            self.unreadable.append(Problem(field, f"not a number: {text!r}"))
            return None
        return int(digits)

    def rating(self, node: LexborNode | None) -> tuple[int | None, str | None]:
        """The rating and its class word; a ``p.star-rating`` without a rating word is a bad value."""
        if node is None:
            return None, None
        word = _rating_word(node)
        if word is None:
            self.unreadable.append(Problem("rating", f"no rating word in class {node.attributes.get('class')!r}"))
        return rating_from_word(word), word


def _product_box(tree: LexborHTMLParser) -> tuple[LexborNode, str]:
    """The product box and its title: what makes a page a product page (else NotABookPage)."""
    main = tree.css_first("article.product_page div.product_main")
    if main is None:
        raise NotABookPage("no div.product_main inside article.product_page")
    title = _text(main.css_first("h1"))
    if not title:
        raise NotABookPage("product box has no title")
    return main, title


def parse_book(html: str, url: str) -> BookDetail:
    """Parse a book page into a ``BookDetail`` that keeps :data:`~book_assets.scraper.models.BOOK_CONTRACT`.

    Raises:
        NotABookPage: the page is not a product page (no product box or no title: a 404 page, a listing,
            garbage, HTML cut off before the product).
        ContractViolation: a product page whose required fields are missing (``missing_field``: a redesign, a
            page cut off inside the product) or whose values are not of their type (``bad_value``).
    """
    tree = LexborHTMLParser(html)
    main, title = _product_box(tree)
    read = _Reader()
    crumbs = tree.css("ul.breadcrumb li a")
    rows = _product_table(tree)
    price_text = _text(main.css_first("p.price_color")) or None
    availability = collapse_ws(rows.get("availability") or _text(main.css_first("p.availability")) or "")
    rating, rating_text = read.rating(main.css_first("p.star-rating"))
    values: dict[str, Any] = {
        "title": title,
        "category": (_text(crumbs[2]) if len(crumbs) >= 3 else None) or None,
        "upc": rows.get("upc") or None,
        "product_type": rows.get("product type") or None,
        "price": read.money("price", price_text),
        "price_excl_tax": read.money("price_excl_tax", rows.get("price (excl. tax)")),
        "price_incl_tax": read.money("price_incl_tax", rows.get("price (incl. tax)")),
        "tax": read.money("tax", rows.get("tax")),
        "availability": availability or None,
        "num_reviews": read.count("num_reviews", rows.get("number of reviews")),
        "rating": rating,
        "description": _text(tree.css_first("div#product_description + p")) or None,
        "stock": parse_stock(availability),
    }
    unreadable = {p.field: p for p in read.unreadable}
    # A value shown but unreadable was read as None: its problem says why, not "missing".
    problems = [unreadable.get(p.field, p) for p in BOOK_CONTRACT.problems(values)]
    if problems:
        raise ContractViolation(problems)
    return BookDetail(url=url, price_text=price_text or "", rating_text=rating_text, **values)


# --------------------------------------------------------------------------- category sidebar


def _category_links(tree: LexborHTMLParser, url: str) -> list[tuple[str, str]]:
    """``(name, absolute URL)`` of every category in the sidebar (``div.side_categories``), in page order.

    The all-books entry ("Books", ``category/books_1``) is the sidebar's root, not
    a category, and is left out. Every listing page of the site carries the sidebar, so any of them can seed
    category discovery."""
    found: list[tuple[str, str]] = []
    for link in tree.css("div.side_categories ul.nav-list > li > ul > li > a[href]"):
        name = _text(link)
        href = (link.attributes.get("href") or "").strip()
        if name and href:
            found.append((collapse_ws(name), resolve_link(url, href)))
    return found
