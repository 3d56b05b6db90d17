"""``export``, ``changes`` and ``reextract`` with ``--site quotes``, run as a user runs them (subprocesses) on a
database a real crawl of the quotes stand-in filled (http mode: every quote and author, ``/js/`` failed)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets.sandbox.quotes import truth
from book_assets.sandbox.quotes.server import QuotesServer
from book_assets_tests.conftest import child_env
from book_assets_tests.sites.quotes.crawling import quotes_config


@pytest.fixture
def crawled(db: Database, database_url: str, quotes_site: QuotesServer) -> Database:
    """The test database after one http crawl of the stand-in."""
    report = crawl(database_url, quotes_config(quotes_site))
    assert report.counts["total"] == len(truth.authors()), "\n".join(report.summary_lines())
    return db


def _cli(database_url: str, cwd: Path, *args: str, status: int = 0) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "book_assets.cli", *args],
        env=child_env(DATABASE_URL=database_url),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == status, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc


def test_export_site_quotes_writes_every_crawled_quote_and_author_into_two_files(
    crawled: Database, database_url: str, tmp_path: Path
) -> None:
    out = _cli(database_url, tmp_path, "export", "--site", "quotes", "--format", "csv", "--into", str(tmp_path)).stdout
    assert out.splitlines() == [
        f"wrote {len(truth.quotes())} quotes to {tmp_path / 'quotes.csv'}",
        f"wrote {len(truth.authors())} authors to {tmp_path / 'authors.csv'}",
    ]
    with (tmp_path / "quotes.csv").open(encoding="utf-8", newline="") as fh:
        texts = {row["text"] for row in csv.DictReader(fh)}
    assert texts == {quote.text for quote in truth.quotes()}
    with (tmp_path / "authors.csv").open(encoding="utf-8", newline="") as fh:
        authors = list(csv.DictReader(fh))
    assert {a["name"] for a in authors} == {a.name for a in truth.authors().values()} and "raw_html" not in authors[0]
    refused = _cli(database_url, tmp_path, "export", "--site", "quotes", "--output", str(tmp_path / "x"), status=2)
    assert "site quotes exports 2 (quotes, authors): use --into" in refused.stderr


def test_changes_site_quotes_lists_todays_new_quotes_and_authors(
    crawled: Database, database_url: str, tmp_path: Path
) -> None:
    proc = _cli(database_url, tmp_path, "changes", "--site", "quotes")
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    by_record = {record: [r for r in rows if r["record"] == record] for record in ("quote", "author")}
    assert len(by_record["quote"]) == len(truth.quotes()) and len(by_record["author"]) == len(truth.authors())
    assert {(r["change"], r["version"]) for r in rows} == {("new", 1)}
    assert proc.stderr == ""


def test_reextract_site_quotes_repairs_an_authors_corrupted_field_from_its_stored_page(
    crawled: Database, database_url: str, tmp_path: Path
) -> None:
    corrupt = "UPDATE authors SET name = 'corrupted' WHERE id = (SELECT min(id) FROM authors) RETURNING id"
    assert len(crawled.query(corrupt)) == 1
    out = _cli(database_url, tmp_path, "reextract", "--site", "quotes").stdout
    assert out.startswith(f"re-extracted {len(truth.authors())} authors: 1 changed, 0 unparseable"), out
    names = {row["name"] for row in crawled.query("SELECT name FROM authors")}
    assert names == {a.name for a in truth.authors().values()}
    assert crawled.query("SELECT count(*) AS n FROM author_versions")[0]["n"] == len(truth.authors())
