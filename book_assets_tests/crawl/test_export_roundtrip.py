"""Exports round-trip: every stored field of every book comes back from JSON Lines, CSV and Parquet."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets.publish.export import export_books
from book_assets.sql import load_queries
from book_assets_tests.conftest import child_env
from book_assets_tests.crawl.conftest import sandbox_config

PRICES = ("price", "price_excl_tax", "price_incl_tax", "tax")


def _text(value: Any) -> str:
    """One spelling per value for comparison: None is empty, numbers and times as their text."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    return str(value)


@pytest.fixture
def stored(db: Database, database_url: str, sandbox: Any) -> list[dict[str, Any]]:
    crawl(database_url, sandbox_config(sandbox.url, mode="http", categories=("Travel", "Poetry")))
    rows = db.query(load_queries("books")["export_books"], {"with_html": True})
    assert len(rows) == 11 + 19
    return rows


def test_jsonl_export_round_trips_every_field_exactly(
    db: Database, stored: list[dict[str, Any]], tmp_path: Path
) -> None:
    out = tmp_path / "books.jsonl"
    assert export_books(db, "jsonl", out, with_html=True) == len(stored)
    back = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [{k: _text(v) for k, v in r.items()} for r in back] == [{k: _text(v) for k, v in r.items()} for r in stored]
    assert all("£" in r["raw_html"] and "Â£" not in r["raw_html"] for r in back)


def test_csv_export_round_trips_every_field(db: Database, stored: list[dict[str, Any]], tmp_path: Path) -> None:
    out = tmp_path / "books.csv"
    assert export_books(db, "csv", out, with_html=True) == len(stored)
    back = list(csv.DictReader(out.open(encoding="utf-8", newline="")))
    assert back == [{k: _text(v) for k, v in r.items()} for r in stored]


def test_parquet_export_round_trips_every_field(db: Database, stored: list[dict[str, Any]], tmp_path: Path) -> None:
    out = tmp_path / "books.parquet"
    assert export_books(db, "parquet", out, with_html=True) == len(stored)
    back = pd.read_parquet(out).to_dict("records")
    assert len(back) == len(stored)
    for got, want in zip(back, stored, strict=True):
        for key, value in want.items():
            if key in PRICES:
                assert Decimal(str(round(got[key], 2))) == value, key
            elif key in ("fetched_at", "scraped_at"):
                assert pd.Timestamp(got[key]) == pd.Timestamp(value), key
            else:
                assert _text(got[key]) == _text(value), key


def test_the_export_command_writes_the_books_file_it_always_wrote(
    database_url: str, stored: list[dict[str, Any]], tmp_path: Path
) -> None:
    env = child_env(DATABASE_URL=database_url, BOOK_PIPELINE_DATA_DIR=str(tmp_path))
    run = [sys.executable, "-m", "book_assets.cli", "export", "--format", "jsonl"]
    default = subprocess.run(run, env=env, capture_output=True, text=True, timeout=300)
    assert default.returncode == 0, default.stderr
    out = tmp_path / "exports" / "books.jsonl"
    assert default.stdout == f"wrote {len(stored)} books to {out}\n"
    assert [json.loads(line)["url"] for line in out.read_text(encoding="utf-8").splitlines()] == [
        r["url"] for r in stored
    ]
    chosen = tmp_path / "mine.jsonl"
    named = subprocess.run([*run, "--output", str(chosen)], env=env, capture_output=True, text=True, timeout=300)
    assert named.returncode == 0 and chosen.read_bytes() == out.read_bytes(), named.stderr
