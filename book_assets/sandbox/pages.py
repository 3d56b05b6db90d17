"""HTML of the replica, copied from the live site's templates (Django Oscar) and its URL scheme.

The markup follows the saved real pages in ``book_assets_tests/fixtures/real-site`` tag for tag where a scraper
could look (head, header, breadcrumb, sidebar, ``article.product_pod``, pager, ``div.product_main``,
``#product_description`` + ``p``, the striped table in the live site's row order), and every link is
relative exactly as on the live site, because resolving those links is where crawlers go wrong. A
``Redesign`` (``redesign.py``) changes that markup from a chosen simulated day on; without one every day
renders the live markup.

``Site`` maps a URL path to bytes. Pages are rendered on first request and kept in a bounded LRU (the whole
default site fits, so a server built per test costs nothing up front and a benchmark of the replica measures
serving, not templating; a 100,000-book catalogue renders most pages on demand). It also gives each page's
validators: an ``ETag`` (a hash of the body, so a page's ETag changes exactly when its bytes do) and the
simulated day of its last change (``Last-Modified``): for a book page the day its record last changed, for
a listing page found by comparing the page with the day before.
"""

from __future__ import annotations

import base64
import hashlib
import json
import posixpath
import re
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from email.utils import format_datetime

from book_assets.sandbox.catalogue import PAGE_SIZE, Book, Catalogue, Category
from book_assets.sandbox.redesign import TODAY, Markup, Redesign, markup_on

SITE_TITLE = "Books to Scrape - Sandbox"
#: Midnight UTC of simulated day 0: a page last changed on day N is ``Last-Modified`` N days later.
DAY_ZERO = datetime(2026, 1, 1, tzinfo=UTC)


def escape(text: str) -> str:
    """Django's ``escape``: the live site writes ``'`` as ``&#39;``, not Python's ``&#x27;``."""
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#39;")
    )


def escape_text(text: str) -> str:
    """Escape for text content only: the live description ``<p>`` keeps apostrophes raw."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def money(amount: Decimal) -> str:
    return f"£{amount:.2f}"


def truncate_words(text: str, words: int = 4) -> str:
    """Django's ``truncatewords`` as the live listing uses it: "A Light in the ..." for longer titles."""
    parts = text.split()
    if len(parts) <= words:
        return text
    return " ".join(parts[:words]) + " ..."


# --- shared page chrome ------------------------------------------------------------------------------------


def _head(prefix: str, title: str, description: str) -> str:
    return f"""

<!DOCTYPE html>
<!--[if lt IE 7]>      <html lang="en-us" class="no-js lt-ie9 lt-ie8 lt-ie7"> <![endif]-->
<!--[if IE 7]>         <html lang="en-us" class="no-js lt-ie9 lt-ie8"> <![endif]-->
<!--[if IE 8]>         <html lang="en-us" class="no-js lt-ie9"> <![endif]-->
<!--[if gt IE 8]><!--> <html lang="en-us" class="no-js"> <!--<![endif]-->
    <head>
        <title>
    {escape(title)} | {SITE_TITLE}
</title>

        <meta http-equiv="content-type" content="text/html; charset=UTF-8" />
        <meta name="created" content="24th Jun 2016 09:29" />
        <meta name="description" content="{description}" />
        <meta name="viewport" content="width=device-width" />
        <meta name="robots" content="NOARCHIVE,NOCACHE" />

        <!-- Le HTML5 shim, for IE6-8 support of HTML elements -->
        <!--[if lt IE 9]>
        <script src="//html5shim.googlecode.com/svn/trunk/html5.js"></script>
        <![endif]-->

            <link rel="shortcut icon" href="{prefix}static/oscar/favicon.ico" />

        <link rel="stylesheet" type="text/css" href="{prefix}static/oscar/css/styles.css" />
    <link rel="stylesheet" href="{prefix}static/oscar/js/bootstrap-datetimepicker/bootstrap-datetimepicker.css" />
    <link rel="stylesheet" type="text/css" href="{prefix}static/oscar/css/datetimepicker.css" />
    </head>

    <body id="default" class="default">

    <header class="header container-fluid">
        <div class="page_inner">
            <div class="row">
                <div class="col-sm-8 h1"><a href="{prefix}index.html">Books to Scrape</a><small> We love being scraped!</small>
</div>
            </div>
        </div>
    </header>

        <div class="container-fluid page">
            <div class="page_inner">
"""  # noqa: E501


def _foot(prefix: str, extra_init: str = "") -> str:
    return f"""
<footer class="footer container-fluid">
</footer>

            <!-- jQuery -->
            <script src="http://ajax.googleapis.com/ajax/libs/jquery/1.9.1/jquery.min.js"></script>
            <script>window.jQuery || document.write('<script src="{prefix}static/oscar/js/jquery/jquery-1.9.1.min.js"><\\/script>')</script>

    <!-- Twitter Bootstrap -->
    <script type="text/javascript" src="{prefix}static/oscar/js/bootstrap3/bootstrap.min.js"></script>
    <!-- Oscar -->
    <script src="{prefix}static/oscar/js/oscar/ui.js" type="text/javascript" charset="utf-8"></script>

    <script src="{prefix}static/oscar/js/bootstrap-datetimepicker/bootstrap-datetimepicker.js" type="text/javascript" charset="utf-8"></script>
    <script src="{prefix}static/oscar/js/bootstrap-datetimepicker/locales/bootstrap-datetimepicker.all.js" type="text/javascript" charset="utf-8"></script>

        <script type="text/javascript">
            $(function() {{
    oscar.init();
{extra_init}
            }});
        </script>

        <!-- Version: N/A -->
    </body>
</html>
"""  # noqa: E501


def _breadcrumb(items: list[tuple[str, str | None]]) -> str:
    """Breadcrumb items as (text, href); the last one (href None) is the active item."""
    lines = ['<ul class="breadcrumb">']
    for text, href in items:
        if href is None:
            lines.append(f'    <li class="active">{escape(text)}</li>')
        else:
            lines.append(f'    <li>\n        <a href="{href}">{escape(text)}</a>\n    </li>')
    lines.append("</ul>")
    return "\n".join(lines) + "\n"


# --- listing pages -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Listing:
    """What differs between listing pages: where they sit (``prefix`` back to the root, ``book_prefix`` to
    the book pages), their heading and breadcrumb, and how their pager names pages."""

    prefix: str
    book_prefix: str
    heading: str
    breadcrumb: list[tuple[str, str | None]]
    page_name: str  # format string for page N, relative to the page's own directory
    directory: str  # the page's directory from the site root, e.g. "catalogue/category/books/travel_2"


def _relative(target: str, directory: str) -> str:
    """The shortest relative link from a page in ``directory`` to ``target`` (both from the site root), as
    the live site's mirror writes them: a category page links its siblings as ``../travel_2/index.html``."""
    return posixpath.relpath(target, directory or ".")


def _sidebar(directory: str, categories: list[Category]) -> str:
    def item(href: str, name: str) -> str:
        return (
            f'<a href="{href}">\n                            \n'
            f"                                {escape(name)}\n"
            "                            \n                        </a>"
        )

    lines = [
        '<aside class="sidebar col-sm-4 col-md-3">',
        '<div id="promotions_left">',
        "</div>",
        '<div class="side_categories">',
        '<ul class="nav nav-list">',
        "<li>",
        item(_relative("catalogue/category/books_1/index.html", directory), "Books"),
        "<ul>",
    ]
    for category in categories:
        href = _relative(f"catalogue/category/books/{category.key}/index.html", directory)
        lines += ["<li>", item(href, category.name), "</li>"]
    lines += ["</ul></li>", "</ul>", "</div>", "</aside>"]
    return "\n".join(lines) + "\n"


def _product_pod(book: Book, listing: Listing, markup: Markup) -> str:
    href = f"{listing.book_prefix}{book.key}/index.html"
    image = listing.prefix + book.image_path.lstrip("/")
    title = escape(book.title)
    stars = "\n".join(['            <i class="icon-star"></i>'] * 5)
    return f"""
        <li class="col-xs-6 col-sm-4 col-md-3 col-lg-3">

<article class="product_pod">

        <div class="image_container">
                <a href="{href}"><img src="{image}" alt="{title}" class="thumbnail"></a>
        </div>

        <p class="{markup.rating_class} {book.rating_word}">
{stars}
        </p>

        <h3><a href="{href}" title="{title}">{escape(truncate_words(book.title))}</a></h3>

        <div class="product_price">

        <p class="price_color">{money(book.price)}</p>

<p class="instock availability">
    <i class="icon-ok"></i>

        In stock

</p>

    <form>
        <button type="submit" class="btn btn-primary btn-block" data-loading-text="Adding...">Add to basket</button>
    </form>

        </div>

</article>

        </li>
"""


def _result_count(total: int, start: int, end: int, pages: int) -> str:
    """Oscar's count line: with a range only when the listing has more than one page."""
    plural = "result" if total == 1 else "results"
    if pages > 1:
        return f"<strong>{total}</strong> {plural} - showing <strong>{start}</strong> to <strong>{end}</strong>."
    return f"<strong>{total}</strong> {plural}."


def _pager(number: int, pages: int, listing: Listing) -> str:
    if pages <= 1:
        return ""
    lines = ["        <div>", '            <ul class="pager">']
    if number > 1:
        prev = listing.page_name.format(n=number - 1)
        lines.append(f'                <li class="previous"><a href="{prev}">previous</a></li>')
    lines.append(
        '                <li class="current">\n            \n'
        f"                Page {number} of {pages}\n            \n            </li>"
    )
    if number < pages:
        nxt = listing.page_name.format(n=number + 1)
        lines.append(f'                <li class="next"><a href="{nxt}">next</a></li>')
    lines += ["            </ul>", "        </div>"]
    return "\n".join(lines) + "\n"


def render_listing(
    catalogue: Catalogue, books: list[Book], number: int, listing: Listing, markup: Markup = TODAY
) -> str:
    """One page (1-based ``number``) of a listing of ``books``; the caller checks ``number`` is in range."""
    pages = max(1, -(-len(books) // PAGE_SIZE))
    start = (number - 1) * PAGE_SIZE
    chunk = books[start : start + PAGE_SIZE]
    pods = "".join(_product_pod(book, listing, markup) for book in chunk)
    count = _result_count(len(books), start + 1, start + len(chunk), pages)
    return (
        _head(listing.prefix, listing.heading, "")
        + _breadcrumb(listing.breadcrumb)
        + f"""
<div class="row">

    {_sidebar(listing.directory, catalogue.categories)}
    <div class="col-sm-8 col-md-9">

                <div class="page-header action">
                    <h1>{escape(listing.heading)}</h1>
                </div>

<div id="messages">

</div>

<div id="promotions">

</div>

    <form method="get" class="form-horizontal">

        <div style="display:none">

        </div>

                {count}

    </form>

            <section>
                <div class="alert alert-warning" role="alert"><strong>Warning!</strong> This is a demo website for web scraping purposes. Prices and ratings here were randomly assigned and have no real meaning.</div>

                <div>
                    <ol class="row">
{pods}
                    </ol>

{_pager(number, pages, listing)}
                </div>

            </section>

    </div>

</div><!-- /row -->

            </div><!-- /page_inner -->
        </div><!-- /container-fluid -->
"""  # noqa: E501
        + _foot(listing.prefix, "\n    oscar.search.init();\n")
    )


# --- book pages --------------------------------------------------------------------------------------------

_BOOK_PREFIX = "../../"


def _product_main_inner(book: Book, markup: Markup) -> str:
    stars = "\n".join(['        <i class="icon-star"></i>'] * 5)
    identifiers = (
        ""
        if markup.upc_in_table
        else f"""
            <dl class="product-identifiers">
                <dt>UPC</dt>
                <dd>{book.upc}</dd>
            </dl>
"""
    )
    rating_class = "rating-stars" if markup.rating_widget else markup.rating_class
    widget = (
        """
            <form class="rate-book"><p class="star-rating One"><i class="icon-star"></i> Rate this book</p></form>
"""
        if markup.rating_widget
        else ""
    )
    return f"""

            <h1>{escape(book.title)}</h1>
{widget}{identifiers}
        <p class="price_color">{money(book.price)}</p>

<p class="instock availability">
    <i class="icon-ok"></i>

        {book.availability}

</p>

    <p class="{rating_class} {book.rating_word}">
{stars}

        <!-- <small><a href="/catalogue/{book.key}/reviews/">

                    {book.num_reviews} customer reviews

        </a></small>
         -->&nbsp;

</p>

            <hr/>

            <div class="alert alert-warning" role="alert"><strong>Warning!</strong> This is a demo website for web scraping purposes. Prices and ratings here were randomly assigned and have no real meaning.</div>

        """  # noqa: E501


def _description_block(book: Book, markup: Markup) -> str:
    if book.description is None or not markup.shows_description(book):
        return ""
    return f"""
        <div id="{markup.description_id}" class="sub-header">
            <h2>Product Description</h2>
        </div>
        {_description_text(book.description, markup)}
"""


#: The words of a description its teaser shows (``description_teaser``).
TEASER_WORDS = 3


def _description_text(description: str, markup: Markup) -> str:
    if not markup.description_teaser:
        return f"<p>{escape_text(description)}</p>"
    teaser = " ".join(description.split()[:TEASER_WORDS])
    return (
        f'<p class="teaser">{escape_text(teaser)} … <span class="read-more">Read more</span></p>\n'
        f'        <div id="full-description" class="collapse"><p>{escape_text(description)}</p></div>'
    )


def _table_rows(book: Book, markup: Markup) -> str:
    upc = f"""
        <tr>
            <th>UPC</th><td>{book.upc}</td>
        </tr>
"""
    return f"""{upc if markup.upc_in_table else ""}
        <tr>
            <th>Product Type</th><td>{book.product_type}</td>
        </tr>

            <tr>
                <th>Price (excl. tax)</th><td>{money(book.price_excl_tax)}</td>
            </tr>

                <tr>
                    <th>Price (incl. tax)</th><td>{money(book.price_incl_tax)}</td>
                </tr>
                <tr>
                    <th>Tax</th><td>{money(book.tax)}</td>
                </tr>

            <tr>
                <th>Availability</th>
                <td>{book.availability}</td>
            </tr>

            <tr>
                <th>Number of reviews</th>
                <td>{book.num_reviews}</td>
            </tr>

    """


def _js_builder(book: Book, markup: Markup) -> str:
    """The script of JavaScript mode: the product data travels base64-encoded, so neither a regex nor an
    HTML parser over the raw response finds it, and the script writes the normal-mode markup into the
    placeholders while the page parses (so it is there by ``DOMContentLoaded``)."""
    payload = {
        "main": _product_main_inner(book, markup),
        "description": _description_block(book, markup) or None,
        "table": _table_rows(book, markup),
    }
    encoded = base64.b64encode(json.dumps(payload).encode("utf-8")).decode("ascii")
    return f"""
<script type="text/javascript">
(function () {{
    var bytes = Uint8Array.from(atob("{encoded}"), function (c) {{ return c.charCodeAt(0); }});
    var data = JSON.parse(new TextDecoder("utf-8").decode(bytes));
    document.querySelector("div.product_main").innerHTML = data.main;
    document.querySelector("table.table-striped").innerHTML = data.table;
    var slot = document.getElementById("product_description_slot");
    if (data.description !== null) {{ slot.outerHTML = data.description; }} else {{ slot.remove(); }}
}})();
</script>
"""


def render_book(catalogue: Catalogue, book: Book, js_mode: bool = False, markup: Markup = TODAY) -> str:
    """A book's page; in ``js_mode`` the product block, description and table are filled by a script."""
    category = catalogue.category_of(book)
    shown = book.description if markup.shows_description(book) else None
    meta = f"\n    {escape(shown)}\n" if shown else "\n    \n"
    main = "" if js_mode else _product_main_inner(book, markup)
    description = (
        '\n        <div id="product_description_slot"></div>\n' if js_mode else _description_block(book, markup)
    )
    rows = "\n    " if js_mode else _table_rows(book, markup)
    script = _js_builder(book, markup) if js_mode else ""
    image = _BOOK_PREFIX + book.image_path.lstrip("/")
    return (
        _head(_BOOK_PREFIX, book.title, meta)
        + _breadcrumb(
            [
                ("Home", "../../index.html"),
                ("Books", "../category/books_1/index.html"),
                (category.name, f"../category/books/{category.key}/index.html"),
                (book.title, None),
            ]
        )
        + f"""

<div id="messages">

</div>

                <div class="content">

                    <div id="promotions">

                    </div>

                    <div id="content_inner">

<article class="product_page"><!-- Start of product page -->

    <div class="row">

        <div class="col-sm-6">

        <div id="product_gallery" class="carousel">
            <div class="thumbnail">
                <div class="carousel-inner">
                    <div class="item active">

                            <img src="{image}" alt="{escape(book.title)}" />

                    </div>
                </div>
            </div>
        </div>

        </div>

        <div class="col-sm-6 product_main">{main}</div><!-- /col-sm-6 -->

    </div><!-- /row -->
{description}
    <div class="sub-header">
        <h2>Product Information</h2>
    </div>
    <table class="table table-striped">{rows}</table>

        <section>
            <div id="reviews" class="sub-header">
            </div>
        </section>

</article><!-- End of product page -->
{script}
</div>
                </div>
            </div>
        </div>
"""
        + _foot(_BOOK_PREFIX)
    )


def render_login_wall(path: str) -> str:
    """A "Please log in" page served at ``path`` in place of the page (a soft block, see ``softblock.py``):
    the site's chrome, links relative to ``path``'s directory, no product and no listing."""
    prefix = "../" * max(0, path.count("/") - 1)
    return (
        _head(prefix, "Login or register", "")
        + _breadcrumb([("Home", f"{prefix}index.html"), ("Login or register", None)])
        + """
<div class="page-header action">
    <h1>Please log in to continue</h1>
</div>

<div id="messages">
    <div class="alert alert-info">You need to be signed in to view this page.</div>
</div>

<div class="row">
    <div class="col-sm-6 login_form">
        <form id="login_form" action="/accounts/login/" method="post">
            <h2>Log In</h2>
            <div class="form-group">
                <label for="id_login-username" class="control-label required">Email address</label>
                <input type="email" name="login-username" id="id_login-username" class="form-control" />
            </div>
            <div class="form-group">
                <label for="id_login-password" class="control-label required">Password</label>
                <input type="password" name="login-password" id="id_login-password" class="form-control" />
            </div>
            <button name="login_submit" type="submit" value="Log In" class="btn btn-lg btn-primary">Log In</button>
        </form>
    </div>
</div>

            </div><!-- /page_inner -->
        </div><!-- /container-fluid -->
"""
        + _foot(prefix)
    )


def render_notice(path: str, title: str, heading: str, message: str) -> str:
    """A page of the site's chrome served at ``path`` that is no page of the catalogue: a heading and a message,
    breadcrumb Home > ``title``, no product, no listing, no result count (Oscar's error and maintenance pages)."""
    prefix = "../" * max(0, path.count("/") - 1)
    return (
        _head(prefix, title, "")
        + _breadcrumb([("Home", f"{prefix}index.html"), (title, None)])
        + f"""
<div class="page-header action">
    <h1>{escape(heading)}</h1>
</div>

<div id="messages">
</div>

<p>{escape(message)}</p>

            </div><!-- /page_inner -->
        </div><!-- /container-fluid -->
"""
        + _foot(prefix)
    )


def render_error_page(path: str) -> str:
    """A server error rendered by the site as a 200 in its own template."""
    return render_notice(
        path, "Server error", "Something went wrong", "We're sorry, but an error occurred. Please try again later."
    )


def render_maintenance_page(path: str) -> str:
    """The site's holding page while it is down for maintenance, served as a 200."""
    return render_notice(
        path, "Down for maintenance", "We'll be back soon", "The shop is down for scheduled maintenance."
    )


NOT_FOUND_HTML = (
    "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n"
    "<center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)


def error_html(status: int, reason: str) -> bytes:
    return (
        f"<html>\r\n<head><title>{status} {reason}</title></head>\r\n<body>\r\n"
        f"<center><h1>{status} {reason}</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
    ).encode()


# --- routing -----------------------------------------------------------------------------------------------

_BOOK_RE = re.compile(r"^/catalogue/([a-z0-9_-]+)/index\.html$")
_PAGE_RE = re.compile(r"^/catalogue/page-(\d+)\.html$")
_ALL_RE = re.compile(r"^/catalogue/category/books_1/(?:index|page-(\d+))\.html$")
_CATEGORY_RE = re.compile(r"^/catalogue/category/books/([a-z0-9-]+_\d+)/(?:index|page-(\d+))\.html$")


#: Rendered pages a ``Site`` keeps (about 25 MB of the default site's ~1,150 pages, all of which fit), and
#: what each earlier day's ``Site`` keeps while ``changed_on`` compares listing pages with it.
PAGE_CACHE_SIZE = 2048
DAY_BEFORE_CACHE_SIZE = 64


class Site:
    """The replica's pages for one catalogue: ``get(path)`` returns the UTF-8 body or ``None`` for a 404.

    Rendering is lazy; the last ``cache_size`` pages rendered are kept with their ETags, so repeated hits
    on the default site cost a dict lookup while a large catalogue's memory stays bounded. With a
    ``redesign``, the catalogue's day renders with the redesign's markup from the redesign's day on.
    """

    def __init__(
        self,
        catalogue: Catalogue,
        js_mode: bool = False,
        cache_size: int = PAGE_CACHE_SIZE,
        redesign: Redesign | None = None,
    ) -> None:
        if cache_size < 1:
            raise ValueError("cache_size must be >= 1")
        self.catalogue = catalogue
        self.js_mode = js_mode
        self.redesign = redesign
        self.markup = markup_on(redesign, catalogue)
        self._book_changed_on: dict[str, int] = {}
        self.cache_size = cache_size
        self._cache: OrderedDict[str, tuple[bytes, str] | None] = OrderedDict()
        self._categories = {c.key: c for c in catalogue.categories}
        self.not_found = NOT_FOUND_HTML.encode()
        self._listing_changed_on: dict[str, int] = {}
        self._day_before: Site | None = None

    @property
    def cached_pages(self) -> int:
        """How many pages (and 404s) the cache holds now; never more than ``cache_size``."""
        return len(self._cache)

    def etag(self, path: str) -> str | None:
        """The page's strong ``ETag``: a hash of its body, so it changes exactly when the bytes do."""
        entry = self._entry(path)
        return None if entry is None else entry[1]

    def changed_on(self, path: str) -> int:
        """The simulated day on which the page last changed: the first of the unbroken run of days, up to
        this one, that served these very bytes (0 when it has not changed since the first day).

        A book page's bytes are a function of its record and the day's markup, so its day is the record's,
        or the redesign's when the redesign changed these bytes later; a listing page is compared with the
        day before's, whose own answer is remembered (listings are a tenth of a site).
        """
        if _BOOK_RE.match(path) and (book := self.catalogue.book_by_path(path)) is not None:
            return self._book_page_changed_on(path, book)
        if path in self._listing_changed_on:
            return self._listing_changed_on[path]
        body, day = self.get(path), self.catalogue.day
        if day > 0 and body is not None and self.day_before().get(path) == body:
            day = self.day_before().changed_on(path)
        self._listing_changed_on[path] = day
        return day

    def _book_page_changed_on(self, path: str, book: Book) -> int:
        day = self.catalogue.book_changed_on(book)
        redesign = self.redesign
        if redesign is None or self.markup == TODAY or day >= redesign.day:
            return day
        if path not in self._book_changed_on:
            # The record has not changed since before the redesign: the page changed on the redesign's day
            # exactly when the redesign changed its bytes.
            before = render_book(self.catalogue, book, self.js_mode, TODAY).encode("utf-8")
            self._book_changed_on[path] = redesign.day if before != self.get(path) else day
        return self._book_changed_on[path]

    def last_modified(self, path: str) -> datetime:
        """``Last-Modified`` of the page: midnight UTC of the day it last changed."""
        return DAY_ZERO + timedelta(days=self.changed_on(path))

    def last_modified_header(self, path: str) -> str:
        return format_datetime(self.last_modified(path), usegmt=True)

    def day_before(self) -> Site:
        """The same site one simulated day earlier (built on first use, with a small page cache)."""
        if self._day_before is None:
            previous = self.catalogue.day_before()  # raises for day 0
            self._day_before = Site(
                previous, js_mode=self.js_mode, cache_size=DAY_BEFORE_CACHE_SIZE, redesign=self.redesign
            )
        return self._day_before

    def get(self, path: str) -> bytes | None:
        entry = self._entry(path)
        return None if entry is None else entry[0]

    def _entry(self, path: str) -> tuple[bytes, str] | None:
        """The page's body and ETag, from the cache or rendered now (and cached, evicting the oldest)."""
        cache = self._cache
        try:
            entry = cache[path]
        except KeyError:
            pass
        else:
            cache.move_to_end(path)
            return entry
        html = self._render(path)
        if html is None:
            entry = None
        else:
            body = html.encode("utf-8")
            entry = (body, '"' + hashlib.sha256(body).hexdigest()[:24] + '"')
        cache[path] = entry
        if len(cache) > self.cache_size:
            cache.popitem(last=False)
        return entry

    def _page_number(self, raw: str | None, pages: int, allow_index: bool) -> int | None:
        number = 1 if raw is None else int(raw)
        if raw is not None and raw != str(number):
            return None
        if number < 1 or number > pages or (raw is None and not allow_index):
            return None
        return number

    def _render(self, path: str) -> str | None:
        cat = self.catalogue
        if path in ("/", "/index.html"):
            crumbs: list[tuple[str, str | None]] = [("Home", "index.html"), ("All products", None)]
            listing = Listing("", "catalogue/", "All products", crumbs, "catalogue/page-{n}.html", "")
            return render_listing(cat, cat.books, 1, listing, self.markup)
        if match := _PAGE_RE.match(path):
            number = self._page_number(match.group(1), cat.page_count, allow_index=False)
            if number is None:
                return None
            crumbs = [("Home", "../index.html"), ("All products", None)]
            listing = Listing("../", "", "All products", crumbs, "page-{n}.html", "catalogue")
            return render_listing(cat, cat.books, number, listing, self.markup)
        if match := _ALL_RE.match(path):
            pages = cat.page_count
            number = self._page_number(match.group(1), pages, allow_index=True)
            if number is None:
                return None
            crumbs = [("Home", "../../../index.html"), ("Books", None)]
            listing = Listing("../../../", "../../", "Books", crumbs, "page-{n}.html", "catalogue/category/books_1")
            return render_listing(cat, cat.books, number, listing, self.markup)
        if match := _CATEGORY_RE.match(path):
            category = self._categories.get(match.group(1))
            if category is None:
                return None
            books = cat.books_in(category)
            pages = max(1, -(-len(books) // PAGE_SIZE))
            raw = match.group(2)
            if raw is not None and pages == 1:
                return None
            number = self._page_number(raw, pages, allow_index=True)
            if number is None:
                return None
            listing = Listing(
                "../../../../",
                "../../../",
                category.name,
                [
                    ("Home", "../../../../index.html"),
                    ("Books", "../../books_1/index.html"),
                    (category.name, None),
                ],
                "page-{n}.html",
                f"catalogue/category/books/{category.key}",
            )
            return render_listing(cat, books, number, listing, self.markup)
        if _BOOK_RE.match(path) and (book := cat.book_by_path(path)) is not None:
            return render_book(cat, book, self.js_mode, self.markup)
        return None
