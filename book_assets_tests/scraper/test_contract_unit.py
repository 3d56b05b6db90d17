"""The field contract: which values a field may take, and what a record that breaks it is told."""

from __future__ import annotations

from decimal import Decimal

import pytest

from book_assets.scraper.contract import MAX_COUNT, MAX_MONEY, FieldSpec, FieldType, RecordContract, out_of_type
from book_assets.scraper.models import BOOK_CONTRACT

pytestmark = pytest.mark.unit

CONTRACT = RecordContract(
    "thing", (FieldSpec("name", FieldType.TEXT), FieldSpec("note", FieldType.TEXT, required=False))
)


def test_a_record_without_a_required_field_names_it_and_an_absent_optional_one_is_no_problem() -> None:
    assert [p.line() for p in CONTRACT.problems({"name": None, "note": None})] == ["name"]
    assert [p.line() for p in CONTRACT.problems({"name": "  ", "note": None})] == ["name (not text)"]
    assert CONTRACT.problems({"name": "x"}) == []


@pytest.mark.parametrize(
    ("kind", "value", "reason"),
    [
        (FieldType.MONEY, Decimal("-1.00"), "negative: -1.00"),
        (FieldType.MONEY, MAX_MONEY, f"too large: {MAX_MONEY}"),
        (FieldType.MONEY, Decimal("1.234"), "more than two decimal places: 1.234"),
        (FieldType.MONEY, Decimal("Infinity"), "not an amount"),
        (FieldType.MONEY, 3, "not an amount"),
        (FieldType.COUNT, MAX_COUNT + 1, f"too large: {MAX_COUNT + 1}"),
        (FieldType.COUNT, -1, "negative: -1"),
        (FieldType.COUNT, True, "not an integer"),
        (FieldType.RATING, 0, "not a rating from 1 to 5: 0"),
        (FieldType.RATING, 6, "not a rating from 1 to 5: 6"),
    ],
)
def test_a_value_outside_its_type_is_told_why(kind: FieldType, value: object, reason: str) -> None:
    assert out_of_type(kind, value) == reason


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        (FieldType.MONEY, Decimal("51.77")),
        (FieldType.MONEY, Decimal("0")),
        (FieldType.COUNT, MAX_COUNT),
        (FieldType.RATING, 5),
        (FieldType.TEXT, "Poetry"),
    ],
)
def test_a_value_of_its_type_passes(kind: FieldType, value: object) -> None:
    assert out_of_type(kind, value) is None


def test_the_book_contract_requires_what_every_book_page_shows_and_leaves_description_and_stock_optional() -> None:
    assert BOOK_CONTRACT.optional == ("description", "stock")
    assert {"title", "price", "upc", "category", "rating"} <= set(BOOK_CONTRACT.required)
