"""The field contract of a stored record: each field's type, whether a page must show it, and its bounds.

A page that parses as its kind (a product page is a product page) can still lack what the data needs: a
redesign renames the class a field was read from, and the parser finds nothing. Without a contract that
looks like a book without a rating, and a crawl would store it as one. With it, a missing **required** field
or a value outside its type's range is a failure of that page with its own kind (``missing_field``,
``bad_value``) naming the fields, never a stored record; a missing **optional** field is a value the site
may legitimately not show (a book without a description), which only a drop in its fill rate across a crawl
can tell from a redesign (:mod:`book_assets.store.drift`).

The contract is declared once per record, beside its parser, and read by everything that judges records: the
parser's validation, the crawl's drift check, the Dagster checks and the docs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from enum import StrEnum


class FieldType(StrEnum):
    """What a field's value is, and so which values it may take."""

    TEXT = "text"  # non-empty text
    MONEY = "money"  # a non-negative Decimal with at most two places, under ``MAX_MONEY``
    COUNT = "count"  # a non-negative int that fits a PostgreSQL integer
    RATING = "rating"  # an int from 1 to 5
    DATE = "date"  # a calendar date (``datetime.date``), e.g. an author's birth date
    TEXTS = "texts"  # a tuple of non-empty texts, empty when the page shows none (a quote's tags)


#: The bound of a ``numeric(10,2)`` column: a money value must stay under it.
MAX_MONEY = Decimal("100000000")
#: The bound of a PostgreSQL ``integer`` column.
MAX_COUNT = 2**31 - 1


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field of a record: its name (the model's attribute), its type, and whether every page shows it."""

    name: str
    type: FieldType
    required: bool = True


@dataclass(frozen=True, slots=True)
class Problem:
    """What is wrong with one field of one record: missing, or a value outside its type (``reason``)."""

    field: str
    reason: str

    @property
    def missing(self) -> bool:
        return self.reason == "missing"

    def line(self) -> str:
        return self.field if self.missing else f"{self.field} ({self.reason})"


@dataclass(frozen=True)
class RecordContract:
    """The fields of one record kind, in the order a reader expects them."""

    record: str
    fields: tuple[FieldSpec, ...]

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields if f.required)

    @property
    def optional(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields if not f.required)

    def problems(self, values: Mapping[str, object]) -> list[Problem]:
        """Every field of ``values`` that breaks the contract: a required one absent (None), or any present
        value outside its type."""
        return list(self._problems(values))

    def _problems(self, values: Mapping[str, object]) -> Iterator[Problem]:
        for spec in self.fields:
            value = values.get(spec.name)
            if value is None or value == "":
                if spec.required:
                    yield Problem(spec.name, "missing")
                continue
            reason = out_of_type(spec.type, value)
            if reason is not None:
                yield Problem(spec.name, reason)


def out_of_type(kind: FieldType, value: object) -> str | None:
    """Why ``value`` is not a value of ``kind``, or None when it is."""
    if kind is FieldType.TEXT:
        return None if isinstance(value, str) and value.strip() else "not text"
    if kind is FieldType.DATE:
        return None if isinstance(value, date) else "not a date"
    if kind is FieldType.TEXTS:
        if not isinstance(value, tuple) or not all(isinstance(v, str) and v.strip() for v in value):
            return "not a tuple of texts"
        return None
    if kind is FieldType.MONEY:
        if not isinstance(value, Decimal) or not value.is_finite():
            return "not an amount"
        if value < 0:
            return f"negative: {value}"
        if value >= MAX_MONEY:
            return f"too large: {value}"
        if value != value.quantize(Decimal("0.01")):
            return f"more than two decimal places: {value}"
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        return "not an integer"
    if kind is FieldType.RATING:
        return None if 1 <= value <= 5 else f"not a rating from 1 to 5: {value}"
    if value < 0:
        return f"negative: {value}"
    return None if value <= MAX_COUNT else f"too large: {value}"
