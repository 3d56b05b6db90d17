"""The last response of every fetched page, and what a re-crawl does with it: conditional requests.

Each page's stored response (``pages``: status, headers, validators, content hash) is written in the
transaction that completes its task, so it is lease-fenced like the book it produced. A re-crawl sends its
validators (``If-None-Match`` / ``If-Modified-Since``, see :func:`book_assets.scraper.fetching.conditional_headers`);
a 304 then stands for the stored copy, and only for the copy whose hash the validators came with:

- a book page's copy is its ``books`` row (``raw_html`` / ``raw_body``, not stored twice): the book stays as
  it is, its fetch time moves (:func:`revalidate_book`);
- a listing page's copy is the body kept here: it is parsed again, so discovery proceeds as after a 200.

If that copy changed or vanished since its validators were read, the 304 describes nothing stored:
:class:`StaleCopy` is raised, the page is forgotten and its task retried, unconditionally this time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg2.extras

from book_assets.db.connection import Cursor, Database
from book_assets.scraper.errors import ErrorKind
from book_assets.scraper.fetching import FetchResult, Validators, build_result, validators_of
from book_assets.sql import load_queries
from book_assets.store.books import StoredBook
from book_assets.urls import canonical_url

Q = load_queries("pages")
BOOKS = load_queries("books")


class StaleCopy(Exception):
    """A 304 for a page whose stored copy is no longer the one its validators described."""

    kind = ErrorKind.STALE_COPY

    def __init__(self, url: str) -> None:
        super().__init__(f"{self.kind}: 304 Not Modified, but the stored copy changed or is gone ({url})")
        self.url = url


def page_validators(db: Database, urls: list[str]) -> dict[str, Validators]:
    """The validators of each of ``urls``' stored responses, in one query; a URL with none (no stored
    response, or one that carried no validators) is left out."""
    if not urls:
        return {}
    found = {}
    for row in db.statement(Q["page_validators"], {"urls": urls}):
        validators = Validators(
            url=row["final_url"], etag=row["etag"], last_modified=row["last_modified"], content_hash=row["content_hash"]
        )
        if validators.usable:
            found[row["url"]] = validators
    return found


def write_page(
    cur: Cursor, url: str, fetched: FetchResult, *, keep_body: bool, validated_at: datetime | None = None
) -> None:
    """Store ``fetched`` as the response of ``url`` (the task's URL), inside the caller's transaction.

    ``keep_body`` is False for pages whose copy another table keeps (a book's). ``validated_at`` is when
    the site last confirmed it: the fetch itself unless a 304 confirmed a stored copy later.
    """
    validators = validators_of(fetched)
    cur.execute(
        Q["store_page"],
        {
            "url": url,
            "final_url": fetched.final_url,
            "status": fetched.status,
            "headers": psycopg2.extras.Json(fetched.headers),
            "etag": validators.etag,
            "last_modified": validators.last_modified,
            "body": psycopg2.Binary(fetched.body) if keep_body else None,
            "content_hash": fetched.content_hash,
            "fetched_at": fetched.fetched_at,
            "validated_at": validated_at or fetched.fetched_at,
        },
    )


def stored_copy(db: Database, url: str, validators: Validators) -> FetchResult:
    """The stored response a 304 for ``url`` refers to, as fetched then; raises :class:`StaleCopy`."""
    rows = db.statement(Q["stored_copy"], {"url": url, "content_hash": validators.content_hash})
    if not rows:
        raise StaleCopy(url)
    return _as_fetched(url, rows[0])


def _as_fetched(url: str, row: dict[str, Any]) -> FetchResult:
    """A stored response (a ``pages`` row with its body) as the fetch of ``url`` it was."""
    return build_result(
        url=url,
        final_url=row["final_url"],
        status=row["status"],
        headers=dict(row["headers"]),
        body=bytes(row["body"]),
        fetched_at=row["fetched_at"],
        elapsed_s=0.0,
    )


def kept_responses(db: Database, urls: list[str]) -> dict[str, FetchResult]:
    """The stored responses of ``urls`` that kept their body, by URL, the others left out: as fetched, at the
    time a 304 last confirmed them (the crawl that did holds the page, as the books' revalidation has it)."""
    if not urls:
        return {}
    return {row["url"]: _as_fetched(row["url"], row) for row in db.statement(Q["kept_responses"], {"urls": urls})}


def confirm_page(cur: Cursor, url: str, validators: Validators, response: FetchResult) -> str:
    """A 304 for page ``url``: its stored response stands, confirmed at ``response.fetched_at``; returns the
    canonical URL it was served from (its record's key). Raises :class:`StaleCopy` when the stored response is no
    longer the copy with the validators' hash."""
    params = {"content_hash": validators.content_hash, "url": url, "validated_at": response.fetched_at}
    cur.execute(Q["revalidate_page"], params)
    page = cur.fetchone()
    if page is None:
        raise StaleCopy(url)
    return canonical_url(page["final_url"])


def revalidate_book(cur: Cursor, url: str, validators: Validators, response: FetchResult) -> tuple[StoredBook, str]:
    """A 304 for book page ``url``: the stored book stands, confirmed at ``response.fetched_at``.

    Touches only rows still holding the copy with the validators' hash, so a 304 never stands for a book
    stored since (by another fetch) and never brings an older copy back. Returns the book and its category;
    raises :class:`StaleCopy` (rolling the caller's transaction back) when the copy is gone.
    """
    hashed = {"content_hash": validators.content_hash}
    final_url = confirm_page(cur, url, validators, response)
    cur.execute(BOOKS["revalidate_book"], {**hashed, "url": final_url, "fetched_at": response.fetched_at})
    book = cur.fetchone()
    if book is None:
        raise StaleCopy(url)
    return StoredBook(book["id"], book["version"], "unchanged"), book["category"]


def forget_page(db: Database, url: str) -> None:
    """Drop ``url``'s stored response, so its next fetch is unconditional."""
    db.statement(Q["forget_page"], {"url": url})


def revalidated_since(db: Database, since: datetime) -> int:
    """Pages a 304 confirmed since ``since``: their stored copy was fetched before and still stands."""
    return int(db.query(Q["revalidated_since"], {"since": since})[0]["n"])
