"""The category-balanced snapshot on a real PostgreSQL: quotas, shares, days as of book_versions, table, files."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from book_assets.db.connection import Database
from book_assets.publish.snapshot import build_snapshot, summary_markdown, write_snapshot
from book_assets.scheduling.weights import parse_weights

T0 = datetime(2026, 1, 1, 8, tzinfo=UTC)
DAY0 = T0.date()
DAY1 = DAY0 + timedelta(days=1)


def slug(category: str) -> str:
    return category.lower().replace(" ", "-")


def insert_books(db: Database, category: str, n: int, *, start: int = 0, at: datetime = T0) -> None:
    """``n`` books of ``category``, each with its version 1; book i was recorded i minutes after ``at``."""

    def _insert(cur) -> None:  # type: ignore[no-untyped-def]
        for i in range(start, start + n):
            url = f"https://books.toscrape.com/catalogue/{slug(category)}-{i}/index.html"
            fields = {
                "title": f"{category} book {i}",
                "category": category,
                "price_amount": f"{10 + i}.50",
                "rating_value": (i % 5) + 1,
                "stock": i % 7,
            }
            recorded = at + timedelta(minutes=i)
            cur.execute(
                "INSERT INTO books (url, title, category, price_amount, rating_value, stock, scraped_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (url, fields["title"], category, fields["price_amount"], fields["rating_value"], i % 7, recorded),
            )
            book_id = cur.fetchone()["id"]
            cur.execute(
                "INSERT INTO book_versions (book_id, version, url, fields, recorded_at) VALUES (%s, 1, %s, %s, %s)",
                (book_id, url, json.dumps(fields), recorded),
            )

    db.run(_insert)


def change_price(db: Database, url: str, price: str, at: datetime) -> None:
    """Record a new version of the book at ``url`` with ``price``, as a re-crawl at ``at`` would."""

    def _change(cur) -> None:  # type: ignore[no-untyped-def]
        cur.execute(
            "SELECT book_id, version, fields FROM book_versions WHERE url = %s ORDER BY version DESC LIMIT 1", (url,)
        )
        row = cur.fetchone()
        fields = {**row["fields"], "price_amount": price}
        cur.execute(
            "INSERT INTO book_versions (book_id, version, url, fields, changed, recorded_at)"
            " VALUES (%s, %s, %s, %s, '{price_amount}', %s)",
            (row["book_id"], row["version"] + 1, url, json.dumps(fields), at),
        )
        cur.execute(
            "UPDATE books SET price_amount = %s, version = version + 1, scraped_at = %s WHERE url = %s",
            (price, at, url),
        )

    db.run(_change)


@pytest.fixture
def stocked(db: Database) -> Database:
    insert_books(db, "Travel", 11)
    insert_books(db, "Mystery", 32)
    insert_books(db, "Sequential Art", 75)
    insert_books(db, "Crime", 1)
    return db


def test_snapshot_gives_each_category_its_quota_capped_by_what_is_stored(stocked: Database) -> None:
    weights = parse_weights("Travel=3,Mystery=2,sequential-art=0,*=1")
    snapshot = build_snapshot(stocked, weights, 20, DAY0)
    counts = snapshot.frame["category"].value_counts().to_dict()
    # 20 over 3:2:1 (Crime has 1): Crime capped at 1, 19 over 3:2 -> 11.4 / 7.6 -> Travel capped at 11, Mystery 8
    assert snapshot.quotas == {"Crime": 1, "Mystery": 8, "Sequential Art": 0, "Travel": 11}
    assert counts == {"Travel": 11, "Mystery": 8, "Crime": 1}
    summary = snapshot.summary.set_index("category")
    assert summary.loc["Travel", "weight_share"] == pytest.approx(3 / 6)
    assert summary.loc["Travel", "target_share"] == pytest.approx(11 / 20)  # the capped, redistributed quota
    assert summary.loc["Mystery", "actual_share"] == pytest.approx(8 / 20)
    assert summary.loc["Sequential Art", "count"] == 0
    assert summary.loc["Crime", "available"] == 1


def test_snapshot_takes_the_most_recently_recorded_books_of_a_category(stocked: Database) -> None:
    snapshot = build_snapshot(stocked, parse_weights("Mystery=1,*=0"), 3, DAY0)
    assert list(snapshot.frame["title"]) == ["Mystery book 31", "Mystery book 30", "Mystery book 29"]


def test_snapshot_frame_has_typed_columns(stocked: Database) -> None:
    frame = build_snapshot(stocked, parse_weights("*=1"), 10, DAY0).frame
    assert list(frame.columns) == ["url", "title", "category", "price", "rating", "stock", "scraped_at"]
    assert frame["price"].dtype == "float64"
    assert str(frame["scraped_at"].dt.tz) == "UTC"
    crime = frame[frame["category"] == "Crime"].iloc[0]
    assert (crime["price"], crime["rating"], crime["stock"]) == (10.5, 1, 0)
    assert crime["scraped_at"] == pd.Timestamp(T0)


def test_a_days_snapshot_holds_the_books_as_they_stood_at_the_end_of_that_day(db: Database) -> None:
    insert_books(db, "Travel", 3)
    travel_0 = "https://books.toscrape.com/catalogue/travel-0/index.html"
    change_price(db, travel_0, "99.00", T0 + timedelta(days=1))  # a re-crawl on the next day
    insert_books(db, "Poetry", 2, at=T0 + timedelta(days=1))  # first seen on the next day
    weights = parse_weights("*=1")

    before = build_snapshot(db, weights, 10, DAY0)
    assert sorted(before.frame["category"]) == ["Travel"] * 3
    assert before.frame.set_index("url").loc[travel_0, "price"] == 10.5
    assert before.available == {"Travel": 3}

    after = build_snapshot(db, weights, 10, DAY1)
    assert sorted(after.frame["category"]) == ["Poetry"] * 2 + ["Travel"] * 3
    assert after.frame.set_index("url").loc[travel_0, "price"] == 99.0
    # The day before the first version has no books at all.
    assert build_snapshot(db, weights, 10, DAY0 - timedelta(days=1)).frame.empty


def test_write_snapshot_publishes_table_parquet_and_chart(stocked: Database, tmp_path: Path) -> None:
    snapshot = build_snapshot(stocked, parse_weights("*=1"), 12, DAY0)
    artifacts = write_snapshot(stocked, snapshot, tmp_path)

    table = stocked.query(
        "SELECT snapshot_day, url, category, price::float8 AS price FROM category_balanced_snapshot ORDER BY url"
    )
    assert [r["url"] for r in table] == sorted(snapshot.frame["url"])
    assert {r["snapshot_day"] for r in table} == {DAY0}
    parquet = pd.read_parquet(artifacts.parquet_path)
    assert artifacts.parquet_path == tmp_path / "snapshots" / "2026-01-01" / "category_balanced_snapshot.parquet"
    pd.testing.assert_frame_equal(
        parquet.astype({"url": "string", "title": "string", "category": "string"}).reset_index(drop=True),
        snapshot.frame.reset_index(drop=True),
        check_dtype=False,
    )
    assert artifacts.chart_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert artifacts.rows == 12 and artifacts.table == "category_balanced_snapshot"
    assert len(pd.read_csv(artifacts.summary_path)) == 4


def test_rewriting_a_day_replaces_that_days_rows_and_keeps_the_others(stocked: Database, tmp_path: Path) -> None:
    write_snapshot(stocked, build_snapshot(stocked, parse_weights("Travel=1,*=0"), 5, DAY0), tmp_path)
    write_snapshot(stocked, build_snapshot(stocked, parse_weights("Crime=1,*=0"), 1, DAY1), tmp_path)
    write_snapshot(stocked, build_snapshot(stocked, parse_weights("Mystery=1,*=0"), 3, DAY0), tmp_path)
    rows = stocked.query(
        "SELECT snapshot_day, category, count(*)::int AS n FROM category_balanced_snapshot GROUP BY 1, 2 ORDER BY 1"
    )
    assert rows == [
        {"snapshot_day": DAY0, "category": "Mystery", "n": 3},
        {"snapshot_day": DAY1, "category": "Crime", "n": 1},
    ]
    assert (tmp_path / "snapshots" / "2026-01-02" / "category_balanced_snapshot.parquet").is_file()


def test_empty_database_gives_an_empty_snapshot(db: Database, tmp_path: Path) -> None:
    snapshot = build_snapshot(db, parse_weights("*=1"), 10, date(2026, 3, 1))
    assert snapshot.frame.empty and snapshot.summary.empty
    artifacts = write_snapshot(db, snapshot, tmp_path)
    assert artifacts.rows == 0 and artifacts.chart_path.exists()


def test_summary_markdown_has_one_row_per_category(stocked: Database) -> None:
    text = summary_markdown(build_snapshot(stocked, parse_weights("Travel=3,*=1"), 20, DAY0).summary)
    lines = text.splitlines()
    assert lines[0].startswith("| category |") and len(lines) == 2 + 4
    assert lines[2].startswith("| Travel | 3 | 11 |")
