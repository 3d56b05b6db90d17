"""What a site of the generic record store publishes (:class:`~book_assets.publish.publishing.Publishing`).

- **export**: one table named for the site, a row per stored record: its id and URL, its fields (each a column of
  its own, in the record dataclass's order), its category and version, the fetch it was read from, when it
  was first seen and last changed; the page's HTML with ``--with-html``.
- **changes of a day**, **reextract** and the **daily snapshot** are refused in one line: the store keeps each
  record's latest state only (:mod:`.store`), so no day's start can be compared with its end nor a day's state
  sampled, and re-extraction is not written for it yet. A site that needs them keeps its own tables and gives
  its own ``Publishing``, as the quotes do (``book_assets/sites/quotes/publishing.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from book_assets.db.connection import Database
from book_assets.publish.publishing import ExportTable, Feed, Reextraction, SnapshotSource
from book_assets.settings import ConfigError
from book_assets.sites.generic.store import Q, RecordStore


@dataclass(frozen=True)
class RecordsPublishing:
    """The export of a site's rows of the generic record store (see the module's docstring)."""

    store: RecordStore

    def export_tables(self, db: Database, *, with_html: bool) -> tuple[ExportTable, ...]:
        rows = []
        for row in db.query(Q["export_site_records"], {"site": self.store.site, "with_html": with_html}):
            fields = row.pop("fields")
            if not with_html:
                row.pop("raw_html", None)
            ordered = {name: fields.pop(name, None) for name in self.store.stored}
            rows.append({"id": row.pop("id"), "url": row.pop("url"), **ordered, **fields, **row})
        return (ExportTable(self.store.site, rows),)

    def changes_of_day(self, db: Database, day: date) -> Feed:
        raise self._refused("changes")

    def reextract(self, db: Database) -> Reextraction:
        raise self._refused("reextract")

    @property
    def snapshot(self) -> SnapshotSource:
        raise self._refused("a daily snapshot")

    def _refused(self, what: str) -> ConfigError:
        return ConfigError(
            f"invalid setting site (BOOK_PIPELINE_SITE): site {self.store.site!r} keeps its records in the generic "
            f"record store, which keeps no versions: {what} needs a store of its own (see docs/sites.md)"
        )
