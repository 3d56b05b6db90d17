"""Rebuilding the books from the archive alone: ``book-pipeline reextract --from-warc``.

Every 2xx response record is parsed by the crawl's own pure parsers, as the worker parsed the fetch
(:func:`~book_assets.store.books.parse_served_or_rendered`: the served body, the rendered DOM of its
conversion record when only scripts build the data). A page that parses as a book is one; the newest
such response per canonical URL is the book's latest state, as in the ``books`` table. Listing pages are
counted, anything else is unparseable (an error page the crawl refused too).

Two uses: :func:`compare` checks the rebuilt books against the ``books`` table (fields, served HTML, content
hash, status and fetch time) and lists every difference; :func:`write` stores them through the crawl's
storage (:func:`~book_assets.store.books.write_book`, change detection and versions included), oldest
fetch first, so an empty database gets the books back; a stored book fetched later than the archived page
is left alone, so replaying an old day never rolls a book back.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from book_assets.archive.reader import ArchiveDamage, ArchivedResponse, responses
from book_assets.db.connection import Cursor, Database
from book_assets.scraper.errors import ParseError
from book_assets.scraper.fetching import NOT_MODIFIED, FetchResult, build_result
from book_assets.scraper.models import BookDetail
from book_assets.scraper.parsers import parse_listing
from book_assets.sql import load_queries
from book_assets.store.books import book_fields, parse_served_or_rendered, write_book
from book_assets.urls import canonical_url

Q = load_queries("books")


@dataclass
class Rebuilt:
    """The books of an archive, and what else its response records held."""

    books: dict[str, tuple[BookDetail, FetchResult]] = field(default_factory=dict)
    files: int = 0
    responses: int = 0
    listing_pages: int = 0
    #: 304s to conditional re-crawls: each confirms the page stored before it, whose fetch time moves.
    not_modified: int = 0
    not_ok: int = 0
    unparseable: list[str] = field(default_factory=list)
    damaged: list[ArchiveDamage] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"read {self.responses} response records from {self.files} WARC file(s): {len(self.books)} books, "
            f"{self.listing_pages} listing pages, {self.not_modified} not modified (304), "
            f"{len(self.unparseable)} unparseable, {self.not_ok} other statuses"
        )


def rebuild(paths: list[Path]) -> Rebuilt:
    """Parse every response record of ``paths``; the newest parseable page of each book wins.

    Read as a stream: only each book's newest page is held, not the archive.
    """
    rebuilt = Rebuilt(files=len(paths))
    confirmed: dict[str, datetime] = {}
    for archived in responses(paths, rebuilt.damaged):
        rebuilt.responses += 1
        if archived.status == NOT_MODIFIED:
            rebuilt.not_modified += 1
            url = canonical_url(archived.url)
            confirmed[url] = max(archived.fetched_at, confirmed.get(url, archived.fetched_at))
            continue
        if not 200 <= archived.status < 300:
            rebuilt.not_ok += 1
            continue
        fetch = as_fetch(archived)
        try:
            detail = parse_served_or_rendered(fetch.html, fetch.rendered_html, canonical_url(fetch.final_url))
        except ParseError:
            if _is_listing(fetch):
                rebuilt.listing_pages += 1
            else:
                rebuilt.unparseable.append(f"{fetch.final_url} ({archived.path.name} at byte {archived.offset})")
            continue
        newest = rebuilt.books.get(detail.url)
        if newest is None or newest[1].fetched_at <= fetch.fetched_at:
            rebuilt.books[detail.url] = (detail, fetch)
    for url, when in confirmed.items():  # as the crawl's revalidation does: the fetch time moves, nothing else
        book = rebuilt.books.get(url)
        if book is not None and book[1].fetched_at < when:
            rebuilt.books[url] = (book[0], replace(book[1], fetched_at=when))
    return rebuilt


def as_fetch(archived: ArchivedResponse) -> FetchResult:
    """The fetch an archived response records, as the fetcher returned it (``html`` decoded the same way)."""
    return build_result(
        url=archived.url,
        final_url=archived.url,
        status=archived.status,
        headers=archived.headers,
        body=archived.body,
        fetched_at=archived.fetched_at,
        elapsed_s=0.0,
        rendered_html=archived.rendered_html,
    )


def _is_listing(fetch: FetchResult) -> bool:
    try:
        parse_listing(fetch.html, fetch.final_url)
    except ParseError:
        return False
    return True


@dataclass(frozen=True)
class Comparison:
    """The rebuilt books against the ``books`` table."""

    equal: int
    differences: list[str]
    only_in_archive: list[str]
    only_in_table: list[str]

    def line(self) -> str:
        return (
            f"books table: {self.equal} equal, {len(self.differences)} differ, {len(self.only_in_archive)} only "
            f"in the archive, {len(self.only_in_table)} only in the table"
        )


def expected_row(detail: BookDetail, fetch: FetchResult) -> dict[str, Any]:
    """The columns the crawl stores for ``detail`` fetched as ``fetch`` (see ``write_book``)."""
    return {
        **book_fields(detail),
        "content_hash": fetch.content_hash,
        "http_status": fetch.status,
        "raw_html": fetch.html,
        "fetched_at": fetch.fetched_at,
    }


def compare(db: Database, rebuilt: Rebuilt) -> Comparison:
    """Every difference between the rebuilt books and the stored ones (a column per line)."""
    stored = {row["url"]: row for row in db.query(Q["books_for_compare"])}
    differences: list[str] = []
    equal = 0
    for url, (detail, fetch) in sorted(rebuilt.books.items()):
        row = stored.get(url)
        if row is None:
            continue
        expected = expected_row(detail, fetch)
        wrong = [k for k, v in expected.items() if _comparable(row[k]) != _comparable(v)]
        differences += [f"{url} {k}: stored {_shown(row[k])}, archived {_shown(expected[k])}" for k in wrong]
        equal += not wrong
    return Comparison(
        equal=equal,
        differences=differences,
        only_in_archive=sorted(set(rebuilt.books) - set(stored)),
        only_in_table=sorted(set(stored) - set(rebuilt.books)),
    )


def _comparable(value: Any) -> Any:
    return str(value) if isinstance(value, Decimal) else value


def _shown(value: Any) -> str:
    text = repr(_comparable(value))
    return text if len(text) <= 60 else f"{text[:57]}..."


@dataclass(frozen=True)
class Written:
    """What :func:`write` did per book: the store's outcome, or left alone because the table's fetch is newer."""

    new: int = 0
    changed: int = 0
    unchanged: int = 0
    older: int = 0

    def line(self) -> str:
        return (
            f"stored: {self.new} new, {self.changed} changed, {self.unchanged} unchanged, "
            f"{self.older} left alone (the table's fetch is newer)"
        )


def write(db: Database, rebuilt: Rebuilt) -> Written:
    """Store the rebuilt books as a crawl would, oldest fetch first; each book in its own transaction."""
    counts = {"new": 0, "changed": 0, "unchanged": 0, "older": 0}
    for detail, page in sorted(rebuilt.books.values(), key=lambda b: b[1].fetched_at):

        def _store(cur: Cursor, detail: BookDetail = detail, page: FetchResult = page) -> str:
            cur.execute(Q["book_fetched_at"], {"url": detail.url})
            row = cur.fetchone()
            if row is not None and row["fetched_at"] is not None and row["fetched_at"] > page.fetched_at:
                return "older"
            return write_book(cur, detail, page).outcome

        counts[db.run(_store)] += 1
    return Written(**counts)
