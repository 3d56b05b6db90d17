"""The sandbox's validators: ETag and Last-Modified per page, 304 on a match, and byte counts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx

from book_assets.sandbox import Catalogue, Site
from book_assets.sandbox.pages import DAY_ZERO
from book_assets.sandbox.server import not_modified
from book_assets.sandbox.testing import SandboxFactory

ETAG = '"abc"'
DAY_3 = (DAY_ZERO + timedelta(days=3)).timestamp()


def _date(when: datetime) -> str:
    return format_datetime(when, usegmt=True)


def test_if_none_match_decides_when_present() -> None:
    assert not_modified({"if-none-match": ETAG}, ETAG, DAY_3)
    assert not_modified({"if-none-match": '"x", W/"abc"'}, ETAG, DAY_3)
    assert not_modified({"if-none-match": "*"}, ETAG, DAY_3)
    # A mismatching ETag wins over a matching date.
    later = _date(DAY_ZERO + timedelta(days=9))
    assert not not_modified({"if-none-match": '"x"', "if-modified-since": later}, ETAG, DAY_3)


def test_if_modified_since_compares_the_day_of_the_last_change() -> None:
    assert not_modified({"if-modified-since": _date(DAY_ZERO + timedelta(days=3))}, ETAG, DAY_3)
    assert not not_modified({"if-modified-since": _date(DAY_ZERO + timedelta(days=2))}, ETAG, DAY_3)
    assert not not_modified({"if-modified-since": "yesterday"}, ETAG, DAY_3)
    assert not not_modified({}, ETAG, DAY_3)


def test_a_new_day_changes_the_etag_and_last_modified_of_exactly_the_changed_pages() -> None:
    day0, day1 = Site(Catalogue(day=0)), Site(Catalogue(day=1))
    changed = {b.url_path for b in day1.catalogue.books if b.id in day1.catalogue.changed_ids}
    common = [b.url_path for b in day0.catalogue.books if day1.catalogue.book_by_path(b.url_path) is not None]
    assert {p for p in common if day0.etag(p) != day1.etag(p)} == changed
    assert {p for p in common if day1.changed_on(p) == 1} == changed
    assert {day0.changed_on(p) for p in common} == {0}
    added = next(b.url_path for b in day1.catalogue.books if b.id in day1.catalogue.added_ids)
    assert day1.changed_on(added) == 1 and day1.last_modified(added) == datetime(2026, 1, 2, tzinfo=UTC)


def test_the_server_answers_304_on_a_match_and_counts_the_bytes_it_sent(sandbox_factory: SandboxFactory) -> None:
    site = sandbox_factory()
    path = site.catalogue.books[0].url_path
    first = httpx.get(site.url_for(path))
    etag, last_modified = first.headers["etag"], first.headers["last-modified"]
    assert first.status_code == 200 and last_modified == _date(DAY_ZERO)

    by_etag = httpx.get(site.url_for(path), headers={"If-None-Match": etag})
    by_date = httpx.get(site.url_for(path), headers={"If-Modified-Since": last_modified})
    assert (by_etag.status_code, by_date.status_code) == (304, 304)
    assert by_etag.content == b"" and "content-length" not in by_etag.headers and by_etag.headers["etag"] == etag

    stats = site.stats()
    assert stats.responses[path] == [200, 304, 304]
    assert len(first.content) < stats.bytes_sent < len(first.content) + 1000

    changed = next(b for b in site.catalogue.books if b.id in Catalogue(day=1).changed_ids)
    etag = httpx.get(site.url_for(changed.url_path)).headers["etag"]
    site.set_day(1)
    assert httpx.get(site.url_for(changed.url_path), headers={"If-None-Match": etag}).status_code == 200
    assert httpx.get(site.url_for(path), headers={"If-Modified-Since": last_modified}).status_code == 304


def test_every_response_a_client_has_received_is_already_in_the_stats(sandbox_factory: SandboxFactory) -> None:
    # The server counts a response before writing it: a client holding the response reads the stats at once
    # (a 304 is a few hundred bytes, so it arrives while the server's thread is still in its write).
    site = sandbox_factory()
    path = site.catalogue.books[0].url_path
    with httpx.Client() as client:
        etag = client.get(site.url_for(path)).headers["etag"]
        for n in range(2, 402):
            assert client.get(site.url_for(path), headers={"If-None-Match": etag}).status_code == 304
            assert len(site.stats().responses[path]) == n
