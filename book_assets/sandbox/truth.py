"""The sandbox's ground truth against what a crawl stored: every difference as a readable line.

The truth is the catalogue's data (``Catalogue.ground_truth()``), whatever markup it is served in: a
redesign renames and moves markup without changing a value. Where a redesign stops showing a field
(``description_dropped``), the site still has the value but the page does not carry it;
``absent_on_pages`` names those fields per page, and ``stored_vs_truth`` then accepts either the value
(kept from a good day) or nothing (stored as absent), and still flags anything else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from book_assets.sandbox.catalogue import Book, Catalogue
from book_assets.sandbox.redesign import Redesign, markup_on


def absent_on_pages(catalogue: Catalogue, redesign: Redesign | None) -> dict[str, frozenset[str]]:
    """The fields (stored-row names) each book page of ``catalogue``'s day lacks though the book has them,
    keyed by URL path; pages that show every field they have are left out (so: empty without a redesign)."""
    markup = markup_on(redesign, catalogue)
    return {
        book.url_path: frozenset({"description"})
        for book in catalogue
        if book.description is not None and not markup.shows_description(book)
    }


def stored_vs_truth(
    rows: list[dict[str, Any]],
    truth: dict[str, Book],
    base_url: str,
    absent: Mapping[str, frozenset[str]] | None = None,
) -> list[str]:
    """Every difference between stored rows and the sandbox's ground truth, as readable lines.

    ``absent`` (from ``absent_on_pages``) names fields a page did not show: for those, the truth's value and
    ``None`` are both accepted.
    """
    absent = absent or {}
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
        not_shown = absent.get(path, frozenset())
        for key, value in expected.items():
            got = row[key]
            if isinstance(value, Decimal):
                got = Decimal(str(got)) if got is not None else None
            if got != value and not (key in not_shown and got is None):
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
