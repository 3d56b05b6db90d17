"""Writing quotes and authors to PostgreSQL: upserted by their natural keys, new, changed or unchanged, the
author link of a quote never lost to a page that shows none."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import pytest

from book_assets.db.connection import Cursor, Database
from book_assets.scraper.fetching import FetchResult, Validators, build_result
from book_assets.sites.quotes.definition import QUOTES
from book_assets.sites.quotes.models import Author, QuotesPage
from book_assets.sites.quotes.parsers import parse_author, parse_quotes_page
from book_assets.sites.quotes.store import write_author, write_quotes
from book_assets.store.pages import StaleCopy, write_page
from book_assets_tests.sites.quotes.pages import EINSTEIN, SITE, fixture

T0 = datetime(2026, 12, 4, 5, 0, tzinfo=UTC)


def _fetch(url: str, html: str, at: datetime = T0) -> FetchResult:
    return build_result(
        url=url,
        final_url=url,
        status=200,
        headers={"content-type": "text/html; charset=utf-8"},
        body=html.encode("utf-8"),
        fetched_at=at,
        elapsed_s=0.0,
    )


def _store(db: Database, page: QuotesPage, fetch: FetchResult) -> list[str]:
    return [s.outcome for s in db.run(lambda cur: write_quotes(cur, page, fetch))]


def test_a_page_of_quotes_is_stored_once_and_seen_again_unchanged(db: Database) -> None:
    html = fixture("index.html")
    page = parse_quotes_page(html, SITE)
    assert _store(db, page, _fetch(SITE, html)) == ["new"] * 10
    later = _fetch(SITE, html, T0 + timedelta(hours=1))
    assert _store(db, page, later) == ["unchanged"] * 10
    rows = db.query("SELECT text, author, author_url, tags, page_url, content_hash, fetched_at FROM quotes ORDER BY id")
    assert len(rows) == 10
    first = rows[0]
    assert (first["text"], first["author"], first["author_url"]) == (page.quotes[0].text, "Albert Einstein", EINSTEIN)
    assert first["tags"] == ["change", "deep-thoughts", "thinking", "world"]
    assert (first["page_url"], first["content_hash"], first["fetched_at"]) == (
        SITE,
        later.content_hash,
        later.fetched_at,
    )


def test_a_page_written_by_a_script_keeps_the_author_links_already_stored(db: Database) -> None:
    served = fixture("index.html")
    _store(db, parse_quotes_page(served, SITE), _fetch(SITE, served))
    rendered = fixture("js-rendered.html")
    assert _store(db, parse_quotes_page(rendered, SITE + "js/"), _fetch(SITE + "js/", rendered)) == ["unchanged"] * 10
    links = db.query("SELECT count(*) AS n FROM quotes WHERE author_url IS NOT NULL")[0]["n"]
    assert links == 10


def test_a_quote_first_seen_without_a_link_gets_it_from_a_page_that_shows_it(db: Database) -> None:
    rendered = fixture("js-rendered.html")
    _store(db, parse_quotes_page(rendered, SITE + "js/"), _fetch(SITE + "js/", rendered))
    served = fixture("index.html")
    assert _store(db, parse_quotes_page(served, SITE), _fetch(SITE, served)) == ["changed"] * 10
    row = db.query("SELECT author_url, page_url FROM quotes ORDER BY id LIMIT 1")[0]
    assert (row["author_url"], row["page_url"]) == (EINSTEIN, SITE)


def test_a_quote_whose_tags_changed_is_changed_and_one_of_another_author_is_another_quote(db: Database) -> None:
    html = fixture("index.html")
    page = parse_quotes_page(html, SITE)
    first = page.quotes[0]
    _store(db, replace(page, quotes=(first,)), _fetch(SITE, html))
    retagged = replace(first, tags=("thinking",))
    other = replace(first, author="Someone Else", author_url=None)
    assert _store(db, replace(page, quotes=(retagged, other)), _fetch(SITE, html)) == ["changed", "new"]
    rows = db.query("SELECT author, tags FROM quotes ORDER BY id")
    assert [(r["author"], r["tags"]) for r in rows] == [
        ("Albert Einstein", ["thinking"]),
        ("Someone Else", list(first.tags)),
    ]


def test_an_author_is_stored_with_its_page_and_updated_only_when_a_field_changed(db: Database) -> None:
    html = fixture("author-albert-einstein.html")
    author = parse_author(html, EINSTEIN)
    assert db.run(lambda cur: write_author(cur, author, _fetch(EINSTEIN, html))).outcome == "new"
    again = _fetch(EINSTEIN, html, T0 + timedelta(days=1))
    assert db.run(lambda cur: write_author(cur, author, again)).outcome == "unchanged"
    moved = replace(author, birth_place="Princeton, New Jersey")
    assert db.run(lambda cur: write_author(cur, moved, again)).outcome == "changed"
    rows = db.query(
        "SELECT url, name, birth_date, birth_place, description, raw_html, raw_body, fetched_at FROM authors"
    )
    assert len(rows) == 1
    row = rows[0]
    assert (row["url"], row["name"], row["birth_date"]) == (EINSTEIN, "Albert Einstein", date(1879, 3, 14))
    assert (row["birth_place"], row["description"]) == ("Princeton, New Jersey", author.description)
    assert (row["raw_html"], row["raw_body"], row["fetched_at"]) == (html, None, again.fetched_at)


def test_an_author_page_whose_bytes_the_html_does_not_reproduce_keeps_them(db: Database) -> None:
    html = fixture("author-albert-einstein.html")
    fetch = _fetch(EINSTEIN, html)
    lossy = replace(fetch, body=b"\xef\xbb\xbf" + fetch.body)  # a BOM the decoded HTML does not hold
    db.run(lambda cur: write_author(cur, parse_author(html, EINSTEIN), lossy))
    assert bytes(db.query("SELECT raw_body FROM authors")[0]["raw_body"]) == lossy.body


def test_a_304_for_an_author_page_confirms_the_stored_author_and_a_changed_copy_is_stale(db: Database) -> None:
    html = fixture("author-albert-einstein.html")
    served = _fetch(EINSTEIN, html)
    author = parse_author(html, EINSTEIN)

    def _stored(cur: Cursor) -> None:
        QUOTES.write_detail(cur, author, served, requested_url=EINSTEIN)
        write_page(cur, EINSTEIN, served, keep_body=False)

    db.run(_stored)
    validators = Validators(EINSTEIN, '"v1"', None, served.content_hash)
    later = replace(served, status=304, fetched_at=T0 + timedelta(days=1))
    confirmed = db.run(lambda cur: QUOTES.revalidate_detail(cur, EINSTEIN, validators, later))
    assert confirmed.outcome == "unchanged"
    assert db.query("SELECT fetched_at FROM authors")[0]["fetched_at"] == later.fetched_at
    gone = replace(validators, content_hash="another copy")
    with pytest.raises(StaleCopy):
        db.run(lambda cur: QUOTES.revalidate_detail(cur, EINSTEIN, gone, later))


def test_each_distinct_state_of_a_quote_and_an_author_is_one_version(db: Database) -> None:
    html = fixture("index.html")
    page = parse_quotes_page(html, SITE)
    first = page.quotes[0]
    one = replace(page, quotes=(first,))
    for quotes in ((first,), (first,), (replace(first, tags=("thinking",)),), (first,)):
        _store(db, replace(one, quotes=quotes), _fetch(SITE, html))
    rows = db.query("SELECT version, tags FROM quote_versions ORDER BY version")
    assert [(r["version"], r["tags"]) for r in rows] == [
        (1, list(first.tags)),
        (2, ["thinking"]),
        (3, list(first.tags)),
    ]
    page_html = fixture("author-albert-einstein.html")
    author = parse_author(page_html, EINSTEIN)
    fetched = _fetch(EINSTEIN, page_html)
    for state in (author, author, replace(author, birth_place="Princeton, New Jersey")):

        def _write(cur: Cursor, state: Author = state) -> None:
            write_author(cur, state, fetched)

        db.run(_write)
    places = db.query("SELECT version, birth_place FROM author_versions ORDER BY version")
    assert [(r["version"], r["birth_place"]) for r in places] == [(1, author.birth_place), (2, "Princeton, New Jersey")]
    assert QUOTES.record_counts(db)["versions"] == 2
    assert QUOTES.versions_since(db, T0 - timedelta(days=365)) == (1, 1)
