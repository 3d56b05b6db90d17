"""The generic record store (``site_records``): a scaffolded site's records upserted by (site, URL) with their
fields as JSON, a 304 confirming the stored copy only, a changed page updating its record and its version, the
data checks catching a record without a required field, reextract repairing a record from its stored page, and
each site's rows its own."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from book_assets.db.connection import Cursor, Database
from book_assets.scraper.errors import ErrorKind, ParseError
from book_assets.scraper.fetching import FetchResult, Validators, build_result
from book_assets.settings import ConfigError
from book_assets.sites.generic import RecordsPublishing, RecordStore
from book_assets.sites.site import DataCheck, Listing
from book_assets.store.pages import StaleCopy, write_page

T0 = datetime(2026, 12, 5, 6, 0, tzinfo=UTC)
URL = "http://shop.example/item/1/"


@dataclass(frozen=True, slots=True)
class Item:
    url: str
    title: str
    price: Decimal
    released: date
    tags: tuple[str, ...] = ()
    category: str | None = None


class NoItem(ParseError):
    kind = ErrorKind.NOT_A_DETAIL_PAGE


def parse_item(html: str, url: str) -> Item:
    """An item page of the made-up shop: its title in ``<h1>`` (the other fields as :data:`ITEM`'s)."""
    title = re.search(r"<h1>(.*?)</h1>", html)
    if title is None:
        raise NoItem("no h1")
    return replace(ITEM, url=url, title=title.group(1))


STORE = RecordStore("shop", Item, noun="items")
OTHER = RecordStore("other", Item)
ITEM = Item(URL, "The first item", Decimal("12.50"), date(2026, 1, 2), ("a", "b"), "Tools")
PUBLISHING = RecordsPublishing(STORE, parse_item, record="item")


def _fetch(html: str, at: datetime = T0, url: str = URL) -> FetchResult:
    return build_result(
        url=url,
        final_url=url,
        status=200,
        headers={"content-type": "text/html; charset=utf-8", "etag": '"v1"'},
        body=html.encode("utf-8"),
        fetched_at=at,
        elapsed_s=0.0,
    )


def _write(db: Database, record: Item, fetched: FetchResult, store: RecordStore = STORE) -> tuple[str, int | None]:
    def _store(cur: Cursor) -> tuple[str, int | None]:
        stored = store.write_detail(cur, record, fetched, requested_url=record.url)
        write_page(cur, record.url, fetched, keep_body=False)
        return stored.outcome, stored.version

    return db.run(_store)


def _check(db: Database, check: DataCheck) -> tuple[int, int, list[str]]:
    row = db.query(check.sql, check.params)[0]
    return int(row["bad"]), int(row["total"]), list(row["sample"])


def test_a_record_is_stored_with_its_fields_as_json_and_its_page(db: Database) -> None:
    html = "<html><body><h1>The first item</h1></body></html>"
    assert _write(db, ITEM, _fetch(html)) == ("new", 1)
    columns = "site, url, fields, category, raw_html, raw_body, http_status, fetched_at"
    row = db.query(f"SELECT {columns} FROM site_records")[0]
    assert (row["site"], row["url"], row["category"], row["raw_html"]) == ("shop", URL, "Tools", html)
    assert row["fields"] == {"title": "The first item", "price": "12.50", "released": "2026-01-02", "tags": ["a", "b"]}
    assert (row["raw_body"], row["http_status"], row["fetched_at"]) == (None, 200, T0)


def test_a_page_seen_again_is_unchanged_and_a_changed_page_updates_its_record_and_version(db: Database) -> None:
    html = "<html><body><h1>The first item</h1></body></html>"
    _write(db, ITEM, _fetch(html))
    assert _write(db, ITEM, _fetch(html, T0 + timedelta(hours=1))) == ("unchanged", 1)
    changed_html = html.replace("first", "better")
    later = _fetch(changed_html, T0 + timedelta(days=1))
    assert _write(db, replace(ITEM, title="The better item"), later) == ("changed", 2)
    row = db.query("SELECT fields ->> 'title' AS title, raw_html, content_hash, fetched_at FROM site_records")[0]
    assert (row["title"], row["raw_html"], row["content_hash"]) == ("The better item", changed_html, later.content_hash)
    assert row["fetched_at"] == later.fetched_at
    assert STORE.record_counts(db) == {"total": 1, "unique_urls": 1, "with_html": 1, "versions": 2}


def test_a_304_confirms_the_stored_record_and_a_changed_copy_is_stale(db: Database) -> None:
    served = _fetch("<html><body><h1>The first item</h1></body></html>")
    _write(db, ITEM, served)
    validators = Validators(URL, '"v1"', None, served.content_hash)
    later = replace(served, status=304, body=b"", fetched_at=T0 + timedelta(days=1))
    confirmed = db.run(lambda cur: STORE.revalidate_detail(cur, URL, validators, later))
    assert (confirmed.outcome, confirmed.version) == ("unchanged", 1)
    assert db.query("SELECT fetched_at FROM site_records")[0]["fetched_at"] == later.fetched_at
    with pytest.raises(StaleCopy):
        db.run(lambda cur: STORE.revalidate_detail(cur, URL, replace(validators, content_hash="another copy"), later))
    with pytest.raises(StaleCopy):  # the same page under another site's name holds no copy of it
        db.run(lambda cur: OTHER.revalidate_detail(cur, URL, validators, later))


def test_the_bytes_the_html_does_not_reproduce_are_kept(db: Database) -> None:
    served = _fetch("<html><body><h1>The first item</h1></body></html>")
    lossy = replace(served, body=b"\xef\xbb\xbf" + served.body)  # a BOM the decoded HTML does not hold
    _write(db, ITEM, lossy)
    assert bytes(db.query("SELECT raw_body FROM site_records")[0]["raw_body"]) == lossy.body


def test_the_required_fields_are_those_without_a_default_and_a_record_missing_one_fails_its_check(
    db: Database,
) -> None:
    assert STORE.required == ("title", "price", "released")
    unique, html, required = STORE.data_checks
    assert [c.name for c in STORE.data_checks] == ["unique_urls", "raw_html_present", "required_fields_present"]
    html_page = "<html><body><h1>x</h1></body></html>"
    _write(db, ITEM, _fetch(html_page))
    second = "http://shop.example/item/2/"
    _write(db, replace(ITEM, url=second, title=""), _fetch(html_page, url=second))
    _write(db, replace(ITEM, url="http://other.example/1/", title=""), _fetch(html_page), store=OTHER)
    assert _check(db, unique) == (0, 2, [])
    assert _check(db, html) == (0, 2, [])
    assert _check(db, required) == (1, 2, [second])


def test_each_site_counts_and_exports_only_its_own_records(db: Database) -> None:
    since = db.query("SELECT now() AS now")[0]["now"]
    _write(db, ITEM, _fetch("<p>1</p>"))
    _write(db, replace(ITEM, url="http://other.example/1/"), _fetch("<p>1</p>"), store=OTHER)
    assert STORE.versions_since(db, since) == (1, 0)
    assert STORE.record_counts(db)["total"] == OTHER.record_counts(db)["total"] == 1
    (table,) = PUBLISHING.export_tables(db, with_html=False)
    assert table.name == "shop" and [r["url"] for r in table.rows] == [URL]
    row = table.rows[0]
    assert list(row)[:6] == ["id", "url", "title", "price", "released", "tags"]
    assert (row["title"], row["category"], row["version"]) == ("The first item", "Tools", 1)
    assert "raw_html" not in row
    (with_html,) = PUBLISHING.export_tables(db, with_html=True)
    assert with_html.rows[0]["raw_html"] == "<p>1</p>"


@pytest.mark.unit
def test_a_listing_stores_nothing_and_changes_are_refused_in_one_line() -> None:
    STORE.write_listing(None, Listing("http://shop.example/", (), None), None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^invalid setting site .*'shop' .*keeps no versions: changes needs"):
        PUBLISHING.changes_of_day(None, date(2026, 12, 5))  # type: ignore[arg-type]


@pytest.mark.unit
def test_a_record_without_a_url_or_with_a_field_named_as_a_stored_fact_is_refused() -> None:
    @dataclass(frozen=True)
    class NoUrl:
        title: str

    @dataclass(frozen=True)
    class Clashing:
        url: str
        version: str

    with pytest.raises(TypeError, match="has no url field"):
        RecordStore("shop", NoUrl)
    with pytest.raises(TypeError, match=r"field named as a stored fact \(version\)"):
        RecordStore("shop", Clashing)


def test_the_dagster_check_of_a_generic_store_runs_its_query_for_its_site_alone(
    db: Database, database_url: str
) -> None:
    from book_assets.defs.crawl.checks import run_check
    from book_assets.defs.resources import DatabaseResource

    _write(db, ITEM, _fetch("<p>1</p>"))
    _write(db, replace(ITEM, url="http://other.example/1/", title=""), _fetch("<p>1</p>"), store=OTHER)
    required = STORE.data_checks[2]
    result = run_check(DatabaseResource(url=database_url), required)
    assert result.passed and result.description == "all 1 items: required fields present (title, price, released)"
    broken = run_check(DatabaseResource(url=database_url), OTHER.data_checks[2])
    assert not broken.passed and (broken.description or "").startswith("1 of 1 records break the rule")


def test_reextract_repairs_a_records_fields_from_its_stored_page_and_reports_a_page_the_parser_refuses(
    db: Database,
) -> None:
    _write(db, ITEM, _fetch("<html><body><h1>The first item</h1></body></html>"))
    second = "http://shop.example/item/2/"
    _write(db, replace(ITEM, url=second), _fetch("<html><body><p>no title</p></body></html>", url=second))
    _write(db, replace(ITEM, url="http://other.example/1/"), _fetch("<p>1</p>"), store=OTHER)
    db.query(
        'UPDATE site_records SET fields = fields || \'{"title": "corrupted"}\' WHERE url = %(url)s RETURNING id',
        {"url": URL},
    )
    done = PUBLISHING.reextract(db, batch_size=1)
    assert done.line() == "re-extracted 2 items: 1 changed, 1 unparseable (1 not_a_detail_page)"
    assert done.errors == (f"{second}: not_a_detail_page: no h1",)
    rows = db.query(
        "SELECT url, fields ->> 'title' AS title, version FROM site_records WHERE site = 'shop' ORDER BY id"
    )
    assert [(r["url"], r["title"], r["version"]) for r in rows] == [
        (URL, "The first item", 2),
        (second, "The first item", 1),
    ]
    assert PUBLISHING.reextract(db).changed == 0
