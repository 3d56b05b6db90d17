"""The quotes site's ground truth: every quote and every author as spidyquotes shows them, from its data files.

The data files (``spidyquotes/data/quotesdb.jl`` and ``authorsdb.jl``) are the live quotes.toscrape.com's data;
the application renders them through Jinja's autoescape, which an HTML parser undoes (``Bob Marley & the
Wailers`` is served as ``&amp;``), so a value shown on a page equals the value in the file, with these
differences the templates make:

- an author's birth place is shown as the data holds it, with its leading ``in `` (``in Ulm, Germany``);
- an author's description is written between blanks in ``author.html``, and a few of the descriptions hold line
  breaks and double spaces of their own (``J.R.R. Tolkien``, ``Helen Keller``): a browser shows every run of
  blanks as one space, so the shown text is the value with its blanks collapsed and stripped (as the parser
  stores it);
- a quote's author page is linked as ``/author/<slug>`` (no trailing slash), which the application answers
  with a 308 redirect to ``/author/<slug>/``, the page itself; the slug is awesome-slugify's, as upstream;
- one author is named differently by their quotes and by their page (``Alexandre Dumas fils`` on the
  listings, ``Alexandre Dumas-fils`` on ``/author/Alexandre-Dumas-fils/``): the data files say so, and so
  does the live site; a quote's ``author`` is the listing's name, an ``Author``'s ``name`` the page's.

Which pages need JavaScript: ``/js/`` and ``/js/page/N/`` carry their quotes only as a script that writes them
(``data_in_js.html``: a JSON array and ``document.write`` of unescaped strings, which show the same values
because no quote's text, author or tag holds ``<``, ``>`` or ``&``; the raw HTML has no ``div.quote``), and so do
``/js-delayed/`` (after a timer) and ``/js-onclick/``; ``/scroll`` loads them from ``/api/quotes``. Every
other page (``/``, ``/page/N/``, ``/tag/<tag>/``, ``/author/<slug>/``) is complete without a script.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from slugify import slugify

DATA_DIR = Path(__file__).parent / "spidyquotes" / "data"
QUOTES_PER_PAGE = 10  # spidyquotes' ITEMS_PER_PAGE
JS_LISTING_PREFIX = "/js/"  # the listing whose quotes a script writes (see the module docstring)
# Every page whose quotes appear only when a script runs: where browser and adaptive modes must render.
JS_PREFIXES = (JS_LISTING_PREFIX, "/js-delayed/", "/js-onclick/", "/scroll")

_Key = TypeVar("_Key")


@dataclass(frozen=True)
class Author:
    name: str
    slug: str
    born_date: str  # as shown: "March 14, 1879"
    born_location: str  # as shown, with the data's leading "in ": "in Ulm, Germany"
    description: str

    @property
    def url_path(self) -> str:
        return f"/author/{self.slug}/"


@dataclass(frozen=True)
class Quote:
    text: str  # with the typographic quotation marks the site shows: “...”
    author: str
    author_slug: str
    tags: tuple[str, ...]  # in the page's order; empty for the quotes shown without tags
    # The listing page that shows it, 1-based, on / and on /js/ alike; not compared (a quote is the same
    # quote on whichever page a crawl met it).
    page: int = field(default=0, compare=False)


@cache
def quotes() -> tuple[Quote, ...]:
    """Every quote, in the order the listing pages show them."""
    rows = _read("quotesdb.jl")
    return tuple(
        Quote(
            text=row["text"],
            author=row["author"]["name"],
            author_slug=slugify(row["author"]["name"]),
            tags=tuple(row["tags"]),
            page=index // QUOTES_PER_PAGE + 1,
        )
        for index, row in enumerate(rows)
    )


@cache
def authors() -> dict[str, Author]:
    """Every author, keyed by slug (the path of its page)."""
    result: dict[str, Author] = {}
    for row in _read("authorsdb.jl"):
        slug = slugify(row["name"])
        result[slug] = Author(
            name=row["name"],
            slug=slug,
            born_date=row["born_at"],
            born_location=row["born_in"],
            description=" ".join(row["description"].split()),
        )
    return result


def page_count() -> int:
    """Listing pages of ``/`` (and of ``/js/``): the last one is ``/page/<page_count()>/``."""
    return math.ceil(len(quotes()) / QUOTES_PER_PAGE)


def needs_javascript(path: str) -> bool:
    """Whether the page at URL ``path`` shows its quotes only after a script runs (``JS_PREFIXES``)."""
    return path.startswith(JS_PREFIXES)


def tag_counts() -> Counter[str]:
    """Quotes per tag: the site's categories (a quote with several tags counts in each)."""
    return Counter(tag for quote in quotes() for tag in quote.tags)


def quote_differences(found: list[Quote]) -> list[str]:
    """Every difference between quotes a crawl found and the truth, as readable lines (keyed by text and author)."""
    return _differences({(q.text, q.author): q for q in quotes()}, {(q.text, q.author): q for q in found}, "quote")


def author_differences(found: list[Author]) -> list[str]:
    """Every difference between authors a crawl found and the truth, as readable lines (keyed by slug)."""
    return _differences(authors(), {a.slug: a for a in found}, "author")


def _differences(truth: dict[_Key, Any], found: dict[_Key, Any], kind: str) -> list[str]:
    problems = [f"missing {kind} {key!r}" for key in truth if key not in found]
    problems += [f"unexpected {kind} {key!r}" for key in found if key not in truth]
    problems += [
        f"{kind} {key!r}: found {found[key]!r}, shown {value!r}"
        for key, value in truth.items()
        if key in found and found[key] != value
    ]
    return problems


def _read(name: str) -> list[dict[str, Any]]:
    with (DATA_DIR / name).open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]
