"""Pure error-classification helpers shared by both fetchers."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from book_assets.scraper.errors import ErrorKind, FetchError
from book_assets.scraper.fetching import (
    FetchSettings,
    error_for_status,
    fetch_error,
    host_allowed,
    meta_refresh_target,
    parse_retry_after,
    redirect_target,
    truncation_error,
)

URL = "https://books.toscrape.com/x"


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [
        (404, "http_404", False),
        (403, "http_4xx", False),
        (410, "http_4xx", False),
        (408, "http_408", True),
        (429, "http_429", True),
        (500, "http_5xx", True),
        (502, "http_5xx", True),
        (503, "http_5xx", True),
        (504, "http_5xx", True),
        (304, "not_modified_unasked", False),
        (300, "http_3xx", False),
    ],
)
def test_status_classification(status: int, kind: str, retryable: bool) -> None:
    error = error_for_status(URL, status, {})
    assert error is not None
    assert (error.kind, error.retryable, error.status) == (kind, retryable, status)


@pytest.mark.parametrize("status", [200, 201, 204, 299])
def test_success_statuses_are_not_errors(status: int) -> None:
    assert error_for_status(URL, status, {}) is None


def test_retry_after_seconds_and_http_date() -> None:
    now = datetime(2024, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("120") == 120.0
    assert parse_retry_after("Mon, 01 Jan 2024 12:00:30 GMT", now) == 30.0
    assert parse_retry_after("Mon, 01 Jan 2024 11:00:00 GMT", now) == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None
    assert parse_retry_after("-5") == 0.0


def test_503_carries_retry_after() -> None:
    error = error_for_status(URL, 503, {"retry-after": "7"})
    assert error is not None and error.retry_after == 7.0


def test_truncation_only_when_fewer_bytes_than_declared() -> None:
    assert truncation_error(URL, {"content-length": "100"}, 99) is not None
    assert truncation_error(URL, {"content-length": "100"}, 100) is None
    assert truncation_error(URL, {}, 0) is None
    assert truncation_error(URL, {"content-length": "junk"}, 0) is None


def test_an_encoded_bodys_length_is_left_to_the_transport() -> None:
    # Content-Length counts the gzip bytes; the decoded body is longer or shorter, never comparable.
    assert truncation_error(URL, {"content-length": "100", "content-encoding": "gzip"}, 40) is None
    assert truncation_error(URL, {"content-length": "100", "content-encoding": "identity"}, 40) is not None


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://books.toscrape.com/", True),
        ("http://BOOKS.toscrape.com./catalogue/", True),
        ("https://toscrape.com/", False),
        ("https://evil.example/books.toscrape.com/", False),
        ("https://books.toscrape.com.evil.example/", False),
        ("ftp://books.toscrape.com/", False),
        ("javascript:alert(1)", False),
        ("not a url", False),
    ],
)
def test_host_allowed(url: str, allowed: bool) -> None:
    assert host_allowed(url, FetchSettings().allowed_domains) is allowed


def test_empty_allowed_domains_allows_any_http_host() -> None:
    assert host_allowed("https://example.org/", frozenset())
    assert not host_allowed("file:///etc/passwd", frozenset())


def test_every_kind_is_either_retryable_or_permanent() -> None:
    retryable = {kind for kind in ErrorKind if kind.retryable}
    permanent = {kind for kind in ErrorKind if not kind.retryable}
    assert not retryable & permanent and retryable | permanent == set(ErrorKind)


def test_a_fetch_error_is_retryable_exactly_when_its_kind_is() -> None:
    for kind in ErrorKind:
        error = fetch_error(kind, "x", url=URL)
        assert error.kind is kind and error.retryable is kind.retryable


def test_an_unknown_kind_is_a_permanent_internal_error_that_keeps_its_name() -> None:
    error = FetchError("tiemout", "misspelt", url=URL)
    assert error.kind is ErrorKind.UNKNOWN and not error.retryable
    assert "'tiemout'" in str(error)
    assert ErrorKind.of("tiemout") is ErrorKind.UNKNOWN and ErrorKind.of("timeout") is ErrorKind.TIMEOUT


def test_settings_normalise_domains_and_reject_nonsense() -> None:
    assert FetchSettings(allowed_domains=frozenset({"Books.ToScrape.com."})).allowed_domains == {"books.toscrape.com"}
    with pytest.raises(ValueError):
        FetchSettings(concurrency=0)


@pytest.mark.parametrize("header", ["999999999", "1e300", "inf", "Infinity"])
def test_a_huge_retry_after_is_clamped_and_the_error_says_so(header: str) -> None:
    error = error_for_status(URL, 429, {"retry-after": header}, retry_after_max_s=5)
    assert error is not None and error.retry_after == 5
    assert "clamped to 5s (retry_after_max_s)" in str(error)


@pytest.mark.parametrize("header", ["nan", "NaN"])
def test_a_retry_after_that_is_not_a_number_is_ignored(header: str) -> None:
    assert parse_retry_after(header) is None


def test_a_retry_after_http_date_far_ahead_is_clamped_too() -> None:
    error = error_for_status(URL, 503, {"retry-after": "Fri, 01 Jan 2100 00:00:00 GMT"}, retry_after_max_s=600)
    assert error is not None and error.retry_after == 600 and error.retryable


@pytest.mark.parametrize(
    ("tag", "target"),
    [
        (b'<meta http-equiv="refresh" content="0; url=http://localhost:9/x">', "http://localhost:9/x"),
        (b"<META CONTENT='5;URL=/next.html' HTTP-EQUIV='Refresh'>", "https://books.toscrape.com/next.html"),
        (b'<meta http-equiv=refresh content="0;url=//other.example/">', "https://other.example/"),
        (b'<meta http-equiv="refresh" content="30">', None),
        (b'<meta name="viewport" content="width=device-width">', None),
    ],
)
def test_a_meta_refresh_target_is_read_from_the_markup(tag: bytes, target: str | None) -> None:
    body = b"<html><head>" + tag + b"</head><body>x</body></html>"
    assert meta_refresh_target(body, "https://books.toscrape.com/a/b.html") == target


@pytest.mark.parametrize(
    ("location", "target"),
    [
        ("/b.html", "http://h:8000/b.html"),
        ("c.html", "http://h:8000/a/c.html"),
        ("  http://h:8000/d.html ", "http://h:8000/d.html"),
    ],
)
def test_a_redirect_resolves_its_location_against_the_hop_that_sent_it(location: str, target: str) -> None:
    assert redirect_target("http://h:8000/a/x", "http://h:8000/a/x", location, frozenset({"h:8000"})) == target


@pytest.mark.parametrize(
    ("location", "kind"),
    [
        ("http://[::1/x", "bad_redirect"),
        ("http://h:99999/", "bad_redirect"),
        ("javascript:alert(1)", "bad_redirect"),
        ("mailto:a@h", "bad_redirect"),
        ("http://elsewhere:8000/", "offsite_redirect"),
    ],
)
def test_a_redirect_to_no_http_url_or_another_host_is_refused_for_good(location: str, kind: str) -> None:
    with pytest.raises(FetchError) as info:
        redirect_target("http://h:8000/a", "http://h:8000/a", location, frozenset({"h:8000"}))
    assert (info.value.kind, info.value.retryable) == (kind, False)
