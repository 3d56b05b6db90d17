"""The sandbox's ground truth against what a crawl stored: every difference as a readable line."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from book_assets.sandbox.catalogue import Book, Catalogue


def stored_vs_truth(rows: list[dict[str, Any]], truth: dict[str, Book], base_url: str) -> list[str]:
    """Every difference between stored rows and the sandbox's ground truth, as readable lines."""
    problems: list[str] = []
    by_url = {r["url"]: r for r in rows}
    expected_urls = {base_url.rstrip("/") + "/" + path.lstrip("/") for path in truth}
    for missing in sorted(expected_urls - set(by_url))[:10]:
        problems.append(f"missing {missing}")
    for extra in sorted(set(by_url) - expected_urls)[:10]:
        problems.append(f"unexpected {extra}")
    for path, book in truth.items():
        row = by_url.get(base_url.rstrip("/") + "/" + path.lstrip("/"))
        if row is None:
            continue
        expected = {
            "title": book.title,
            "category": book.category,
            "price_amount": book.price,
            "price_excl_tax": book.price_excl_tax,
            "price_incl_tax": book.price_incl_tax,
            "tax": book.tax,
            "rating_value": book.rating,
            "upc": book.upc,
            "product_type": book.product_type,
            "availability": book.availability,
            "stock": book.stock,
            "num_reviews": book.num_reviews,
            "description": book.description,
            "price": f"£{book.price:.2f}",
        }
        for key, value in expected.items():
            got = row[key]
            if isinstance(value, Decimal):
                got = Decimal(str(got)) if got is not None else None
            if got != value:
                problems.append(f"{path} {key}: stored {got!r}, served {value!r}")
    return problems


@dataclass(frozen=True)
class DayChanges:
    """What the sandbox changed on one simulated day, against the day before (book ids)."""

    day: int
    added: frozenset[int]
    changed: frozenset[int]
    removed: frozenset[int]


def changes_by_day(seed: int, last_day: int) -> list[DayChanges]:
    """The changes of days 1..``last_day``: a crawl of every day stores one new version per added or changed
    book and marks each removed book once."""
    days: list[DayChanges] = []
    before = {book.id: book for book in Catalogue(seed=seed, day=0)}
    for day in range(1, last_day + 1):
        today = {book.id: book for book in Catalogue(seed=seed, day=day)}
        days.append(
            DayChanges(
                day=day,
                added=frozenset(today.keys() - before.keys()),
                changed=frozenset(
                    i for i in today.keys() & before.keys() if today[i].to_record() != before[i].to_record()
                ),
                removed=frozenset(before.keys() - today.keys()),
            )
        )
        before = today
    return days
