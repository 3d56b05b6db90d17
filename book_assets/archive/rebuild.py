"""Rebuilding the books from the archive alone: ``book-pipeline reextract --from-warc``.

Every 2xx response record is parsed by the crawl's own pure parsers, as the worker parsed the fetch
(:func:`~book_assets.store.books.parse_served_or_rendered`: the served body, the rendered DOM of its
conversion record when only scripts build the data). A page that parses as a book is one; the newest
such response per canonical URL is the book's latest state, as in the ``books`` table. Listing pages are
counted, anything else is unparseable (an error page the crawl refused too).

Three uses: :func:`replay` runs the current parsers over an archived day and diffs every field against what
was stored by the day's end (new, lost and changed values per field), so a parser change shows its effect
before it ships (``book-pipeline replay``); :func:`compare` checks the rebuilt books against the ``books``
table (fields, served HTML, content hash, status and fetch time) and lists every difference; :func:`write`
stores them through the crawl's storage (:func:`~book_assets.store.books.write_book`, change detection and
versions included), oldest fetch first, so an empty database gets the books back; a stored book fetched later
than the archived page is left alone, so replaying an old day never rolls a book back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
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
from book_assets.store.books import CONTRACT_COLUMNS, TRACKED_FIELDS, book_fields, parse_served_or_rendered, write_book
from book_assets.store.drift import fields_named, stored_fields_as_of
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


#: How many sample values :func:`replay` keeps per field.
REPLAY_SAMPLES = 3


@dataclass
class FieldDiff:
    """One field over a replayed day: values the current parser finds that were not stored (new), stored
    values it no longer finds (lost, a page it refuses for that field included), and values it reads otherwise."""

    new: int = 0
    lost: int = 0
    changed: int = 0
    samples: list[str] = field(default_factory=list)

    def add(self, kind: str, sample: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        if len(self.samples) < REPLAY_SAMPLES:
            self.samples.append(sample)

    @property
    def total(self) -> int:
        return self.new + self.lost + self.changed


@dataclass
class Replay:
    """The current parsers over one archived day, against the books as stored by that day's end."""

    day: date
    #: Book pages replayed: the newest archived page of each book URL that day.
    pages: int = 0
    #: Of those, books stored by the day's end (the rest are not compared).
    compared: int = 0
    #: Pages the current parser refuses (a contract failure, or no longer a book page).
    refused: int = 0
    fields: dict[str, FieldDiff] = field(default_factory=dict)
    damaged: list[ArchiveDamage] = field(default_factory=list)

    def lines(self) -> list[str]:
        head = (
            f"replayed {self.pages} book pages of {self.day}: {self.compared} compared with the stored books, "
            f"{self.refused} refused by the current parser"
        )
        diffs = {name: d for name, d in sorted(self.fields.items()) if d.total}
        if not diffs:
            return [head, "no field differs from what was stored"]
        lines = [head]
        for name, diff in diffs.items():
            lines.append(f"  {name}: {diff.new} new, {diff.lost} lost, {diff.changed} changed")
            lines += [f"    {sample}" for sample in diff.samples]
        return lines

    def as_json(self) -> dict[str, Any]:
        return {
            "day": self.day.isoformat(),
            "pages": self.pages,
            "compared": self.compared,
            "refused": self.refused,
            "fields": {
                name: {"new": d.new, "lost": d.lost, "changed": d.changed, "samples": d.samples}
                for name, d in sorted(self.fields.items())
            },
            "damaged": [damage.line() for damage in self.damaged],
        }


Parser = Callable[[str, str | None, str], BookDetail]


def replay(db: Database, paths: list[Path], day: date, *, parse: Parser = parse_served_or_rendered) -> Replay:
    """Parse the book pages of ``paths`` (one day's archive) with ``parse`` (the crawl's, by default) and diff
    each field of the newest page per book against the book's latest version recorded by the day's end."""
    result = Replay(day=day, fields={name: FieldDiff() for name in TRACKED_FIELDS})
    newest: dict[str, tuple[datetime, BookDetail | ParseError]] = {}
    for archived in responses(paths, result.damaged):
        if not 200 <= archived.status < 300:
            continue
        fetch = as_fetch(archived)
        url = canonical_url(fetch.final_url)
        outcome: BookDetail | ParseError
        try:
            outcome = parse(fetch.html, fetch.rendered_html, url)
        except ParseError as exc:
            if _is_listing(fetch):
                continue
            outcome = exc
        if url not in newest or newest[url][0] <= fetch.fetched_at:
            newest[url] = (fetch.fetched_at, outcome)
    end = datetime.combine(day + timedelta(days=1), time(), tzinfo=UTC)
    stored = stored_fields_as_of(db, end)
    for url, (_, outcome) in sorted(newest.items()):
        before = stored.get(url)
        if isinstance(outcome, ParseError):
            result.refused += 1
        if before is None:
            continue
        result.compared += 1
        _diff(result, url, before, outcome)
    result.pages = len(newest)
    return result


def _diff(result: Replay, url: str, before: dict[str, Any], outcome: BookDetail | ParseError) -> None:
    """Add one book's differences: every field of a page parsed, the fields a refusal names."""
    if isinstance(outcome, ParseError):
        named = fields_named(str(outcome))
        for name in TRACKED_FIELDS:
            if (name in named or _contract_name(name) in named) and before.get(name) is not None:
                result.fields[name].add("lost", f"{url}: {_shown(before.get(name))} -> refused ({outcome})")
        return
    after = book_fields(outcome)
    for name in TRACKED_FIELDS:
        old, new = _as_stored(before.get(name)), _as_stored(after[name])
        if old == new:
            continue
        kind = "new" if old is None else "lost" if new is None else "changed"
        result.fields[name].add(kind, f"{url}: {_shown(old)} -> {_shown(new)}")


def _contract_name(column: str) -> str:
    """The contract's name of a ``books`` column (``rating_value`` is ``rating``)."""
    return next((name for name, col in CONTRACT_COLUMNS.items() if col == column), column)


def _as_stored(value: Any) -> str | None:
    """A value as a version's JSON holds it, as text (a Decimal and its JSON string compare equal)."""
    return None if value is None else str(value)
