"""The category-balanced snapshot on a real PostgreSQL: quotas, shares, table, Parquet and chart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from book_assets.db.connection import Database
from book_assets.scheduling.snapshot import build_snapshot, summary_markdown, write_snapshot
from book_assets.scheduling.weights import parse_weights

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def insert_books(db: Database, category: str, n: int, *, start: int = 0) -> None:
    """``n`` books of ``category``; book i was scraped i minutes after T0 (so higher i is more recent)."""
    rows = [
        (
            f"https://books.toscrape.com/catalogue/{category.lower().replace(' ', '-')}-{i}/index.html",
            f"{category} book {i}",
            category,
            f"{10 + i}.50",
            (i % 5) + 1,
            i % 7,
            T0 + timedelta(minutes=i),
        )
        for i in range(start, start + n)
    ]
    db.run(
        lambda cur: cur.executemany(
            "INSERT INTO books (url, title, category, price_amount, rating_value, stock, scraped_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s)",
            rows,
        )
    )


@pytest.fixture
def stocked(db: Database) -> Database:
    insert_books(db, "Travel", 11)
    insert_books(db, "Mystery", 32)
    insert_books(db, "Sequential Art", 75)
    insert_books(db, "Crime", 1)
    return db


def test_snapshot_gives_each_category_its_quota_capped_by_what_is_stored(stocked: Database) -> None:
    weights = parse_weights("Travel=3,Mystery=2,sequential-art=0,*=1")
    snapshot = build_snapshot(stocked, weights, 20)
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


def test_snapshot_takes_the_most_recently_scraped_books_of_a_category(stocked: Database) -> None:
    snapshot = build_snapshot(stocked, parse_weights("Mystery=1,*=0"), 3)
    assert list(snapshot.frame["title"]) == ["Mystery book 31", "Mystery book 30", "Mystery book 29"]


def test_snapshot_frame_has_typed_columns(stocked: Database) -> None:
    frame = build_snapshot(stocked, parse_weights("*=1"), 10).frame
    assert list(frame.columns) == ["url", "title", "category", "price", "rating", "stock", "scraped_at"]
    assert frame["price"].dtype == "float64"
    assert str(frame["scraped_at"].dt.tz) == "UTC"
    crime = frame[frame["category"] == "Crime"].iloc[0]
    assert (crime["price"], crime["rating"], crime["stock"]) == (10.5, 1, 0)


def test_write_snapshot_publishes_table_parquet_and_chart(stocked: Database, tmp_path: Path) -> None:
    snapshot = build_snapshot(stocked, parse_weights("*=1"), 12)
    artifacts = write_snapshot(stocked, snapshot, tmp_path)

    table = stocked.query("SELECT url, category, price::float8 AS price FROM category_balanced_snapshot ORDER BY url")
    assert [r["url"] for r in table] == sorted(snapshot.frame["url"])
    parquet = pd.read_parquet(artifacts.parquet_path)
    assert artifacts.parquet_path == tmp_path / "snapshots" / "category_balanced_snapshot.parquet"
    pd.testing.assert_frame_equal(
        parquet.astype({"url": "string", "title": "string", "category": "string"}).reset_index(drop=True),
        snapshot.frame.reset_index(drop=True),
        check_dtype=False,
    )
    assert artifacts.chart_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert artifacts.rows == 12 and artifacts.table == "category_balanced_snapshot"
    assert len(pd.read_csv(artifacts.summary_path)) == 4


def test_second_write_replaces_the_table_contents(stocked: Database, tmp_path: Path) -> None:
    write_snapshot(stocked, build_snapshot(stocked, parse_weights("Travel=1,*=0"), 5), tmp_path)
    write_snapshot(stocked, build_snapshot(stocked, parse_weights("Mystery=1,*=0"), 3), tmp_path)
    rows = stocked.query("SELECT category, count(*)::int AS n FROM category_balanced_snapshot GROUP BY category")
    assert rows == [{"category": "Mystery", "n": 3}]


def test_empty_database_gives_an_empty_snapshot(db: Database, tmp_path: Path) -> None:
    snapshot = build_snapshot(db, parse_weights("*=1"), 10)
    assert snapshot.frame.empty and snapshot.summary.empty
    artifacts = write_snapshot(db, snapshot, tmp_path)
    assert artifacts.rows == 0 and artifacts.chart_path.exists()


def test_summary_markdown_has_one_row_per_category(stocked: Database) -> None:
    text = summary_markdown(build_snapshot(stocked, parse_weights("Travel=3,*=1"), 20).summary)
    lines = text.splitlines()
    assert lines[0].startswith("| category |") and len(lines) == 2 + 4
    assert lines[2].startswith("| Travel | 3 | 11 |")
