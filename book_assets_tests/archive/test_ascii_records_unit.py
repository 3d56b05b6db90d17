"""What a WARC record holds is ASCII that keeps the bytes: header values and target URIs (pure functions)."""

from __future__ import annotations

from urllib.parse import unquote, unquote_to_bytes

import pytest

from book_assets.archive.writer import uri_of
from book_assets.scraper.fetching import header_text


@pytest.mark.parametrize(
    "raw",
    [b"caf\xe9", b"caf\xc3\xa9", b"100% caf\xe9", b"a\tb \xff\xfe"],
    ids=["latin_1", "utf_8", "percent_sign", "tab_and_high_bytes"],
)
def test_a_header_value_with_a_byte_outside_ascii_is_percent_encoded_byte_for_byte(raw: bytes) -> None:
    value = raw.decode("utf-8", "surrogateescape")  # as aiohttp hands it over
    text = header_text(value)
    assert text.isascii() and unquote_to_bytes(text) == raw


def test_an_ascii_header_value_is_left_as_it_is() -> None:
    assert header_text('W/"abc 100%"') == 'W/"abc 100%"'


def test_a_url_s_uri_form_percent_encodes_what_is_outside_ascii_and_keeps_escapes() -> None:
    url = "http://127.0.0.1:8080/catalogue/café_1/index.html?q=a%20b&x=[1]#top"
    uri = uri_of(url)
    assert uri == "http://127.0.0.1:8080/catalogue/caf%C3%A9_1/index.html?q=a%20b&x=[1]#top"
    assert unquote(uri) == unquote(url)
    assert uri_of(uri) == uri
