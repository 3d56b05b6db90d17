"""decode_html picks the charset like a browser and never falls back to latin-1."""

from __future__ import annotations

from pathlib import Path

import pytest

from book_assets.scraper.charset import decode_html

pytestmark = pytest.mark.unit

POUND_UTF8 = "<p>£51.77</p>".encode()


def test_header_without_charset_decodes_utf8_not_latin1() -> None:
    assert decode_html(POUND_UTF8, "text/html") == "<p>£51.77</p>"


def test_no_content_type_decodes_utf8() -> None:
    assert decode_html(POUND_UTF8, None) == "<p>£51.77</p>"


def test_header_charset_wins_over_meta() -> None:
    body = '<meta charset="utf-8"><p>£</p>'.encode("cp1252")
    assert decode_html(body, "text/html; charset=ISO-8859-1").endswith("<p>£</p>")


def test_meta_charset_is_used_when_header_has_none() -> None:
    body = '<html><head><meta charset="windows-1252"></head><p>£</p>'.encode("cp1252")
    assert decode_html(body, "text/html").endswith("<p>£</p>")


def test_meta_http_equiv_charset_is_used() -> None:
    body = '<meta content="text/html; charset=iso-8859-15" http-equiv="content-type"/><p>€</p>'.encode("iso-8859-15")
    assert decode_html(body, "text/html").endswith("<p>€</p>")


def test_unknown_charset_label_falls_back_to_next_source() -> None:
    assert decode_html(POUND_UTF8, 'text/html; charset="x-no-such-charset"') == "<p>£51.77</p>"


def test_bom_wins_over_header() -> None:
    body = "<p>£</p>".encode("utf-16")  # Python writes a BOM
    assert decode_html(body, "text/html; charset=utf-8") == "<p>£</p>"


def test_invalid_utf8_bytes_become_replacement_characters() -> None:
    assert decode_html(b"<p>\xff\xfe\xa3</p>", "text/html") == "<p>\ufffd\ufffd\ufffd</p>"


def test_real_book_page_decodes_pound_sign(real_site: Path) -> None:
    body = (real_site / "catalogue/a-light-in-the-attic_1000/index.html").read_bytes()
    text = decode_html(body, "text/html")
    assert "£51.77" in text
    assert "Â" not in text


@pytest.mark.parametrize("content_type", ["text/html", "text/html; charset=utf-8", None, "TEXT/HTML;CHARSET=UTF-8"])
def test_real_root_page_never_has_mojibake(real_site: Path, content_type: str | None) -> None:
    text = decode_html((real_site / "index.html").read_bytes(), content_type)
    assert "Â£" not in text and "£51.77" in text
