"""The generic record store: where a catalogue written by ``book-pipeline site new`` keeps its detail records
without a table of its own.

One table, ``site_records`` (migration 0010), holds every such site's records, one row per (site, URL): the
record's fields as JSON, its category (the record's ``category`` field, where it has one), the page it was read
from (its HTML, the served bytes when the HTML does not reproduce them, the fetch's hash, status and time) and
when it was first seen and last changed. A :class:`RecordStore` is bound to one site and its record dataclass and
gives the definition its store hooks (``write_detail``, ``revalidate_detail``, ``write_listing``,
``record_counts``, ``versions_since``) and its data checks; :mod:`.publishing` gives its export and re-extraction.

Only each record's latest state is kept: ``version`` counts the states it went through (1 at first sight, one
more each time its fields or category changed), so ``status`` and a run's figures count new and changed records,
but no day's change feed or snapshot can be rebuilt from it. A site that needs those keeps its own tables, as the
quotes do (``book_assets/sites/quotes/store.py``).

Each hook runs inside the caller's transaction (the worker stores a record and completes its task in one, under
its lease), and writes only from a parsed record: a page that is not a detail page raised before reaching here.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal
from enum import Enum
from typing import Any

import psycopg2
import psycopg2.extras

from book_assets.db.connection import Cursor, Database
from book_assets.scraper.fetching import FetchResult, Validators
from book_assets.sites.site import DataCheck, Listing, Stored
from book_assets.sql import load_queries
from book_assets.store.pages import StaleCopy, confirm_page

Q = load_queries("site_records")
#: The record field that keys it within its site (the canonical URL of its page): every record has one.
KEY = "url"
#: The record field stored in its own column (a fairness group), where a record has one.
CATEGORY = "category"
#: Names an export row gives the stored facts beside a record's fields: no field may take one.
RESERVED_FIELDS = frozenset(
    {"id", "version", "content_hash", "http_status", "fetched_at", "first_seen_at", "updated_at", "raw_html"}
)


def jsonable(value: Any) -> Any:
    """``value`` as JSON can hold it: a date or time as ISO text, a decimal as text (no float rounding), an enum
    as its value, a tuple or list as an array, a nested dataclass or mapping as an object."""
    if isinstance(value, Enum):
        return jsonable(value.value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, tuple | list | frozenset | set):
        return [jsonable(v) for v in value]
    return value


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@dataclasses.dataclass(frozen=True)
class RecordStore:
    """The store hooks and data checks of site ``site``, whose detail records are ``record`` dataclasses.

    Attributes:
        site: The site's name (``Site.name``): its rows' ``site``.
        record: The record dataclass its detail parser returns: a ``url`` field (its key) and the fields stored
            in ``fields``; a ``category`` field, if any, is stored in its own column. Its fields without a default
            are the required ones (:attr:`required`).
        noun: What its rows are called in the data checks' results (the site's ``record``, plural).
    """

    site: str
    record: type
    noun: str = "records"

    def __post_init__(self) -> None:
        if not (dataclasses.is_dataclass(self.record) and isinstance(self.record, type)):
            raise TypeError(f"site {self.site}: its record {self.record!r} is not a dataclass")
        names = {f.name for f in dataclasses.fields(self.record)}
        if KEY not in names:
            raise TypeError(f"site {self.site}: its record {self.record.__name__} has no {KEY} field (its key)")
        if clash := sorted(names & RESERVED_FIELDS):
            raise TypeError(
                f"site {self.site}: its record {self.record.__name__} has a field named as a stored fact "
                f"({', '.join(clash)}): rename it"
            )

    @property
    def required(self) -> tuple[str, ...]:
        """The record's fields without a default, but its URL: each must be present on every stored record."""
        return tuple(
            f.name
            for f in dataclasses.fields(self.record)
            if f.name != KEY and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        )

    @property
    def stored(self) -> tuple[str, ...]:
        """The fields a record keeps in ``fields``, in the dataclass's order: all but its URL and category."""
        return tuple(f.name for f in dataclasses.fields(self.record) if f.name not in (KEY, CATEGORY))

    def fields_of(self, record: Any) -> dict[str, Any]:
        """What ``record`` stores in ``fields``: every field but its URL and category, JSON-ready."""
        return {name: jsonable(getattr(record, name)) for name in self.stored}

    # ------------------------------------------------------------------ the Site's store hooks

    def columns_of(self, record: Any) -> dict[str, Any]:
        """``record``'s ``fields`` (as JSON) and ``category`` as a query takes them."""
        category = getattr(record, CATEGORY, None)
        return {
            "fields": psycopg2.extras.Json(self.fields_of(record), dumps=_dumps),
            "category": None if category is None else str(category),
        }

    def write_detail(self, cur: Cursor, record: Any, fetched: FetchResult, *, requested_url: str) -> Stored:
        """Upsert ``record`` by its site and URL, with the page's HTML and the fetch it came from; new, changed
        (its fields or category differ from the stored ones) or unchanged, and its version."""
        cur.execute(
            Q["upsert_site_record"],
            {
                "site": self.site,
                "url": getattr(record, KEY),
                **self.columns_of(record),
                "raw_html": fetched.html,
                "raw_body": None if fetched.html.encode("utf-8") == fetched.body else psycopg2.Binary(fetched.body),
                "content_hash": fetched.content_hash,
                "http_status": fetched.status,
                "fetched_at": fetched.fetched_at,
            },
        )
        row = cur.fetchone()
        assert row is not None  # INSERT ... ON CONFLICT DO UPDATE returns its row
        outcome = "new" if row["inserted"] else "changed" if row["changed"] else "unchanged"
        return Stored(row["id"], outcome, row["version"])

    def revalidate_detail(self, cur: Cursor, url: str, validators: Validators, response: FetchResult) -> Stored:
        """A 304 for detail page ``url``: its stored record stands, seen at the 304's fetch, when it holds the copy
        the validators describe; :class:`StaleCopy` when none does (the page is fetched again)."""
        final_url = confirm_page(cur, url, validators, response)
        params = {
            "site": self.site,
            "url": final_url,
            "content_hash": validators.content_hash,
            "fetched_at": response.fetched_at,
        }
        cur.execute(Q["confirm_site_record"], params)
        row = cur.fetchone()
        if row is None:
            raise StaleCopy(url)
        return Stored(row["id"], "unchanged", row["version"])

    def write_listing(self, cur: Cursor, listing: Listing, fetched: FetchResult) -> None:
        """A listing's own records are not stored here (its page is kept in ``pages`` and the WARC archive): a
        site whose listings carry records keeps a table for them, as the quotes do."""

    def record_counts(self, db: Database) -> dict[str, int]:
        """The site's stored records (URLs are its key), those with their HTML, and the states they went through."""
        row = db.query(Q["site_record_counts"], {"site": self.site})[0]
        total = int(row["total"])
        return {
            "total": total,
            "unique_urls": total,
            "with_html": int(row["with_html"]),
            "versions": int(row["versions"]),
        }

    def versions_since(self, db: Database, since: datetime) -> tuple[int, int]:
        """The site's records stored as new since ``since``, and those stored before whose fields changed since."""
        row = db.query(Q["site_records_since"], {"site": self.site, "since": since})[0]
        return int(row["new"]), int(row["changed"])

    # ------------------------------------------------------------------ data checks

    @property
    def data_checks(self) -> tuple[DataCheck, ...]:
        """The rules the site's stored records hold after a crawl: one row per URL, the page's HTML kept, the
        record's required fields present."""
        site = {"site": self.site}
        required = ", ".join(self.required) or "none"
        return (
            DataCheck(
                "unique_urls",
                Q["duplicate_site_record_urls"],
                "one row per URL",
                f"No {self.site} record URL is stored twice.",
                self.noun,
                site,
            ),
            DataCheck(
                "raw_html_present",
                Q["site_records_missing_raw_html"],
                "raw HTML stored",
                f"Every stored {self.site} record keeps the HTML of its page.",
                self.noun,
                site,
            ),
            DataCheck(
                "required_fields_present",
                Q["site_records_missing_required_fields"],
                f"required fields present ({required})",
                f"The fields every {self.site} record requires ({required}) are present on each stored one.",
                self.noun,
                {**site, "required": list(self.required)},
            ),
        )
