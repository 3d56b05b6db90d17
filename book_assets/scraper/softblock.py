"""Soft blocks: a ``200 OK`` whose body is not the page asked for, recognised before anything parses it.

A site or the CDN in front of it answers a crawler it distrusts with a page that looks like success to
anything that checks only the status: a bot challenge (Cloudflare's "Attention Required!" and "Just a
moment...", Akamai's "Access Denied", a captcha or Turnstile widget), a login wall, or nothing at all. Parsed,
such a page fails as "not a book page" (permanent: the page would never be tried again) or, worse, as a
listing with no books and no next page (the category would look finished). Recognised here, it is a
``soft_block`` failure instead: retried later, never stored, and its domain backs off for every worker.

:func:`soft_block` is a pure function of the response and the markers of the kind of page expected (the site's,
:attr:`~book_assets.sites.site.PageKind.markers`). A page that carries its kind's own markers (books: a product
page's ``product_page`` box, a listing's book cards or result count) is never a soft block, whatever its text
says: a book titled "Just a moment" stays a book. Only a page without them is
looked at for the generic signs, so the common case costs one search of the bytes and no parse.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from selectolax.lexbor import LexborHTMLParser

from book_assets.scraper.charset import decode_html

#: Titles of the challenge and block pages of the common CDNs and WAFs (Cloudflare, Akamai, Imperva, Sucuri).
_CHALLENGE_TITLE_RE = re.compile(
    r"attention required|just a moment|access denied|security check|are you a robot|verify you are human|"
    r"request unsuccessful|access to this page has been denied|captcha",
    re.IGNORECASE,
)
#: Markup of the challenge widgets and scripts: Cloudflare's challenge platform, Turnstile, reCAPTCHA, hCaptcha.
_CHALLENGE_MARKUP_RE = re.compile(
    rb"cf-chl|challenge-platform|cf-turnstile|challenges\.cloudflare\.com|g-recaptcha|h-captcha|"
    rb"cf-error-details|_incapsula_resource|perimeterx|px-captcha",
    re.IGNORECASE,
)
#: Response headers a CDN sets on a challenge it served (Cloudflare: ``cf-mitigated: challenge``).
_CHALLENGE_HEADERS = {"cf-mitigated": "challenge"}


def soft_block_retry_s(attempt: int, max_attempts: int, backoff_cap_s: float) -> float:
    """Seconds before a page soft-blocked on its attempt number ``attempt`` of ``max_attempts`` is tried again
    (pure): the last retry waits ``backoff_cap_s``, each earlier one half the next.

    Why not the queue's retry backoff: it is made for a server's bad moment (full jitter from
    ``backoff_base_s``, five attempts in about eight seconds at the defaults), while a block lasts as long as
    the site keeps it, so every attempt was spent inside the block and the page failed for good. The domain
    itself is backed off up to ``backoff_cap_s`` (``autothrottle_max_interval_s``); spread like this, a page's
    attempts span nearly twice that cap and the last starts at least the cap after the first, so a block
    that lifts within the domain's backoff finds an attempt left.
    """
    retries_left = max(max_attempts - attempt, 1)
    return float(backoff_cap_s / 2 ** (retries_left - 1))


def soft_block(status: int, headers: Mapping[str, str], body: bytes, markers: tuple[bytes, ...]) -> str | None:
    """Why the response is a soft block instead of a page of the kind whose ``markers`` are given, or None.

    ``headers`` have lower-cased names (as :class:`~book_assets.scraper.fetching.FetchResult` holds them).
    Only 2xx responses other than 204 are judged; any other status is the fetch's to classify.
    """
    if not 200 <= status < 300 or status == 204:
        return None
    for name, value in _CHALLENGE_HEADERS.items():
        if headers.get(name, "").strip().lower() == value:
            return f"challenge ({name}: {value})"
    if not body.strip():
        return "empty body"
    if any(marker in body for marker in markers):
        return None
    tree = LexborHTMLParser(decode_html(body, headers.get("content-type")))
    title = tree.css_first("title")
    title_text = " ".join((title.text() if title is not None else "").split())
    if _CHALLENGE_TITLE_RE.search(title_text):
        return f"challenge page (title {title_text[:80]!r})"
    found = _CHALLENGE_MARKUP_RE.search(body)
    if found is not None:
        return f"challenge page ({found.group(0).decode('ascii', 'replace')})"
    if tree.css_first("input[type=password]") is not None:
        return "login wall (a password form, no page)"
    robots = tree.css_first('meta[name="robots"]')
    if robots is not None and "noindex" in (robots.attributes.get("content") or "").lower():
        return "interstitial (noindex, no page)"
    return None
