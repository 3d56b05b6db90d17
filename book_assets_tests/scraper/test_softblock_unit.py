"""Soft blocks: a 200 that is not the page is recognised by its kind, and a real page never is."""

from __future__ import annotations

from pathlib import Path

import pytest

from book_assets.sandbox.pages import render_login_wall
from book_assets.sandbox.softblock import challenge_html
from book_assets.scraper.softblock import soft_block
from book_assets.sites.books import BOOKS
from book_assets.sites.site import kind_named

pytestmark = pytest.mark.unit

HTML = {"content-type": "text/html; charset=utf-8"}
BOOK_PATH = "/catalogue/a-light-in-the-attic_1000/index.html"
JUST_A_MOMENT = """<!DOCTYPE html><html><head><title>Just a moment...</title>
<meta name="robots" content="noindex,nofollow"></head><body><div id="challenge-stage"></div>
<script src="/cdn-cgi/challenge-platform/h/g/orchestrate/chl_page/v1"></script></body></html>"""
NOINDEX = """<html><head><title>Please wait</title><meta name="robots" content="NOINDEX"></head>
<body><p>Checking your browser.</p></body></html>"""


def markers(kind: str) -> tuple[bytes, ...]:
    """The books' markers of page kind ``kind``."""
    return kind_named(BOOKS, kind).markers


TURNSTILE = """<html><head><title>books.toscrape.com</title></head><body>
<div class="cf-turnstile" data-sitekey="x"></div></body></html>"""


@pytest.mark.parametrize("kind", ["detail", "listing"])
@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            challenge_html("books.toscrape.com", "8a1b2c3d4e5f6a7b"),
            "challenge page (title 'Attention Required! | Cloudflare')",
        ),
        (JUST_A_MOMENT, "challenge page (title 'Just a moment...')"),
        (TURNSTILE, "challenge page (cf-turnstile)"),
        (render_login_wall(BOOK_PATH), "login wall (a password form, no page)"),
        (NOINDEX, "interstitial (noindex, no page)"),
        ("", "empty body"),
        (" \r\n ", "empty body"),
    ],
    ids=["cloudflare-block", "cloudflare-challenge", "turnstile", "login-wall", "noindex", "empty", "blank"],
)
def test_a_200_that_is_not_the_page_is_a_soft_block_saying_why(body: str, reason: str, kind: str) -> None:
    assert soft_block(200, HTML, body.encode(), markers(kind)) == reason


def test_a_challenge_the_cdn_announces_in_a_header_is_a_soft_block_whatever_the_body() -> None:
    assert (
        soft_block(200, {**HTML, "cf-mitigated": "challenge"}, b"<html>", markers("detail"))
        == "challenge (cf-mitigated: challenge)"
    )


def test_every_real_page_is_its_kind_and_no_soft_block(real_site: Path) -> None:
    pages = sorted(real_site.rglob("*.html"))
    assert len(pages) >= 10
    for path in pages:
        kind = "detail" if path.name == "index.html" and path.parent.name.endswith(tuple("0123456789")) else "listing"
        assert soft_block(200, HTML, path.read_bytes(), markers(kind)) is None, path


def test_a_product_page_is_never_a_soft_block_whatever_its_text_says(real_site: Path) -> None:
    book = (real_site / "catalogue/a-light-in-the-attic_1000/index.html").read_text("utf-8")
    odd = book.replace("<title>", "<title>Just a moment... Access denied, captcha", 1).replace(
        "</body>", '<form><input type="password" name="p"></form></body>', 1
    )
    assert odd.count("Just a moment") == 1 and 'type="password"' in odd
    assert soft_block(200, HTML, odd.encode(), markers("detail")) is None


@pytest.mark.parametrize("status", [204, 304, 404, 429, 503])
def test_only_a_success_with_a_body_is_judged(status: int) -> None:
    assert soft_block(status, HTML, b"", markers("detail")) is None
    assert soft_block(status, HTML, JUST_A_MOMENT.encode(), markers("detail")) is None


def test_a_page_that_is_merely_not_a_book_is_left_to_the_parser() -> None:
    garbage = b"\x00\xff<html><div class='product_main'><h1>\x89PNG</h1><table"
    assert soft_block(200, HTML, garbage, markers("detail")) is None
    assert (
        soft_block(200, HTML, b"<html><title>404 Not Found</title><h1>Not Found</h1></html>", markers("detail")) is None
    )


def test_a_soft_blocked_pages_retries_double_up_to_the_domains_backoff_cap_on_the_last() -> None:
    from book_assets.scraper.softblock import soft_block_retry_s

    waits = [soft_block_retry_s(attempt, 5, 60.0) for attempt in range(1, 5)]
    assert waits == [7.5, 15.0, 30.0, 60.0]
    assert sum(waits) >= 60.0  # the last attempt starts at least the cap after the first
    assert soft_block_retry_s(1, 2, 60.0) == 60.0
    assert soft_block_retry_s(5, 5, 60.0) == 60.0  # no attempt left: the queue fails it, the wait is moot
