"""The quote's and the author's field contracts, and the field types they brought: a date, a tuple of texts."""

from __future__ import annotations

import dataclasses
from datetime import date, datetime

import pytest

from book_assets.scraper.contract import FieldType, RecordContract, out_of_type
from book_assets.sites.quotes.models import AUTHOR_CONTRACT, QUOTE_CONTRACT, Author, Quote


@pytest.mark.parametrize(
    ("kind", "value", "reason"),
    [
        (FieldType.DATE, "March 14, 1879", "not a date"),
        (FieldType.DATE, 1879, "not a date"),
        (FieldType.TEXTS, ["love"], "not a tuple of texts"),
        (FieldType.TEXTS, ("love", ""), "not a tuple of texts"),
        (FieldType.TEXTS, ("love", 3), "not a tuple of texts"),
        (FieldType.TEXTS, "love", "not a tuple of texts"),
    ],
)
def test_a_value_outside_a_new_type_says_why(kind: FieldType, value: object, reason: str) -> None:
    assert out_of_type(kind, value) == reason


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        (FieldType.DATE, date(1879, 3, 14)),
        (FieldType.DATE, datetime(1879, 3, 14, 12, 0)),
        (FieldType.TEXTS, ("love", "life")),
        (FieldType.TEXTS, ()),
    ],
)
def test_a_value_of_a_new_type_is_in_it(kind: FieldType, value: object) -> None:
    assert out_of_type(kind, value) is None


@pytest.mark.parametrize(("contract", "model"), [(QUOTE_CONTRACT, Quote), (AUTHOR_CONTRACT, Author)])
def test_every_contract_field_is_a_field_of_its_record(contract: RecordContract, model: type) -> None:
    names = {f.name for f in dataclasses.fields(model)}
    assert {spec.name for spec in contract.fields} <= names


def test_a_quote_needs_its_text_and_author_and_may_lack_a_link_and_tags() -> None:
    assert QUOTE_CONTRACT.required == ("text", "author")
    assert QUOTE_CONTRACT.optional == ("author_url", "tags")
    assert QUOTE_CONTRACT.problems({"text": "\u201cA.\u201d", "author": "A", "author_url": None, "tags": ()}) == []


def test_an_author_needs_name_birth_date_and_place_and_may_lack_a_description() -> None:
    assert AUTHOR_CONTRACT.required == ("name", "birth_date", "birth_place")
    problems = AUTHOR_CONTRACT.problems({"name": "A", "birth_date": None, "birth_place": "", "description": None})
    assert [p.line() for p in problems] == ["birth_date", "birth_place"]
