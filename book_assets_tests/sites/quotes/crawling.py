"""Helpers for crawls of the quotes stand-in: a crawl's configuration, and what it stored read back as the
truth's records (:mod:`book_assets.sandbox.quotes.truth`), so a crawl is compared with the truth field by field."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from book_assets.crawl.config import CrawlConfig
from book_assets.db.connection import Database
from book_assets.sandbox.quotes import truth
from book_assets.sandbox.quotes.server import QuotesServer
from book_assets_tests.crawl.conftest import sandbox_config

_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def quotes_config(server: QuotesServer, **overrides: Any) -> CrawlConfig:
    """A crawl of the quotes stand-in, as :func:`~book_assets_tests.crawl.conftest.sandbox_config` makes one of
    the books' sandbox (``mode`` short for ``fetch_mode``)."""
    return sandbox_config(server.url + "/", site="quotes", **overrides)


def stored_quotes(db: Database) -> list[truth.Quote]:
    """The stored quotes, as the truth's records (an author's slug from the quote's author link)."""
    rows = db.query("SELECT text, author, author_url, tags FROM quotes ORDER BY id")
    return [
        truth.Quote(
            text=row["text"],
            author=row["author"],
            author_slug=_slug(row["author_url"]) if row["author_url"] else "",
            tags=tuple(row["tags"]),
        )
        for row in rows
    ]


def stored_authors(db: Database) -> list[truth.Author]:
    """The stored authors, as the truth's records (a birth date written as the page shows it)."""
    rows = db.query("SELECT url, name, birth_date, birth_place, description FROM authors ORDER BY id")
    return [
        truth.Author(
            name=row["name"],
            slug=_slug(row["url"]),
            born_date=f"{_MONTHS[row['birth_date'].month - 1]} {row['birth_date'].day:02d}, {row['birth_date'].year}",
            born_location=row["birth_place"],
            description=row["description"] or "",
        )
        for row in rows
    ]


def _slug(url: str) -> str:
    """The slug of an author page's URL (``/author/<slug>/``)."""
    return urlsplit(url).path.removeprefix("/author/").strip("/")
