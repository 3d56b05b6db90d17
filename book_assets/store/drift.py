"""Field drift held at the door of the day: a crawl's fill rate and value shape per field, judged against the last
good crawl's.

A redesign rarely fails a page: every URL still answers 200 with a product page, only a field the parser keys
on is gone or now matches something else. A required field's absence fails the page (``missing_field``, the
contract's door of one page); an optional field's cannot, since a book may have no description; and a value of
the wrong shape (a selector that now matches a heading, or one constant element) is still a value of its type.
So the day judges it: when a crawl ends, each contract field among the book pages it stored or failed on the
contract (``missing_field``, ``bad_value``), in the whole crawl and in each category with at least
``drift_min_pages`` pages, is compared with the last good crawl's, on three figures each explainable in a line:

- the fill rate: a fall of more than ``drift_threshold`` is drift (``description: 99 % -> 0 % of pages``);
- for a text field, the median length of its values: more than ``drift_length_ratio`` times shorter or longer is
  drift (``description: median length 285 -> 27 chars``);
- the share of the most common value: a rise of more than ``drift_top_share`` is drift (``rating: most common
  value on 26 % -> 100 % of values``: every rating 1, every price 0, every title the same).

The shape is judged where both crawls measured at least ``drift_min_pages`` values. A category is what the
judgement groups by, so it has no shape of its own (a crawl that reached one category first is not a drift).
Spidermon's field-coverage monitors do the first for Scrapy; alltheplaces keeps the last good output when a run
degrades.

What that costs nothing good: while a crawl runs, a page that shows another value of a field the book has, or
none, does not write it (:func:`~book_assets.store.books.write_book` holds it in ``held_losses``). At the end, a
field that did not drift has its held values written (a book that really changed gets a version saying so, and
the change feed reports it); a drifted field's stay held, the books keep their last good values, the crawl says
so (its report's drift lines, a non-zero exit, the Dagster check ``no_field_drift``) until an operator accepts
the drift as the site's real change (:func:`accept`), which writes them.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from book_assets.db.connection import Cursor, Database
from book_assets.scraper.contract import FieldType
from book_assets.scraper.errors import ErrorKind
from book_assets.scraper.models import BOOK_CONTRACT
from book_assets.sql import load_queries
from book_assets.store.books import HELD_COLUMNS, apply_held, column_of

Q = load_queries("drift")
#: The failures of a page that count against its fields: the page was a product page, but the fields its
#: error names were missing or out of type.
CONTRACT_FAILURES = (ErrorKind.MISSING_FIELD, ErrorKind.BAD_VALUE)
#: The whole crawl, as the category of a coverage row.
WHOLE_CRAWL = ""
_URL = re.compile(r"\bhttps?://\S+")
_FIELD_NAMES = {name: re.compile(rf"\b{name}\b") for name in (f.name for f in BOOK_CONTRACT.fields)}
#: The fields whose most common value's share is judged, and the text fields whose median length is: every field
#: but the category, which the judgement groups by.
TOP_FIELDS = frozenset(f.name for f in BOOK_CONTRACT.fields if f.name != "category")
LENGTH_FIELDS = frozenset(f.name for f in BOOK_CONTRACT.fields if f.type is FieldType.TEXT and f.name in TOP_FIELDS)


class Measure(StrEnum):
    """The figure a field drifted on."""

    FILL = "fill"  # its fill rate fell
    LENGTH = "length"  # its values' median length moved
    TOP = "top"  # its most common value's share rose


@dataclass(frozen=True)
class DriftLimits:
    """How far a field's figures may move before it drifts (the ``drift_*`` settings)."""

    threshold: float
    min_pages: int
    length_ratio: float
    top_share: float


def fields_named(error: str) -> frozenset[str]:
    """The contract fields a contract failure's message names (its URL left out)."""
    text = _URL.sub("", error)
    return frozenset(name for name, pattern in _FIELD_NAMES.items() if pattern.search(text))


def percent(rate: float) -> str:
    """``0.995`` as ``99.5 %``, ``1.0`` as ``100 %``."""
    shown = f"{rate * 100:.1f}".removesuffix(".0")
    return f"{shown} %"


@dataclass(frozen=True)
class Coverage:
    """One field's coverage in one crawl (``category`` empty: the whole crawl), and how it was judged: its fill
    rate (``filled`` of ``pages``) and the shape of the values stored (``measured``: the most common one,
    ``top_value``, on ``top_count``; the median length of a text field's), with the last good crawl's."""

    category: str
    field: str
    pages: int
    filled: int
    base_crawl_id: int | None = None
    base_pages: int | None = None
    base_filled: int | None = None
    drifted: bool = False
    crawl_id: int | None = None
    measured: int | None = None
    top_count: int | None = None
    top_value: str | None = None
    median_length: int | None = None
    base_measured: int | None = None
    base_top_count: int | None = None
    base_median_length: int | None = None
    drifted_on: str | None = None

    @property
    def rate(self) -> float:
        return self.filled / self.pages if self.pages else 0.0

    @property
    def base_rate(self) -> float | None:
        return self.base_filled / self.base_pages if self.base_pages and self.base_filled is not None else None

    @property
    def top_share(self) -> float | None:
        return self.top_count / self.measured if self.measured and self.top_count is not None else None

    @property
    def base_top_share(self) -> float | None:
        if not self.base_measured or self.base_top_count is None:
            return None
        return self.base_top_count / self.base_measured

    def line(self) -> str:
        """The field (in its category) and the figure it drifted on, before and now, with their counts:
        ``description: 100 % -> 0 % of pages (...)``, ``description: median length 812 -> 14 chars (...)``,
        ``rating: most common value on 26 % -> 100 % of values (...)``."""
        where = f" in {self.category}" if self.category else ""
        base = f" in crawl {self.base_crawl_id}"
        if self.drifted_on == Measure.LENGTH:
            return (
                f"{self.field}{where}: median length {self.base_median_length} -> {self.median_length} chars "
                f"({self.base_measured} values{base} -> {self.measured})"
            )
        if self.drifted_on == Measure.TOP and self.top_share is not None and self.base_top_share is not None:
            return (
                f"{self.field}{where}: most common value on {percent(self.base_top_share)} -> "
                f"{percent(self.top_share)} of values ({self.base_top_count} of {self.base_measured}{base} -> "
                f"{self.top_count} of {self.measured}: {self.top_value!r})"
            )
        before_rate = self.base_rate
        before = f"{percent(before_rate)} -> " if before_rate is not None else ""
        counts = f"{self.filled} of {self.pages}"
        if before_rate is not None:
            counts = f"{self.base_filled} of {self.base_pages}{base} -> {counts}"
        return f"{self.field}{where}: {before}{percent(self.rate)} of pages ({counts})"


@dataclass(frozen=True)
class FieldJudgement:
    """What the end of crawl ``crawl_id`` judged: its coverage, its drift, the held values written and kept."""

    crawl_id: int
    base_crawl_id: int | None
    coverage: tuple[Coverage, ...]
    #: Field -> held values written (no drift of the field where the book is).
    applied: dict[str, int] = field(default_factory=dict)
    #: Field -> values still held (the field drifted).
    held: dict[str, int] = field(default_factory=dict)

    @property
    def drifts(self) -> tuple[Coverage, ...]:
        """One row per drifted field (:func:`headline`)."""
        return headline(self.coverage)

    @property
    def drifted_fields(self) -> tuple[str, ...]:
        return tuple(sorted({c.field for c in self.drifts}))

    def lines(self) -> list[str]:
        """The report's lines: one per drifted field (and category), else one saying the fields held."""
        if not self.drifts:
            against = f"crawl {self.base_crawl_id}" if self.base_crawl_id else "no earlier crawl"
            applied = sum(self.applied.values())
            return [f"fields: no drift against {against}; {applied} held values applied"]
        held = ", ".join(f"{n} {f}" for f, n in sorted(self.held.items())) or "none"
        return [
            f"FIELD DRIFT in crawl {self.crawl_id}: {len(self.drifted_fields)} field(s); the books keep their last "
            f"good values (values held: {held}); accept a real change with: book-pipeline drift accept "
            f"--crawl {self.crawl_id} --field <field>",
            *(f"  {c.line()}" for c in self.drifts),
        ]


def headline(rows: Iterable[Coverage]) -> tuple[Coverage, ...]:
    """The drifted rows a reader is shown: a field's whole-crawl row when it drifted there (its categories
    drifted with it), else each category where it drifted."""
    drifted = [c for c in rows if c.drifted]
    whole = {(c.crawl_id, c.field) for c in drifted if c.category == WHOLE_CRAWL}
    return tuple(c for c in drifted if c.category == WHOLE_CRAWL or (c.crawl_id, c.field) not in whole)


def coverage_of(
    db: Database,
    since: datetime,
    failures: Iterable[tuple[str, str]],
    *,
    min_pages: int,
    until: datetime | None = None,
) -> list[Coverage]:
    """The coverage of the book pages fetched since ``since`` (and by ``until``) and the contract failures
    ``(category, error)``: per field, in the whole crawl and in each category with at least ``min_pages`` pages;
    the shape of the values the stored pages showed where the field has one (:data:`TOP_FIELDS`,
    :data:`LENGTH_FIELDS`)."""
    rows: dict[tuple[str, str], Coverage] = {}
    for row in db.query(Q["stored_coverage"], {"since": since, "until": until}):
        if not row["whole"] and row["category"] == WHOLE_CRAWL:
            continue  # books without a category count in the whole crawl only
        name = row["field"]
        rows[row["category"] if not row["whole"] else WHOLE_CRAWL, name] = Coverage(
            row["category"] if not row["whole"] else WHOLE_CRAWL,
            name,
            row["pages"],
            row["filled"],
            measured=row["filled"] if name in TOP_FIELDS else None,
            top_count=row["top_count"] if name in TOP_FIELDS else None,
            top_value=row["top_value"] if name in TOP_FIELDS else None,
            median_length=row["median_length"] if name in LENGTH_FIELDS else None,
        )
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for category, error in failures:
        named = fields_named(error)
        for spec in BOOK_CONTRACT.fields:
            for where in {WHOLE_CRAWL, category}:
                counts[where, spec.name][0] += 1
                counts[where, spec.name][1] += spec.name not in named
    for key, (pages, filled) in counts.items():
        stored = rows.get(key, Coverage(key[0], key[1], 0, 0))
        rows[key] = replace(stored, pages=stored.pages + pages, filled=stored.filled + filled)
    return [row for key, row in sorted(rows.items()) if key[0] == WHOLE_CRAWL or row.pages >= min_pages]


def judged(
    current: Sequence[Coverage],
    base: dict[tuple[str, str], Coverage],
    *,
    limits: DriftLimits,
    base_crawl_id: int | None,
) -> list[Coverage]:
    """``current`` judged against the last good crawl's rows ``base``: drifted where both have ``min_pages``
    pages and the fill rate fell by more than ``threshold``, or both measured ``min_pages`` values and their
    shape moved past its limit (:func:`drifted_on`)."""
    out = []
    for row in current:
        before = base.get((row.category, row.field))
        if before is None:
            out.append(row)
            continue
        judged_row = replace(
            row,
            base_crawl_id=base_crawl_id,
            base_pages=before.pages,
            base_filled=before.filled,
            base_measured=before.measured,
            base_top_count=before.top_count,
            base_median_length=before.median_length,
        )
        measure = drifted_on(judged_row, limits)
        out.append(replace(judged_row, drifted=measure is not None, drifted_on=measure))
    return out


def drifted_on(row: Coverage, limits: DriftLimits) -> Measure | None:
    """The figure of a judged row that moved past its limit (the fill rate first), None when none did."""
    min_pages, base_rate = limits.min_pages, row.base_rate
    judged_fill = row.pages >= min_pages and (row.base_pages or 0) >= min_pages and base_rate is not None
    if judged_fill and base_rate is not None and base_rate - row.rate > limits.threshold:
        return Measure.FILL
    if (row.measured or 0) < min_pages or (row.base_measured or 0) < min_pages:
        return None
    now, before = row.median_length, row.base_median_length
    if now is not None and before is not None and min(now, before) * limits.length_ratio < max(now, before):
        return Measure.LENGTH
    share, base_share = row.top_share, row.base_top_share
    if share is not None and base_share is not None and share - base_share > limits.top_share:
        return Measure.TOP
    return None


def judge(
    db: Database,
    crawl_id: int,
    since: datetime,
    failures: Iterable[tuple[str, str]],
    *,
    limits: DriftLimits,
    until: datetime | None = None,
) -> FieldJudgement:
    """Judge crawl ``crawl_id`` (its book pages since ``since`` and by ``until``, its contract failures) against
    the last good crawl, record the judgement, and write the held values of the fields that did not drift."""
    current = coverage_of(db, since, failures, min_pages=limits.min_pages, until=until)
    base_id = db.query(Q["last_good_crawl"], {"crawl_id": crawl_id})[0]["crawl_id"]
    base = {(c.category, c.field): c for c in crawl_coverage(db, base_id)} if base_id is not None else {}
    rows = judged(current, base, limits=limits, base_crawl_id=base_id)

    def _record(cur: Cursor) -> dict[str, int]:
        cur.execute(Q["forget_coverage"], {"crawl_id": crawl_id})
        for row in rows:
            cur.execute(Q["record_coverage"], {**_columns(row), "crawl_id": crawl_id})
        hold = [(column_of(c.field), c.category) for c in rows if c.drifted]
        return write_held(cur, crawl_id, HELD_COLUMNS, hold=hold)

    applied = {field_of(column): n for column, n in db.run(_record).items()}
    held = {field: n for (crawl, field), n in held_losses(db).items() if crawl == crawl_id}
    return FieldJudgement(crawl_id, base_id, tuple(rows), applied=applied, held=held)


def _columns(row: Coverage) -> dict[str, Any]:
    return {
        "category": row.category,
        "field": row.field,
        "pages": row.pages,
        "filled": row.filled,
        "base_crawl_id": row.base_crawl_id,
        "base_pages": row.base_pages,
        "base_filled": row.base_filled,
        "drifted": row.drifted,
        "measured": row.measured,
        "top_count": row.top_count,
        "top_value": row.top_value,
        "median_length": row.median_length,
        "base_measured": row.base_measured,
        "base_top_count": row.base_top_count,
        "base_median_length": row.base_median_length,
        "drifted_on": row.drifted_on,
    }


def write_held(
    cur: Cursor, crawl_id: int, columns: Sequence[str], *, hold: Sequence[tuple[str, str]] = ()
) -> dict[str, int]:
    """Write the values of ``columns`` that crawl ``crawl_id`` and those before it held, but in the ``(column,
    category)`` pairs ``hold`` (an empty category: everywhere): one version per book for the fields it changes.
    Returns column -> books changed."""
    cur.execute(
        Q["release_held_values"],
        {
            "crawl_id": crawl_id,
            "fields": list(columns),
            "hold_fields": [f for f, _ in hold],
            "hold_categories": [c for _, c in hold],
        },
    )
    by_book: dict[str, dict[str, Any]] = defaultdict(dict)
    for row in cur.fetchall():
        by_book[row["url"]].update(row["value"])
    written: dict[str, int] = {}
    for url in sorted(by_book):
        for name in apply_held(cur, url, by_book[url]):
            written[name] = written.get(name, 0) + 1
    return written


def crawl_coverage(db: Database, crawl_id: int) -> list[Coverage]:
    """Crawl ``crawl_id``'s coverage rows, as its judgement recorded them."""
    return [Coverage(**row) for row in db.query(Q["crawl_coverage"], {"crawl_id": crawl_id})]


def unaccepted_drift(db: Database, crawl_id: int | None = None) -> list[Coverage]:
    """The drifted rows of crawl ``crawl_id`` (of every crawl when None) that no acceptance covers, one per
    drifted field of a crawl (:func:`headline`)."""
    return list(headline(Coverage(**row) for row in db.query(Q["unaccepted_drift"], {"crawl_id": crawl_id})))


def held_losses(db: Database) -> dict[tuple[int, str], int]:
    """``(crawl, field)`` -> values held (by contract field: ``rating``, not its column ``rating_value``)."""
    return {(r["crawl_id"], field_of(r["field"])): r["books"] for r in db.query(Q["held_by_crawl"])}


#: The contract field of each ``books`` column that holds one.
_FIELD_OF = {column_of(f.name): f.name for f in BOOK_CONTRACT.fields}


def field_of(column: str) -> str:
    """The contract field a ``books`` column holds (``rating_value``: ``rating``)."""
    return _FIELD_OF.get(column, column)


#: The contract failures ``(category, error)`` of the book pages a crawl claimed between two moments (the second
#: None: until now): :meth:`~book_assets.queue.TaskQueue.failures_since` of the detail tasks.
FailuresOf = Callable[[datetime, datetime | None], Iterable[tuple[str, str]]]


@dataclass(frozen=True)
class Rejudgement:
    """A drifted crawl judged again from what is stored: the fields whose drift it resolved, those still
    drifting; ``stale`` when too few of its pages are stored as it fetched them (a later crawl fetched them
    again) and a drift stands that no later crawl's new judgement resolved."""

    crawl_id: int
    resolved: tuple[str, ...]
    drifting: tuple[str, ...]
    stale: bool = False

    def line(self) -> str:
        if self.stale:
            return (
                f"crawl {self.crawl_id} not judged again: a later crawl fetched its pages again "
                f"(its drift of {', '.join(self.drifting)} stands)"
            )
        resolved = f"resolved the drift of {', '.join(self.resolved)}" if self.resolved else ""
        still = f"still drifts ({', '.join(self.drifting)})" if self.drifting else ""
        return f"crawl {self.crawl_id} {'; '.join(part for part in (resolved, still) if part) or 'has no drift'}"


def rejudge(db: Database, failures_of: FailuresOf, *, limits: DriftLimits, by: str = "reextract") -> list[Rejudgement]:
    """Judge again, from what is stored now, every crawl whose drift no one accepted, as its end judged it
    (:func:`judge`: its pages fetched between its start and its end, its contract failures, the same last good
    crawl). Run after ``reextract`` rebuilt pages: a drift the fixed parser undid is resolved (a
    ``drift_resolutions`` row records by what, and the figures before and after; the crawl's rows are the new
    judgement, so the check ``no_field_drift`` passes), and the field's remaining held values are written as
    for a field that did not drift. A crawl with fewer than ``min_pages`` pages stored as it fetched them
    (a later crawl fetched them again) is not judged again; its drift of a field that a later crawl's new
    judgement resolved is resolved with it (the daily runs that drifted before the fix), the rest stands."""
    out = []
    #: Field -> the latest crawl judged again here whose drift of it was resolved, with its new row.
    later: dict[str, tuple[int, Coverage]] = {}
    for crawl_id in sorted({c.crawl_id for c in unaccepted_drift(db) if c.crawl_id is not None}, reverse=True):
        before = {c.field: c for c in reversed(headline(crawl_coverage(db, crawl_id)))}
        window = db.query(Q["crawl_window"], {"crawl_id": crawl_id})[0]
        since, until = window["started_at"], window["finished_at"]
        failures = list(failures_of(since, until))
        current = coverage_of(db, since, failures, min_pages=limits.min_pages, until=until)
        if max((c.pages for c in current if c.category == WHOLE_CRAWL), default=0) < limits.min_pages:
            covered = tuple(sorted(set(before) & set(later)))
            for name in covered:
                _record_resolution(db, crawl_id, before[name], later[name][1], by=by, judged_crawl_id=later[name][0])
                db.query(Q["clear_drift"], {"crawl_id": crawl_id, "field": name})
            drifting = tuple(sorted(set(before) - set(covered)))
            out.append(Rejudgement(crawl_id, covered, drifting, stale=bool(drifting)))
            continue
        judgement = judge(db, crawl_id, since, failures, limits=limits, until=until)
        now = {(c.category, c.field): c for c in judgement.coverage}
        db.query(Q["forget_resolutions"], {"crawl_id": crawl_id, "fields": list(judgement.drifted_fields)})
        resolved = tuple(sorted(set(before) - set(judgement.drifted_fields)))
        for name in resolved:
            was = before[name]
            after = now.get((was.category, name), Coverage(was.category, name, 0, 0))
            _record_resolution(db, crawl_id, was, after, by=by, judged_crawl_id=crawl_id)
            later.setdefault(name, (crawl_id, after))
        out.append(Rejudgement(crawl_id, resolved, judgement.drifted_fields))
    return sorted(out, key=lambda r: r.crawl_id)


def _record_resolution(
    db: Database, crawl_id: int, was: Coverage, after: Coverage, *, by: str, judged_crawl_id: int
) -> None:
    db.query(
        Q["record_resolution"],
        {
            "crawl_id": crawl_id,
            "field": was.field,
            "category": was.category,
            "resolved_by": by,
            "judged_crawl_id": judged_crawl_id,
            "drifted_pages": was.pages,
            "drifted_filled": was.filled,
            "pages": after.pages,
            "filled": after.filled,
            "drifted_on": was.drifted_on,
            "drifted_measured": was.measured,
            "drifted_top_count": was.top_count,
            "drifted_median_length": was.median_length,
            "measured": after.measured,
            "top_count": after.top_count,
            "median_length": after.median_length,
        },
    )


@dataclass(frozen=True)
class Resolution:
    """A drift a new judgement of its crawl resolved (:func:`rejudge`): the figure it drifted on, as judged at the
    crawl's end (``drifted_*``) and judged again."""

    crawl_id: int
    field: str
    category: str
    resolved_by: str
    resolved_at: datetime
    judged_crawl_id: int
    drifted_pages: int
    drifted_filled: int
    pages: int
    filled: int
    drifted_on: str | None = None
    drifted_measured: int | None = None
    drifted_top_count: int | None = None
    drifted_median_length: int | None = None
    measured: int | None = None
    top_count: int | None = None
    median_length: int | None = None

    def figures(self, judged: str = "") -> str:
        """``0 % -> 99 % of pages judged again (99 of 100)``, or the shape figure the field drifted on; ``judged``
        says where it was judged again when not in the crawl itself."""
        was = Coverage(self.category, self.field, self.drifted_pages, self.drifted_filled)
        now = Coverage(self.category, self.field, self.pages, self.filled)
        if self.drifted_on == Measure.LENGTH:
            return (
                f"median length {self.drifted_median_length} -> {self.median_length} chars judged again{judged} "
                f"({self.measured} values)"
            )
        before = replace(was, measured=self.drifted_measured, top_count=self.drifted_top_count).top_share
        after = replace(now, measured=self.measured, top_count=self.top_count).top_share
        if self.drifted_on == Measure.TOP and before is not None and after is not None:
            return (
                f"most common value on {percent(before)} -> {percent(after)} of values judged again{judged} "
                f"({self.top_count} of {self.measured})"
            )
        return (
            f"{percent(was.rate)} -> {percent(now.rate)} of pages judged again{judged} ({self.filled} of {self.pages})"
        )

    def line(self) -> str:
        where = f" in {self.category}" if self.category else ""
        judged = (
            ""
            if self.judged_crawl_id == self.crawl_id
            else f" in crawl {self.judged_crawl_id}, which fetched them again"
        )
        return (
            f"crawl {self.crawl_id}: the drift of {self.field}{where} resolved by {self.resolved_by} at "
            f"{self.resolved_at:%Y-%m-%d %H:%M:%S %Z}: {self.figures(judged)}"
        )


def resolutions(db: Database) -> list[Resolution]:
    """Every drift a new judgement resolved, newest first."""
    return [Resolution(**row) for row in db.query(Q["resolutions"])]


class NoSuchDrift(ValueError):
    """An acceptance names a crawl and field that did not drift; the message says what did."""


@dataclass(frozen=True)
class Acceptance:
    """An operator's acceptance of a field's drift in a crawl."""

    crawl_id: int
    field: str
    accepted_by: str
    accepted_at: datetime
    applied: int
    #: Later crawls whose drift of the field (against a crawl before this one) the acceptance covered too.
    later: tuple[int, ...] = ()

    def line(self) -> str:
        also = f", and in crawl(s) {', '.join(map(str, self.later))} after it" if self.later else ""
        return (
            f"accepted the drift of {self.field} in crawl {self.crawl_id}{also} (by {self.accepted_by} at "
            f"{self.accepted_at:%Y-%m-%d %H:%M:%S %Z}): {self.applied} held losses applied"
        )


def accept(db: Database, crawl_id: int, name: str, by: str) -> Acceptance:
    """Record that ``by`` accepts the drift of field ``name`` in crawl ``crawl_id`` as the site's real change, and
    write its held values (in every category). Later crawls that drifted the same way (judged against a crawl
    before this one, as the daily runs are until someone accepts) are accepted with it, and their held values
    written. Raises :class:`NoSuchDrift` when that field did not drift there."""
    drifted = {c.field for c in crawl_coverage(db, crawl_id) if c.drifted}
    if name not in drifted:
        found = ", ".join(sorted(drifted)) or "none"
        raise NoSuchDrift(f"crawl {crawl_id} has no drift of {name!r} (its drifted fields: {found})")

    def _accept(cur: Cursor) -> Acceptance:
        cur.execute(Q["accept_drift"], {"crawl_id": crawl_id, "field": name, "accepted_by": by})
        later = tuple(sorted(r["crawl_id"] for r in cur.fetchall() if r["crawl_id"] != crawl_id))
        up_to = max((crawl_id, *later))
        applied = write_held(cur, up_to, [column_of(name)]).get(column_of(name), 0)
        cur.execute(Q["record_applied"], {"crawl_id": crawl_id, "field": name, "applied": applied})
        row = cur.fetchone()
        assert row is not None  # the acceptance was just inserted (or kept)
        return Acceptance(**row, later=later)

    return db.run(_accept)


def acceptances(db: Database) -> list[Acceptance]:
    """Every acceptance recorded, newest first."""
    return [Acceptance(**row) for row in db.query(Q["acceptances"])]


def stored_fields_as_of(db: Database, until: datetime) -> dict[str, dict[str, Any]]:
    """Each book's fields (as its versions record them, by URL) in its latest version recorded before ``until``:
    what an archived day is replayed against."""
    return {row["url"]: row["fields"] for row in db.query(Q["stored_as_of"], {"until": until})}
