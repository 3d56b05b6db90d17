"""What quotes.toscrape.com publishes (:mod:`book_assets.sites.quotes.publishing`), against a database filled by the
quotes' own store functions: the export of both tables, a day's feed as the timestamps prove it, the authors
re-extracted from their stored pages, the snapshot balanced by first tag."""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pandas as pd

from book_assets.db.connection import Database
from book_assets.publish.export import export_tables
from book_assets.publish.snapshot import build_snapshot
from book_assets.scheduling.quotas import split_budget
from book_assets.scheduling.weights import parse_weights
from book_assets.scraper.fetching import FetchResult, build_result
from book_assets.sites.quotes.definition import QUOTES
from book_assets.sites.quotes.parsers import parse_author, parse_quotes_page
from book_assets.sites.quotes.publishing import FEED_COLUMNS, QuotesPublishing
from book_assets.sites.quotes.store import write_author, write_quotes
from book_assets_tests.sites.quotes.pages import EINSTEIN, SITE, fixture

T0 = datetime(2026, 12, 4, 5, 0, tzinfo=UTC)
PUBLISHING = QUOTES.publishing
assert isinstance(PUBLISHING, QuotesPublishing)


def _fetch(url: str, html: str) -> FetchResult:
    return build_result(
        url=url,
        final_url=url,
        status=200,
        headers={"content-type": "text/html; charset=utf-8"},
        body=html.encode("utf-8"),
        fetched_at=T0,
        elapsed_s=0.0,
    )


def _sql(db: Database, statement: str, params: tuple[object, ...] | None = None) -> None:
    db.run(lambda cur: cur.execute(statement, params))


def _store_index_and_einstein(db: Database) -> None:
    html = fixture("index.html")
    db.run(lambda cur: write_quotes(cur, parse_quotes_page(html, SITE), _fetch(SITE, html)))
    page = fixture("author-albert-einstein.html")
    db.run(lambda cur: write_author(cur, parse_author(page, EINSTEIN), _fetch(EINSTEIN, page)))


def test_the_export_writes_every_quote_and_author_in_each_format_the_html_only_when_asked(
    db: Database, tmp_path: Path
) -> None:
    _store_index_and_einstein(db)
    plain = export_tables(PUBLISHING.export_tables(db, with_html=False), "jsonl", tmp_path)
    assert [(path.name, n) for path, n in plain] == [("quotes.jsonl", 10), ("authors.jsonl", 1)]
    quotes = [json.loads(line) for line in (tmp_path / "quotes.jsonl").read_text(encoding="utf-8").splitlines()]
    first = parse_quotes_page(fixture("index.html"), SITE).quotes[0]
    assert (quotes[0]["text"], quotes[0]["author"], quotes[0]["tags"]) == (first.text, first.author, list(first.tags))
    author = json.loads((tmp_path / "authors.jsonl").read_text(encoding="utf-8"))
    assert (author["name"], author["birth_date"], author["url"]) == ("Albert Einstein", "1879-03-14", EINSTEIN)
    assert "raw_html" not in author
    export_tables(PUBLISHING.export_tables(db, with_html=True), "csv", tmp_path)
    with (tmp_path / "authors.csv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert rows[0]["raw_html"] == fixture("author-albert-einstein.html")
    with (tmp_path / "quotes.csv").open(encoding="utf-8", newline="") as fh:
        assert next(csv.DictReader(fh))["tags"] == ";".join(first.tags)
    export_tables(PUBLISHING.export_tables(db, with_html=False), "parquet", tmp_path)
    frame = pd.read_parquet(tmp_path / "quotes.parquet")
    assert len(frame) == 10 and list(frame["tags"].iloc[0]) == list(first.tags)
    assert list(pd.read_parquet(tmp_path / "authors.parquet")["name"]) == ["Albert Einstein"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"{t}.{f}" for t in ("quotes", "authors") for f in ("jsonl", "csv", "parquet")
    )  # no temporary file left beside them


def test_a_days_feed_compares_its_start_with_its_end_from_the_versions(db: Database) -> None:
    _store_index_and_einstein(db)
    today = datetime.now(UTC).date()
    yesterday = today - timedelta(days=1)
    _sql(db, "UPDATE quote_versions SET recorded_at = recorded_at - interval '1 day' WHERE true")
    html = fixture("index.html")
    page = parse_quotes_page(html, SITE)
    first = page.quotes[0]
    retagged = replace(first, tags=("x",))
    db.run(lambda cur: write_quotes(cur, replace(page, quotes=(retagged,)), _fetch(SITE, html)))
    feed = PUBLISHING.changes_of_day(db, today)
    assert feed.columns == FEED_COLUMNS
    assert [(r["change"], r["record"], r["version"]) for r in feed.rows] == [
        ("new", "author", 1),
        ("changed", "quote", 2),
    ]
    changed = feed.rows[1]
    assert (changed["text"], changed["tags"], changed["fields"], changed["day"]) == (
        retagged.text,
        ["x"],
        ["tags"],
        today,
    )
    earlier = PUBLISHING.changes_of_day(db, yesterday)
    assert [(r["change"], r["record"]) for r in earlier.rows] == [("new", "quote")] * 10
    assert earlier.rows[0]["tags"] == list(first.tags)  # as the day ended, not as now
    assert PUBLISHING.changes_of_day(db, yesterday - timedelta(days=1)).rows == []


def test_a_record_changed_and_changed_back_within_a_day_is_not_in_its_feed(db: Database) -> None:
    _store_index_and_einstein(db)
    _sql(db, "UPDATE quote_versions SET recorded_at = recorded_at - interval '1 day' WHERE true")
    html = fixture("index.html")
    page = parse_quotes_page(html, SITE)
    db.run(
        lambda cur: write_quotes(cur, replace(page, quotes=(replace(page.quotes[0], tags=("x",)),)), _fetch(SITE, html))
    )
    db.run(lambda cur: write_quotes(cur, replace(page, quotes=(page.quotes[0],)), _fetch(SITE, html)))
    versions = db.query("SELECT version FROM quote_versions WHERE quote_id = (SELECT min(id) FROM quotes)")
    assert [v["version"] for v in versions] == [1, 2, 3]
    rows = PUBLISHING.changes_of_day(db, datetime.now(UTC).date()).rows
    assert [(r["change"], r["record"]) for r in rows] == [("new", "author")]


def test_reextract_repairs_an_author_field_corrupted_in_the_table_from_its_stored_page(db: Database) -> None:
    _store_index_and_einstein(db)
    _sql(db, "UPDATE authors SET birth_place = 'nowhere', updated_at = now() - interval '2 days'")
    report = PUBLISHING.reextract(db)
    assert (report.scanned, report.changed, report.unparseable) == (1, 1, 0), report.line()
    assert report.line().startswith("re-extracted 1 authors: 1 changed, 0 unparseable")
    row = db.query("SELECT birth_place, updated_at > now() - interval '1 hour' AS moved FROM authors")[0]
    assert (row["birth_place"], row["moved"]) == ("in Ulm, Germany", True)
    versions = db.query("SELECT version, birth_place FROM author_versions ORDER BY version")
    assert [(v["version"], v["birth_place"]) for v in versions] == [(1, "in Ulm, Germany")]  # 'nowhere' was no version
    again = PUBLISHING.reextract(db)
    assert (again.scanned, again.changed) == (1, 0)


def test_reextract_reports_an_author_page_the_parser_refuses_and_leaves_its_row(db: Database) -> None:
    _store_index_and_einstein(db)
    _sql(db, "UPDATE authors SET raw_html = %s", (fixture("not-found.html"),))
    report = PUBLISHING.reextract(db)
    assert (report.scanned, report.changed, report.unparseable) == (1, 0, 1)
    assert report.refused == {"not_a_detail_page": 1} and report.errors[0].startswith(EINSTEIN)
    assert db.query("SELECT name FROM authors")[0]["name"] == "Albert Einstein"


def insert_quote(db: Database, text: str, tags: list[str], first_seen_at: datetime) -> None:
    """A stored quote with its first version, seen at a given time (as the store writes them, with the time set)."""
    _sql(
        db,
        "WITH q AS (INSERT INTO quotes (text, author, tags, page_url, first_seen_at, updated_at)"
        " VALUES (%s, 'A', %s, %s, %s, %s) RETURNING id, tags, first_seen_at)"
        " INSERT INTO quote_versions (quote_id, version, tags, recorded_at) SELECT id, 1, tags, first_seen_at FROM q",
        (text, tags, SITE, first_seen_at, first_seen_at),
    )


def fill_tags(db: Database, day: date) -> None:
    """Quotes first seen on ``day``: 20 tagged love first, 10 life, 5 humor, 2 untagged; 5 more love the day after."""
    noon = datetime.combine(day, datetime.min.time(), tzinfo=UTC) + timedelta(hours=12)
    for tag, n in (("love", 20), ("life", 10), ("humor", 5)):
        for i in range(n):
            insert_quote(db, f"{tag} {i}", [tag, "other"], noon + timedelta(minutes=i))
    for i in range(2):
        insert_quote(db, f"untagged {i}", [], noon)
    for i in range(5):
        insert_quote(db, f"late love {i}", ["love"], noon + timedelta(days=1))


def test_the_snapshot_gives_each_first_tag_its_weighted_quota_of_the_quotes_first_seen_by_the_days_end(
    db: Database,
) -> None:
    day = date(2026, 3, 1)
    fill_tags(db, day)
    weights = parse_weights("love=1,life=2,humor=1")
    snapshot = build_snapshot(db, weights, 16, day, PUBLISHING.snapshot)
    assert snapshot.available == {"humor": 5, "life": 10, "love": 20}  # the untagged and the next day's left out
    assert snapshot.quotas == split_budget(16, weights, snapshot.available) == {"humor": 4, "life": 8, "love": 4}
    counts = snapshot.frame["category"].value_counts().to_dict()
    assert counts == {"life": 8, "love": 4, "humor": 4}
    loves = snapshot.frame[snapshot.frame["category"] == "love"]["text"].tolist()
    assert loves == ["love 19", "love 18", "love 17", "love 16"]  # the latest first seen first
    summary = snapshot.summary.set_index("category")
    assert summary.loc["life", "target_share"] == 0.5 and summary.loc["life", "actual_share"] == 0.5
    assert summary["mean_price"].isna().all()  # quotes have no price
    later = build_snapshot(db, weights, 16, day + timedelta(days=1), PUBLISHING.snapshot)
    assert later.available["love"] == 25


def test_a_quote_retagged_after_a_day_is_sampled_in_the_tag_it_had_that_day(db: Database) -> None:
    day = date(2026, 3, 1)
    fill_tags(db, day)
    moved = "INSERT INTO quote_versions (quote_id, version, tags, recorded_at) SELECT id, 2, '{humor}', %s FROM quotes"
    _sql(db, moved + " WHERE text LIKE 'life %%'", (datetime(2026, 3, 2, 8, tzinfo=UTC),))
    weights = parse_weights("*=1")
    assert build_snapshot(db, weights, 100, day, PUBLISHING.snapshot).available["life"] == 10
    after = build_snapshot(db, weights, 100, day + timedelta(days=1), PUBLISHING.snapshot)
    assert "life" not in after.available and after.available["humor"] == 15
