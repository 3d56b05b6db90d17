"""The fields' judgement reads its figures from one count of each value: they are what the plain definitions give
(each group's pages and filled, the most common value and the first of equals in text order, percentile_disc's
median length), per category and in the whole crawl, with held values counted as the pages showed them."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

from book_assets.db.connection import Database
from book_assets.sql import load_queries

#: The judgement's statement: what each book page showed (``shown``), then its figures from one count of each value.
COVERAGE = load_queries("drift")["stored_coverage"]
#: The figures by their definitions over the same ``shown``: a sort of every value by its text, which the
#: judgement does not run.
REFERENCE = (
    COVERAGE[: COVERAGE.index("counted AS (")]
    + """
measured AS (
    SELECT GROUPING(category) = 1 AS whole, coalesce(category, '') AS category, field, count(*)::int AS pages,
           count(value)::int AS filled,
           (percentile_disc(0.5) WITHIN GROUP (ORDER BY length(value)))::int AS median_length
    FROM shown GROUP BY GROUPING SETS ((category, field), (field))
),
tops AS (
    SELECT DISTINCT ON (whole, category, field) whole, category, field, value AS top_value, n AS top_count
    FROM (
        SELECT GROUPING(category) = 1 AS whole, coalesce(category, '') AS category, field, value, count(*)::int AS n
        FROM shown WHERE value IS NOT NULL GROUP BY GROUPING SETS ((category, field, value), (field, value))
    ) counted
    ORDER BY whole, category, field, n DESC, value
)
SELECT m.whole, m.category, m.field, m.pages, m.filled, coalesce(t.top_count, 0) AS top_count,
       left(t.top_value, 80) AS top_value, m.median_length
FROM measured m LEFT JOIN tops t USING (whole, category, field)
"""
)


WORDS = ["Poetry", "Travel", "Mystery", "Zebra", "apple", "Ångström", "éclair", "a b", "", "Z"]


def _text(rng: random.Random, pool: list[str], suffix: str = "", *, p_none: float = 0.1) -> str | None:
    return None if rng.random() < p_none else rng.choice(pool) + suffix


def _number(rng: random.Random, *choices: float) -> float | None:
    return None if rng.random() < 0.1 else rng.choice(choices)


def _book(rng: random.Random, n: int, fetched_at: datetime) -> dict[str, Any]:
    """Values repeated and unique, missing, long and short, with ties."""
    words = rng.randint(0, 40)
    return {
        "url": f"http://example.test/b{n}",
        "title": _text(rng, WORDS, f" {n}" if rng.random() < 0.7 else ""),
        "category": rng.choice(["Travel", "Poetry", "Mystery", "Art", None]),
        "product_type": _text(rng, ["Books", "Ebook"]),
        "availability": _text(rng, ["In stock", "Out of stock", "In stock (3 available)"]),
        "upc": _text(rng, ["a897fe39b1053632", "90fa61229261140a"], f"{n}"),
        "description": None if rng.random() < 0.2 else " ".join(rng.choice(WORDS) for _ in range(words)),
        "price": _number(rng, 9.99, 10.0, 51.77, round(rng.uniform(1, 60), 2)),
        "tax": _number(rng, 0, 0, 1.5),
        "rating": _number(rng, 1, 2, 3, 4, 5),
        "stock": _number(rng, 0, 0, 3, rng.randint(0, 30)),
        "reviews": _number(rng, 0, 1),
        "fetched_at": fetched_at,
    }


def _books(db: Database, rng: random.Random, start: datetime) -> None:
    """600 books over four categories and none, some of whose values the running crawl holds."""
    books = [_book(rng, n, start + timedelta(seconds=n)) for n in range(600)]
    with db.transaction() as cur:
        cur.executemany(
            "INSERT INTO books (url, title, category, product_type, availability, upc, description, price_amount,"
            " price_excl_tax, price_incl_tax, tax, rating_value, stock, num_reviews, fetched_at)"
            " VALUES (%(url)s, %(title)s, %(category)s, %(product_type)s, %(availability)s, %(upc)s,"
            " %(description)s, %(price)s, %(price)s, %(price)s, %(tax)s, %(rating)s, %(stock)s, %(reviews)s,"
            " %(fetched_at)s)",
            books,
        )
        cur.execute("INSERT INTO crawls (site) VALUES ('books') RETURNING id")
        [crawl] = cur.fetchall()
        crawl_id = crawl["id"]
        # A held value counts as the one the page showed; a held loss (a NULL) as none.
        cur.execute(
            "INSERT INTO held_losses (book_id, field, crawl_id, value)"
            " SELECT id, 'description', %s, jsonb_build_object('description', 'Held ' || mod(id, 3)) FROM books"
            " WHERE mod(id, 7) = 0",
            (crawl_id,),
        )
        cur.execute(
            "INSERT INTO held_losses (book_id, field, crawl_id, value)"
            " SELECT id, 'rating_value', %s, jsonb_build_object('rating_value', NULL) FROM books WHERE mod(id, 11) = 0",
            (crawl_id,),
        )


def test_the_judgements_figures_are_those_of_their_definitions_per_category_and_crawl(db: Database) -> None:
    start = datetime(2026, 12, 1, tzinfo=UTC)
    _books(db, random.Random(48), start)
    windows = [(start, None), (start + timedelta(seconds=100), start + timedelta(seconds=400))]
    for since, until in windows:
        params = {"since": since, "until": until}
        got = sorted((tuple(row.values()) for row in db.query(COVERAGE, params)), key=repr)
        want = sorted((tuple(row.values()) for row in db.query(REFERENCE, params)), key=repr)
        assert len(want) == 6 * 13  # four categories and none, and the whole crawl
        assert got == want
        # Groups whose every value is shown once (UPCs): their top value is the first of equals.
        assert any(row[2] == "upc" and row[5] == 1 and row[4] > 1 for row in want)
