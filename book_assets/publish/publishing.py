"""What a catalogue publishes from its stored records: the hook a site definition gives the publishing side.

The commands ``export``, ``changes`` and ``reextract`` and the daily snapshot are generic: each reads a site's
records through its :class:`Publishing` (``Site.publishing``) and writes files the same way for every site.
Only the definition knows its tables: books' adapts its own modules (``book_assets/sites/books/publishing.py``),
quotes' its own queries (``book_assets/sites/quotes/publishing.py``), and a third catalogue plugs in by giving
one more. A site whose definition gives none (``publishing`` None) is refused by those commands in one line.

This module imports no site: the definitions import it (sites -> publish), never the other way round.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from book_assets.db.connection import Cursor, Database


@dataclass(frozen=True)
class ExportTable:
    """One file of an export: its name (``<name>.<format>``), its rows, in order, and the columns a Parquet file
    holds as floats (numeric columns PostgreSQL returns as ``Decimal``)."""

    name: str
    rows: list[dict[str, Any]]
    float_columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class Feed:
    """A day's change feed: its columns and its rows (each with every column)."""

    columns: tuple[str, ...]
    rows: list[dict[str, Any]]


class Reextraction(Protocol):
    """What a re-extraction did: one line to print and the pages it could not parse (at most a few)."""

    @property
    def errors(self) -> tuple[str, ...]: ...

    def line(self) -> str: ...


@dataclass(frozen=True)
class SnapshotRows:
    """The rows a snapshot chooses and how its frame is typed.

    Attributes:
        rows: The chosen records, each with a ``category``.
        dtypes: The frame's columns, in order, with their pandas dtypes.
        times: Columns (after ``dtypes``) of UTC timestamps.
    """

    rows: list[dict[str, Any]]
    dtypes: Mapping[str, str]
    times: tuple[str, ...] = field(default=())


class SnapshotSource(Protocol):
    """A site's records as they stood at a time, by category: what the category-balanced snapshot samples.

    Both reads run in one REPEATABLE READ transaction (:func:`book_assets.publish.snapshot.build_snapshot`), so
    the counts and the rows agree while a crawl writes.
    """

    #: What one snapshot row is called (the summary's and the logs' word: "books", "quotes").
    @property
    def unit(self) -> str: ...

    def category_counts(self, cur: Cursor, until: datetime) -> dict[str, int]:
        """The records stored before ``until``, per category (a record of no category is not sampled)."""
        ...

    def chosen(self, cur: Cursor, until: datetime, quotas: Mapping[str, int]) -> SnapshotRows:
        """The first ``quotas[c]`` records of each category ``c`` as of ``until``, in a fixed order."""
        ...


class Publishing(Protocol):
    """What a site publishes from its stored records (see the module's docstring)."""

    def export_tables(self, db: Database, *, with_html: bool) -> tuple[ExportTable, ...]:
        """Every stored record, one table per kind of record (raw HTML only ``with_html``, where kept)."""
        ...

    def changes_of_day(self, db: Database, day: date) -> Feed:
        """The records new or changed on ``day`` (UTC)."""
        ...

    def reextract(self, db: Database) -> Reextraction:
        """Parse every stored page again with today's parser and write what changed (no network)."""
        ...

    @property
    def snapshot(self) -> SnapshotSource:
        """Its records by category, for the category-balanced snapshot."""
        ...
