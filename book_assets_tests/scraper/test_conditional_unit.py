"""Building a conditional request from a stored response (pure functions, no network)."""

from __future__ import annotations

from datetime import UTC, datetime

from book_assets.scraper.errors import ErrorKind
from book_assets.scraper.fetching import (
    Validators,
    build_result,
    conditional_headers,
    error_for_status,
    validators_of,
)

URL = "https://books.toscrape.com/catalogue/a_1/index.html"
LAST_MODIFIED = "Thu, 01 Jan 2026 00:00:00 GMT"


def _validators(etag: str | None = '"abc"', last_modified: str | None = LAST_MODIFIED, url: str = URL) -> Validators:
    return Validators(url=url, etag=etag, last_modified=last_modified, content_hash="h")


def test_both_validators_are_sent_back_as_their_conditional_headers() -> None:
    assert conditional_headers(_validators(), URL) == {"If-None-Match": '"abc"', "If-Modified-Since": LAST_MODIFIED}


def test_a_lone_validator_is_sent_alone() -> None:
    assert conditional_headers(_validators(last_modified=None), URL) == {"If-None-Match": '"abc"'}
    assert conditional_headers(_validators(etag=None), URL) == {"If-Modified-Since": LAST_MODIFIED}


def test_nothing_is_sent_without_a_stored_response_or_to_another_url() -> None:
    assert conditional_headers(None, URL) == {}
    assert conditional_headers(_validators(), URL.replace("a_1", "b_2")) == {}  # a redirect hop on the way
    assert not _validators(etag=None, last_modified=None).usable


def test_validators_come_from_the_final_response_headers_and_body_hash() -> None:
    result = build_result(
        url=URL.replace("a_1", "old_1"),
        final_url=URL,
        status=200,
        headers={"etag": ' W/"x1" ', "last-modified": LAST_MODIFIED, "content-type": "text/html"},
        body=b"<html></html>",
        fetched_at=datetime.now(UTC),
        elapsed_s=0.0,
    )
    assert validators_of(result) == Validators(URL, 'W/"x1"', LAST_MODIFIED, result.content_hash)
    bare = build_result(
        url=URL, final_url=URL, status=200, headers={}, body=b"", fetched_at=datetime.now(UTC), elapsed_s=0.0
    )
    assert not validators_of(bare).usable


def test_a_304_nobody_asked_for_is_a_permanent_error_of_its_own_kind() -> None:
    error = error_for_status(URL, 304, {})
    assert error is not None and error.kind == "not_modified_unasked" and not error.retryable
    assert not ErrorKind("not_modified_unasked").retryable
