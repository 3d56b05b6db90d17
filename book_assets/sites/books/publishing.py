"""What books.toscrape.com publishes (:class:`~book_assets.publish.publishing.Publishing`): a thin adapter over
the books' own modules: the export of the books table (:mod:`book_assets.publish.export`), the change feed of
their versions and presence events (:mod:`book_assets.publish.changes`), the re-extraction of their stored
pages (:func:`book_assets.store.books.reextract`) and the books as ``book_versions`` had them at a time
(:data:`book_assets.publish.snapshot.BOOK_VERSIONS`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

from book_assets.db.connection import Database
from book_assets.publish.changes import books_feed
from book_assets.publish.export import books_table
from book_assets.publish.publishing import ExportTable, Feed
from book_assets.publish.snapshot import BOOK_VERSIONS
from book_assets.publish.snapshot.select import BookVersions
from book_assets.store.books import ReextractReport, reextract


@dataclass(frozen=True)
class BooksPublishing:
    """The books' publishing: one table, an exact feed, their versions' snapshot."""

    snapshot: BookVersions = field(default=BOOK_VERSIONS)

    def export_tables(self, db: Database, *, with_html: bool) -> tuple[ExportTable, ...]:
        return (books_table(db, with_html=with_html),)

    def changes_of_day(self, db: Database, day: date) -> Feed:
        return books_feed(db, day)

    def reextract(self, db: Database) -> ReextractReport:
        """The stored pages parsed again (the pages a crawl held are rebuilt by the command after it)."""
        return reextract(db)
