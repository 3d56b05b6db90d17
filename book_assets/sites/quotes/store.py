"""Storing quotes.toscrape.com's records: the quotes of a listing page and the author of an author page.

Each function runs inside the caller's transaction (a worker stores and completes its task atomically under
its lease, as :func:`book_assets.store.books.write_book` does) and writes only from a parsed, validated record:
a page that is not a listing or an author page never reaches this module, because parsing it raises before.

A quote has no id on the site, so its natural key is its text and author; a listing page shows ten, so a
quote row points at the page that last showed it (its URL and the hash of its fetch, the page's record in the
archive) instead of holding the page's HTML. An author page is one record, stored with its HTML like a book.

Each write records the record's state as a new version when it differs from its latest one
(``record_quote_version``, ``record_author_version``): a statement of its own after the upsert, which holds the
record's row until the transaction ends, so two workers storing one quote (a quote on ``/`` and on a tag page)
compare with each other's version, not with a snapshot taken before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from book_assets.db.connection import Cursor
from book_assets.scraper.fetching import FetchResult
from book_assets.sites.quotes.models import Author, QuotesPage
from book_assets.sql import load_queries

Q = load_queries("quotes")
StoreOutcome = Literal["new", "changed", "unchanged"]


@dataclass(frozen=True)
class Stored:
    """One record written: its row's id and whether it was new, changed or seen unchanged."""

    id: int
    outcome: StoreOutcome


def _outcome(row: dict[str, object]) -> StoreOutcome:
    if row["inserted"]:
        return "new"
    return "changed" if row["changed"] else "unchanged"


def write_quotes(cur: Cursor, page: QuotesPage, fetch: FetchResult) -> list[Stored]:
    """Upsert every quote of ``page`` (fetched as ``fetch``) by its text and author, in page order.

    A quote seen again takes the tags and the page just read; an author link is kept when the page shows
    none (the quotes of ``/js/`` carry no link), so crawling both forms of a page never loses one.
    """
    stored: list[Stored] = []
    for quote in page.quotes:
        cur.execute(
            Q["upsert_quote"],
            {
                "text": quote.text,
                "author": quote.author,
                "author_url": quote.author_url,
                "tags": list(quote.tags),
                "page_url": page.url,
                "content_hash": fetch.content_hash,
                "fetched_at": fetch.fetched_at,
            },
        )
        row = cur.fetchone()
        assert row is not None  # INSERT ... ON CONFLICT DO UPDATE returns its row
        cur.execute(Q["record_quote_version"], {"id": row["id"]})
        stored.append(Stored(row["id"], _outcome(row)))
    return stored


def write_author(cur: Cursor, author: Author, fetched: FetchResult) -> Stored:
    """Upsert one author by the URL of its page, with the page's HTML and the fetch it came from.

    The served bytes are kept beside the decoded HTML when the HTML does not reproduce them (as for a book:
    invalid UTF-8, a legacy charset), so ``content_hash`` always matches what is stored.
    """
    cur.execute(
        Q["upsert_author"],
        {
            "url": author.url,
            "name": author.name,
            "birth_date": author.birth_date,
            "birth_place": author.birth_place,
            "description": author.description,
            "raw_html": fetched.html,
            "raw_body": None if fetched.html.encode("utf-8") == fetched.body else fetched.body,
            "content_hash": fetched.content_hash,
            "http_status": fetched.status,
            "fetched_at": fetched.fetched_at,
        },
    )
    row = cur.fetchone()
    assert row is not None  # INSERT ... ON CONFLICT DO UPDATE returns its row
    cur.execute(Q["record_author_version"], {"id": row["id"]})
    return Stored(row["id"], _outcome(row))
