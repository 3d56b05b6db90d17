"""Rebuilding the book pages a crawl held at the door, from their kept responses, without the network.

A product page that breaks the book's field contract (``missing_field``, ``bad_value``: a redesign the parser
does not read yet) fails its task and keeps its response whole in ``pages``. Once the parser is fixed,
:func:`reextract_held` parses those responses again: each page that now passes is stored as the crawl would
have stored it (``write_book``: a new version only where a value changed) and its failed task is completed in
the same transaction, so the held day is rebuilt as if it had been crawled with the fixed parser. A page that
still fails stays held, its task failed, and is reported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from book_assets.db.connection import Database
from book_assets.queue import TaskQueue
from book_assets.scraper.errors import ErrorKind, ParseError
from book_assets.scraper.fetching import FetchResult
from book_assets.scraper.models import BookDetail
from book_assets.scraper.parsers import parse_book
from book_assets.store.books import BookParser, StoredBook, write_book
from book_assets.store.pages import kept_responses, write_page
from book_assets.urls import canonical_url

#: Failures of pages that are what they claim to be but whose data breaks its contract: the worker keeps their
#: response whole (``pages.body``) in the failure's transaction, for :func:`reextract_held`.
HELD_KINDS = frozenset({ErrorKind.MISSING_FIELD, ErrorKind.BAD_VALUE})
#: The responses of a batch of held URLs, by URL (a URL with none is left out).
ResponseSource = Callable[[list[str]], dict[str, FetchResult]]


@dataclass(frozen=True)
class HeldReport:
    """Held pages parsed again: how many, stored (new / changed / unchanged), still failing, with no response."""

    held: int
    stored: dict[str, int]
    still_failing: int
    without_body: int
    errors: tuple[str, ...]

    def line(self) -> str:
        stored = sum(self.stored.values())
        by_outcome = ", ".join(f"{n} {outcome}" for outcome, n in sorted(self.stored.items())) or "none"
        return (
            f"held pages {self.held}: {stored} stored ({by_outcome}), {self.still_failing} still failing, "
            f"{self.without_body} with no response to parse"
        )


def reextract_held(
    db: Database,
    queue: TaskQueue,
    *,
    parser: BookParser = parse_book,
    source: ResponseSource | None = None,
    batch_size: int = 200,
) -> HeldReport:
    """Parse the kept response of every page failing now as ``missing_field`` / ``bad_value`` with ``parser``;
    store those that pass and complete their tasks (see the module's docstring).

    ``source`` gives the responses of a batch of URLs: by default those kept in ``pages``; the archive's
    (:func:`book_assets.archive.held.archived_source`) for ``reextract --from-warc``.
    """
    responses_of = source or (lambda urls: kept_responses(db, urls))
    after, held, still_failing, without_body = "", 0, 0, 0
    stored: dict[str, int] = {}
    errors: list[str] = []
    while urls := queue.failing_of_kinds(HELD_KINDS, after=after, limit=batch_size):
        after = urls[-1]
        held += len(urls)
        kept = responses_of(urls)
        without_body += len(urls) - len(kept)
        parsed: dict[str, tuple[BookDetail, FetchResult]] = {}
        for url, response in kept.items():
            try:
                parsed[url] = (parser(response.html, canonical_url(response.final_url)), response)
            except ParseError as exc:
                still_failing += 1
                if len(errors) < 20:
                    errors.append(f"{url}: {exc.kind}: {exc}")

        def _store(cur: Any, resolved: frozenset[str], batch: dict[str, Any] = parsed) -> list[StoredBook]:
            books = []
            for url in sorted(resolved & batch.keys()):
                detail, response = batch[url]
                books.append(write_book(cur, detail, response, requested_url=url))
                write_page(cur, url, response, keep_body=False)  # the book's row keeps the body now
            return books

        if parsed:
            for book in queue.resolve_failed_with(list(parsed), HELD_KINDS, _store):
                stored[book.outcome] = stored.get(book.outcome, 0) + 1
    return HeldReport(held, stored, still_failing, without_body, tuple(errors))
