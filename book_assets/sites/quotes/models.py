"""Typed records of quotes.toscrape.com pages and their field contracts.

Frozen, like the books' models, so a parsed page is shared between the crawler, the store and the tests
without anyone mutating it. Tags are a tuple in the order the page shows them (the first is the quote's
fairness group), and a birth date is a ``date``, not the text "March 14, 1879".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from book_assets.scraper.contract import FieldSpec, FieldType, RecordContract


@dataclass(frozen=True, slots=True)
class Quote:
    """One quote as a listing page shows it (``div.quote``).

    Attributes:
        text: The quote's text, whitespace collapsed, with the curly quotes the site prints around it
            ("“...”"): they are part of the application's data (``data/quotesdb.jl``), so the stored text
            equals it.
        author: The author's name (``small.author``).
        author_url: Absolute URL of the author's page, from the "(about)" link; None where the page shows no
            link (the quotes ``/js/`` writes with a script have none).
        tags: The quote's tags (``div.tags a.tag``), in page order; empty when it has none.
    """

    text: str
    author: str
    author_url: str | None
    tags: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class QuotesPage:
    """A listing page: ``/``, ``/page/N/``, ``/tag/<tag>/[page/N/]``, or the rendered DOM of ``/js/[page/N/]``.

    Attributes:
        url: The URL the page was fetched from (links are resolved against it).
        quotes: The quotes on the page, in page order; empty only on the page that says "No quotes found!"
            (past the last page, a tag without quotes).
        next_url: Absolute URL of the next page (``li.next a``), or None on the last page.
        tag: The tag a tag page lists ("Viewing tag: love"), or None.
        author_links: Absolute URLs of the authors' pages the quotes link to, each once, in page order.
        tag_links: ``(tag, absolute URL)`` of the tags the page's sidebar links ("Top Ten tags"), in its order;
            empty where it has none (the ``/js/`` pages).
    """

    url: str
    quotes: tuple[Quote, ...]
    next_url: str | None
    tag: str | None
    author_links: tuple[str, ...]
    tag_links: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Author:
    """An author page (``/author/<slug>/``, ``div.author-details``).

    Attributes:
        url: The URL the page was served from.
        name: ``h3.author-title``.
        birth_date: ``span.author-born-date`` ("March 14, 1879") as a date.
        birth_place: ``span.author-born-location`` as the page shows it, with the "in " the site prints
            before the place ("in Ulm, Germany"): the application's data holds it so (``born_in``), and the
            page shows nothing else to tell a place from its preposition.
        description: ``div.author-description``, whitespace collapsed; None when the page shows none.
    """

    url: str
    name: str
    birth_date: date
    birth_place: str
    description: str | None


#: A quote's field contract: every quote shows its text and author; a quote may have no tags, and a quote
#: written by the ``/js/`` script has no author link.
QUOTE_CONTRACT = RecordContract(
    "quote",
    (
        FieldSpec("text", FieldType.TEXT),
        FieldSpec("author", FieldType.TEXT),
        FieldSpec("author_url", FieldType.TEXT, required=False),
        FieldSpec("tags", FieldType.TEXTS, required=False),
    ),
)

#: An author's field contract: every author page of the application shows a name, a birth date and place;
#: a description may be empty.
AUTHOR_CONTRACT = RecordContract(
    "author",
    (
        FieldSpec("name", FieldType.TEXT),
        FieldSpec("birth_date", FieldType.DATE),
        FieldSpec("birth_place", FieldType.TEXT),
        FieldSpec("description", FieldType.TEXT, required=False),
    ),
)
