"""What quotes.toscrape.com publishes from its tables (:class:`~book_assets.publish.publishing.Publishing`).

- **export**: two tables, ``quotes`` and ``authors`` (an author's page HTML with ``--with-html``; a quote keeps
  no HTML: its listing page is in the WARC archive).
- **changes of a day**: from their versions (``quote_versions``, ``author_versions``), the day's start compared
  with its end: the quotes and authors with no version before the day (``new``) and those whose state at its
  end differs from its start (``changed``, with the fields that differ), in their state at the day's end.
  Nothing is removed (a quotes crawl decides no removals).
- **reextract**: each author's stored ``raw_html`` parsed again with today's parser (:func:`.parsers.parse_author`)
  and its fields written where they changed, a version each. Quotes are not re-extracted: they are records of
  listing pages, whose HTML is in the WARC archive, not in the table.
- **snapshot**: quotes by tag, as they stood at the day's end (each quote's latest version then), a quote's
  category being its first tag (its fairness group, as in the crawl); a quote with no tag is in no category and
  is not sampled (as a book without a category).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from book_assets.db.connection import Cursor, Database
from book_assets.publish.publishing import ExportTable, Feed, SnapshotRows
from book_assets.scraper.errors import ParseError
from book_assets.sites.quotes.models import Author
from book_assets.sites.quotes.parsers import parse_author
from book_assets.sql import load_queries

Q = load_queries("quotes")
#: The columns of a day's feed: a quote fills ``text`` and ``tags`` (``url`` its author's page), an author
#: ``birth_date``, ``birth_place`` and ``description`` (``author`` its name); ``version`` is the record's latest
#: by the day's end, ``fields`` the fields a change touched, ``changed_at`` when that version was recorded.
FEED_COLUMNS = (
    "day",
    "change",
    "record",
    "id",
    "url",
    "author",
    "text",
    "tags",
    "birth_date",
    "birth_place",
    "description",
    "version",
    "fields",
    "changed_at",
)
#: The snapshot's columns and their dtypes (``tags`` a list), then ``recorded_at`` (UTC): when the chosen version
#: of the quote was recorded.
SNAPSHOT_DTYPES: dict[str, str] = {
    "text": "string",
    "author": "string",
    "author_url": "string",
    "category": "string",
    "tags": "object",
}


@dataclass(frozen=True)
class AuthorsReextracted:
    """Author pages parsed again: how many, how many authors changed, the pages the parser refuses (by kind)."""

    scanned: int
    changed: int
    unparseable: int
    errors: tuple[str, ...]
    refused: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        refused = ", ".join(f"{n} {kind}" for kind, n in sorted(self.refused.items()))
        return (
            f"re-extracted {self.scanned} authors: {self.changed} changed, "
            f"{self.unparseable} unparseable{f' ({refused})' if refused else ''}; quotes not re-extracted "
            "(their listing pages are in the WARC archive, not stored)"
        )


def reextract_authors(db: Database, *, batch_size: int = 200) -> AuthorsReextracted:
    """Parse every stored author page again and write the fields that changed, a version each (no network).

    A page the parser refuses now (a contract failure included) leaves its row as it is and is reported with its
    error kind, as the books' reextract does.
    """
    after, scanned, changed, unparseable = 0, 0, 0, 0
    errors: list[str] = []
    refused: dict[str, int] = {}
    while rows := db.query(Q["authors_for_reextract"], {"after": after, "limit": batch_size}):
        parsed: list[tuple[int, Author]] = []
        for row in rows:
            after = row["id"]
            scanned += 1
            try:
                parsed.append((row["id"], parse_author(row["raw_html"], row["url"])))
            except ParseError as exc:
                unparseable += 1
                refused[exc.kind] = refused.get(exc.kind, 0) + 1
                if len(errors) < 20:
                    errors.append(f"{row['url']}: {exc.kind}: {exc}")

        def _apply(cur: Cursor, batch: list[tuple[int, Author]] = parsed) -> int:
            written = 0
            for author_id, author in batch:
                cur.execute(Q["reextract_author"], {"id": author_id, **_fields(author)})
                if cur.fetchone() is not None:
                    cur.execute(Q["record_author_version"], {"id": author_id})
                    written += 1
            return written

        changed += db.run(_apply)
    return AuthorsReextracted(scanned, changed, unparseable, tuple(errors), refused)


def _fields(author: Author) -> dict[str, Any]:
    return {
        "name": author.name,
        "birth_date": author.birth_date,
        "birth_place": author.birth_place,
        "description": author.description,
    }


@dataclass(frozen=True)
class QuotesByTag:
    """The quotes by their first tag as they stood at a time (their versions): the quotes' snapshot source."""

    unit = "quotes"

    def category_counts(self, cur: Cursor, until: datetime) -> dict[str, int]:
        cur.execute(Q["snapshot_tag_counts"], {"until": until})
        return {r["category"]: int(r["available"]) for r in cur.fetchall()}

    def chosen(self, cur: Cursor, until: datetime, quotas: Mapping[str, int]) -> SnapshotRows:
        params = {"until": until, "categories": list(quotas), "quotas": list(quotas.values())}
        cur.execute(Q["snapshot_select"], params)
        return SnapshotRows([dict(r) for r in cur.fetchall()], SNAPSHOT_DTYPES, ("recorded_at",))


@dataclass(frozen=True)
class QuotesPublishing:
    """quotes.toscrape.com's publishing (see the module's docstring)."""

    snapshot: QuotesByTag = field(default_factory=QuotesByTag)

    def export_tables(self, db: Database, *, with_html: bool) -> tuple[ExportTable, ...]:
        authors = db.query(Q["export_authors"], {"with_html": with_html})
        if not with_html:
            for row in authors:
                row.pop("raw_html", None)
        return ExportTable("quotes", db.query(Q["export_quotes"])), ExportTable("authors", authors)

    def changes_of_day(self, db: Database, day: date) -> Feed:
        return Feed(FEED_COLUMNS, db.query(Q["changes_of_day"], {"day": day}))

    def reextract(self, db: Database) -> AuthorsReextracted:
        return reextract_authors(db)
