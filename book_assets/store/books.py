"""Storing parsed book pages: insert, detect changes, keep history, re-extract from stored HTML.

``books`` always holds a book's latest state; ``book_versions`` holds every distinct state (version 1 at
first sight, one more row each time a re-crawl finds any extracted field changed), so a price change is
recorded instead of silently overwritten. Rows are written only from a validated ``BookDetail``: an error
page can never reach this module, because parsing it raises before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

import psycopg2.extras

from book_assets.db.connection import Cursor, Database
from book_assets.scraper.errors import ParseError
from book_assets.scraper.fetching import FetchResult
from book_assets.scraper.models import BookDetail
from book_assets.scraper.parsers import parse_book
from book_assets.sql import load_queries

Q = load_queries("books")
DRIFT = load_queries("drift")
StoreOutcome = Literal["new", "changed", "unchanged"]

#: Extracted fields compared between crawls; a difference in any of them makes a new version.
TRACKED_FIELDS = (
    "title",
    "category",
    "description",
    "upc",
    "product_type",
    "price_amount",
    "price_excl_tax",
    "price_incl_tax",
    "tax",
    "availability",
    "stock",
    "num_reviews",
    "rating_value",
)


#: The ``books`` column of each contract field (:data:`~book_assets.scraper.models.BOOK_CONTRACT`) stored under
#: another name: the typed price and rating (``price`` and ``rating`` are the text the site shows).
CONTRACT_COLUMNS = {"price": "price_amount", "rating": "rating_value"}
#: The columns whose change a crawl holds until its end judges the field (:func:`write_book`): every tracked field
#: but the category, which the judgement groups by. A page that shows another value, or none, never writes it
#: silently.
HELD_COLUMNS = tuple(f for f in TRACKED_FIELDS if f != "category")
#: The text column stored beside a typed one, held and written with it.
_BESIDE = {"price_amount": ("price",), "rating_value": ("rating",)}


def column_of(name: str) -> str:
    """The ``books`` column of contract field ``name``."""
    return CONTRACT_COLUMNS.get(name, name)


def _with_beside(column: str) -> tuple[str, ...]:
    return (column, *_BESIDE.get(column, ()))


#: Parses a book page's HTML at its URL: :func:`~book_assets.scraper.parsers.parse_book`, or a fixed one.
BookParser = Callable[[str, str], BookDetail]


def parse_served_or_rendered(
    served: str, rendered: str | None, url: str, *, parser: BookParser = parse_book
) -> BookDetail:
    """Parse the served HTML; fall back to the rendered DOM for pages whose data only scripts build.

    The served bytes are decoded with the right charset, while Chromium's DOM of a page without a declared
    charset can show "Â£": so the served HTML wins whenever it is a complete book page.
    """
    try:
        return parser(served, url)
    except ParseError:
        if not rendered or rendered == served:
            raise
        return parser(rendered, url)


def book_fields(detail: BookDetail) -> dict[str, Any]:
    """Column values for a parsed book: the text columns as the site shows them, and the typed ones."""
    return {
        "title": detail.title,
        "price": detail.price_text,
        "rating": detail.rating_text,
        "category": detail.category,
        "availability": detail.availability,
        "upc": detail.upc,
        "description": detail.description,
        "price_amount": detail.price,
        "price_excl_tax": detail.price_excl_tax,
        "price_incl_tax": detail.price_incl_tax,
        "tax": detail.tax,
        "rating_value": detail.rating,
        "stock": detail.stock,
        "num_reviews": detail.num_reviews,
        "product_type": detail.product_type,
    }


def _jsonable(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: (str(v) if isinstance(v, Decimal) else v) for k, v in fields.items()}


def _normalise(value: Any) -> Any:
    return str(value) if isinstance(value, Decimal) else value


@dataclass(frozen=True)
class StoredBook:
    book_id: int
    version: int
    outcome: StoreOutcome
    changed: tuple[str, ...] = ()


def store_book(db: Database, detail: BookDetail, fetch: FetchResult, *, requested_url: str | None = None) -> StoredBook:
    """Insert or update one book from a validated page in its own transaction (see :func:`write_book`)."""
    return db.run(lambda cur: write_book(cur, detail, fetch, requested_url=requested_url))


def served_bytes_if_lossy(fetch: FetchResult) -> bytes | None:
    """The served bytes when ``raw_html`` (stored as UTF-8) does not reproduce them, else None.

    Decoding can lose information: invalid UTF-8 becomes U+FFFD, a BOM is stripped, a NUL becomes U+FFFD
    (PostgreSQL text cannot hold NUL), a legacy charset is transcoded. The exact bytes are then kept
    beside the text, so ``content_hash`` (sha256 of the served bytes) always matches what is stored.
    """
    return None if fetch.html.encode("utf-8") == fetch.body else fetch.body


def write_book(cur: Cursor, detail: BookDetail, fetch: FetchResult, *, requested_url: str | None = None) -> StoredBook:
    """Insert or update one book from a validated page, recording a version when anything changed.

    The book is keyed by ``detail.url``, the canonical URL of the page that was served (after redirects);
    ``requested_url`` records the URL asked for when it differs. Runs inside the caller's transaction,
    so a worker can store and complete its task atomically under its lease.

    A page that shows another value of a field the book has, or none, may be a book that changed or a redesign
    the parser missed (a renamed class, a selector that now matches a heading); only the crawl's figures can tell
    (:mod:`book_assets.store.drift`). So while a crawl runs the change is held (``held_losses``): the book keeps
    its value and no version records the change until the crawl's end judges the field. Outside a crawl a value
    already held stays held (its drift is not accepted yet; the page's value replaces the held one); any other
    change is written, since nothing would judge it. A new book is written as its page shows it.
    """
    fields = book_fields(detail)
    rendered = fetch.rendered_html if fetch.rendered_html and fetch.rendered_html != fetch.html else None
    params = {
        **fields,
        "url": detail.url,
        "requested_url": requested_url if requested_url and requested_url != detail.url else None,
        "raw_html": fetch.html,
        "raw_body": served_bytes_if_lossy(fetch),
        "rendered_html": rendered,
        "content_hash": fetch.content_hash,
        "http_status": fetch.status,
        "fetched_at": fetch.fetched_at,
    }

    def _store(cur: Cursor) -> StoredBook:
        cur.execute(Q["insert_book"], params)
        row = cur.fetchone()
        if row is not None:
            _record_version(cur, row["id"], 1, detail.url, fields, (), fetch.content_hash, fetch.fetched_at)
            return StoredBook(row["id"], 1, "new")
        cur.execute(Q["lock_book"], {"url": detail.url})
        current = cur.fetchone()
        assert current is not None  # the insert conflicted, so the row exists
        kept = _kept_values(cur, current, fields, stage=True)
        if kept:
            fields.update(kept)
            params.update(kept)
        changed = tuple(f for f in TRACKED_FIELDS if _normalise(current[f]) != _normalise(fields[f]))
        if not changed:
            cur.execute(Q["touch_book"], {**params, "id": current["id"]})
            return StoredBook(current["id"], current["version"], "unchanged")
        cur.execute(Q["update_book"], {**params, "id": current["id"]})
        updated = cur.fetchone()
        assert updated is not None  # UPDATE ... RETURNING of the row just read
        version = updated["version"]
        _record_version(cur, current["id"], version, detail.url, fields, changed, fetch.content_hash, fetch.fetched_at)
        return StoredBook(current["id"], version, "changed", changed)

    return _store(cur)


def _kept_values(cur: Cursor, current: dict[str, Any], fields: dict[str, Any], *, stage: bool) -> dict[str, Any]:
    """The stored values of the fields the page changed (or lost) whose change is held: held already (a drift not
    accepted yet; the page's value is held in place of the one held before) or, with ``stage``, held now by the
    running crawl. A held value of a field the page shows as stored again is void."""
    changed = [f for f in HELD_COLUMNS if _normalise(current[f]) != _normalise(fields[f])]
    back = [f for f in current["held"] if f not in changed]
    if back:
        cur.execute(DRIFT["release_held"], {"book_id": current["id"], "fields": back})
    held: set[str] = set()
    if changed and (stage or current["held"]):
        shown = {f: _jsonable({c: fields[c] for c in _with_beside(f)}) for f in changed}
        held_now = {"book_id": current["id"], "values": psycopg2.extras.Json(shown), "stage": stage}
        cur.execute(DRIFT["hold_values"], held_now)
        held = {row["field"] for row in cur.fetchall()}
    return {c: current[c] for f in sorted(held) for c in _with_beside(f)}


#: The columns of ``lock_book``'s row that are no field of the book (:func:`book_fields`).
_NOT_FIELDS = frozenset({"id", "version", "held"})


def apply_held(cur: Cursor, url: str, shown: dict[str, Any]) -> tuple[str, ...]:
    """Write the held values ``shown`` (columns -> values, as :func:`write_book` held them) to the book at ``url``:
    a version records the tracked fields they change. Returns those fields."""
    cur.execute(Q["lock_book"], {"url": url})
    current = cur.fetchone()
    if current is None:
        return ()
    fields = {name: value for name, value in current.items() if name not in _NOT_FIELDS}
    fields.update({c: v for c, v in shown.items() if c in fields})
    return _write_fields(cur, current, url, fields)


def _write_fields(cur: Cursor, current: dict[str, Any], url: str, fields: dict[str, Any]) -> tuple[str, ...]:
    """Write ``fields`` over the stored book ``current`` (its stored fetch unchanged), a version recording the
    tracked fields changed; returns them."""
    changed = tuple(f for f in TRACKED_FIELDS if _normalise(current[f]) != _normalise(fields[f]))
    cur.execute(Q["reextract_book"], {**fields, "id": current["id"], "versioned": bool(changed)})
    updated = cur.fetchone()
    assert updated is not None  # UPDATE ... RETURNING of the row just locked
    if changed:
        _record_version(
            cur, current["id"], updated["version"], url, fields, changed, updated["content_hash"], updated["fetched_at"]
        )
    return changed


def _record_version(
    cur: Cursor,
    book_id: int,
    version: int,
    url: str,
    fields: dict[str, Any],
    changed: tuple[str, ...],
    content_hash: str | None,
    fetched_at: datetime | None,
) -> None:
    cur.execute(
        Q["insert_version"],
        {
            "book_id": book_id,
            "version": version,
            "url": url,
            "fields": psycopg2.extras.Json(_jsonable(fields)),
            "changed": list(changed),
            "content_hash": content_hash,
            "fetched_at": fetched_at,
        },
    )


@dataclass(frozen=True)
class ReextractReport:
    """Stored pages parsed again: how many, how many books changed (``versions`` of them in a tracked field, a
    version each), the pages the parser refuses (by error kind), and the held losses kept (by field)."""

    scanned: int
    changed: int
    unparseable: int
    errors: tuple[str, ...]
    versions: int = 0
    refused: dict[str, int] = field(default_factory=dict)
    kept: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        refused = ", ".join(f"{n} {kind}" for kind, n in sorted(self.refused.items()))
        kept = ", ".join(f"{n} {name}" for name, n in sorted(self.kept.items())) or "none"
        return (
            f"re-extracted {self.scanned} books: {self.changed} changed ({self.versions} with a version), "
            f"{self.unparseable} unparseable{f' ({refused})' if refused else ''}; held losses kept: {kept}"
        )


def reextract(db: Database, *, parser: BookParser = parse_book, batch_size: int = 200) -> ReextractReport:
    """Parse every stored page again with ``parser`` into the structured columns, without touching the network.

    Pages built by JavaScript are parsed from their stored rendered DOM, the rest from ``raw_html``. The values
    are written as a crawl writes them (:func:`write_book`): a change of a tracked field records a version, and
    the loss of an optional field whose loss is held (its drift not accepted: after a redesigned crawl the
    stored HTML is the redesigned page) is not written, but kept and counted. Rows whose stored HTML no longer
    parses (a contract failure included) are left as they are and reported with their error kind. The pages
    a crawl held at the door (their contract broken) are rebuilt by :func:`book_assets.store.held.reextract_held`.
    """
    after, scanned, changed, versions, unparseable = 0, 0, 0, 0, 0
    errors: list[str] = []
    refused: dict[str, int] = {}
    kept: dict[str, int] = {}
    while True:
        rows = db.query(Q["books_for_reextract"], {"after": after, "limit": batch_size})
        if not rows:
            break
        parsed: list[BookDetail] = []
        for row in rows:
            after = row["id"]
            scanned += 1
            try:
                parsed.append(
                    parse_served_or_rendered(row["raw_html"], row["rendered_html"], row["url"], parser=parser)
                )
            except ParseError as exc:
                unparseable += 1
                refused[exc.kind] = refused.get(exc.kind, 0) + 1
                if len(errors) < 20:
                    errors.append(f"{row['url']}: {exc.kind}: {exc}")

        def _apply(cur: Cursor, batch: list[BookDetail] = parsed) -> list[Reextracted]:
            return [_reextract_book(cur, detail) for detail in batch]

        for one in db.run(_apply):
            changed += one.written
            versions += bool(one.changed)
            for name in one.kept:
                kept[name] = kept.get(name, 0) + 1
    return ReextractReport(scanned, changed, unparseable, tuple(errors), versions, refused, kept)


@dataclass(frozen=True)
class Reextracted:
    """One book parsed again: whether a column was written, the tracked fields changed, the held losses kept."""

    written: bool
    changed: tuple[str, ...]
    kept: tuple[str, ...]


def _reextract_book(cur: Cursor, detail: BookDetail) -> Reextracted:
    """Write one book's re-parsed fields as :func:`write_book` would, its stored fetch unchanged."""
    cur.execute(Q["lock_book"], {"url": detail.url})
    current = cur.fetchone()
    if current is None:  # the row's URL is the page's canonical one; a parser giving another finds no book
        return Reextracted(False, (), ())
    fields = book_fields(detail)
    kept = _kept_values(cur, current, fields, stage=False)
    fields.update(kept)
    held = tuple(c for c in kept if c in HELD_COLUMNS)
    if all(_normalise(current[f]) == _normalise(v) for f, v in fields.items()):
        return Reextracted(False, (), held)
    return Reextracted(True, _write_fields(cur, current, detail.url, fields), held)


def book_counts(db: Database) -> dict[str, int]:
    """The three counts: total, unique URLs, with raw HTML (and versions)."""
    return {k: int(v) for k, v in db.query(Q["book_counts"])[0].items()}


def versions_since(db: Database, since: datetime) -> tuple[int, int]:
    """Books stored as new and as changed since ``since`` (versions recorded by the database's clock)."""
    row = db.query(Q["versions_since"], {"since": since})[0]
    return int(row["new"]), int(row["changed"])
