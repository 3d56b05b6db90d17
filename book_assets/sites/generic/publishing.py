"""What a site of the generic record store publishes (:class:`~book_assets.publish.publishing.Publishing`).

- **export**: one table named for the site, a row per stored record: its id and URL, its fields (each a column of
  its own, in the record dataclass's order), its category and version, the fetch it was read from, when it
  was first seen and last changed; the page's HTML with ``--with-html``.
- **reextract**: each stored page's HTML parsed again with today's detail parser (no network), and the record's
  fields and category written where they changed, one more version each; a page the parser refuses now is left
  as it is and reported by its error kind, as the quotes' and books' re-extraction do.
- **changes of a day** and the **daily snapshot** are refused in one line: the store keeps each record's latest
  state only (:mod:`.store`), so no day's start can be compared with its end nor a day's state sampled. A site
  that needs them keeps its own tables and gives its own ``Publishing``, as the quotes do
  (``book_assets/sites/quotes/publishing.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from book_assets.db.connection import Cursor, Database
from book_assets.publish.publishing import ExportTable, Feed, SnapshotSource
from book_assets.scraper.errors import ParseError
from book_assets.settings import ConfigError
from book_assets.sites.generic.store import Q, RecordStore


@dataclass(frozen=True)
class RecordsReextracted:
    """A site's stored pages parsed again: how many, how many records changed, the pages the parser refuses now
    (by error kind, and the first few with their error)."""

    record: str
    scanned: int
    changed: int
    unparseable: int
    errors: tuple[str, ...]
    refused: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        refused = ", ".join(f"{n} {kind}" for kind, n in sorted(self.refused.items()))
        return (
            f"re-extracted {self.scanned} {self.record}s: {self.changed} changed, "
            f"{self.unparseable} unparseable{f' ({refused})' if refused else ''}"
        )


@dataclass(frozen=True)
class RecordsPublishing:
    """What a site of the generic record store publishes (see the module's docstring).

    Attributes:
        store: The site's record store.
        parse: Its detail parser (pure, of HTML and URL): what ``reextract`` parses the stored pages with.
        record: What one record is called in ``reextract``'s line (the site's ``record``).
    """

    store: RecordStore
    parse: Callable[[str, str], Any]
    record: str = "record"

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

    def reextract(self, db: Database, *, batch_size: int = 200) -> RecordsReextracted:
        """Parse every stored page of the site again and write the records that changed, a version each."""
        after, scanned, changed, unparseable = 0, 0, 0, 0
        errors: list[str] = []
        refused: dict[str, int] = {}
        params = {"site": self.store.site, "limit": batch_size}
        while rows := db.query(Q["site_records_for_reextract"], {**params, "after": after}):
            parsed: list[tuple[int, Any]] = []
            for row in rows:
                after = row["id"]
                scanned += 1
                try:
                    parsed.append((row["id"], self.parse(row["raw_html"], row["url"])))
                except ParseError as exc:
                    unparseable += 1
                    refused[exc.kind] = refused.get(exc.kind, 0) + 1
                    if len(errors) < 20:
                        errors.append(f"{row['url']}: {exc.kind}: {exc}")

            def _apply(cur: Cursor, batch: list[tuple[int, Any]] = parsed) -> int:
                written = 0
                for record_id, record in batch:
                    cur.execute(Q["reextract_site_record"], {"id": record_id, **self.store.columns_of(record)})
                    written += cur.fetchone() is not None
                return written

            changed += db.run(_apply)
        return RecordsReextracted(self.record, scanned, changed, unparseable, tuple(errors), refused)

    @property
    def snapshot(self) -> SnapshotSource:
        raise self._refused("a daily snapshot")

    def _refused(self, what: str) -> ConfigError:
        return ConfigError(
            f"invalid setting site (BOOK_PIPELINE_SITE): site {self.store.site!r} keeps its records in the generic "
            f"record store, which keeps no versions: {what} needs a store of its own (see docs/sites.md)"
        )
