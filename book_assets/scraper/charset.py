"""Served bytes to text: the charset a browser would pick, and the decoding every fetcher and parser shares.

The fetch layer decodes each body once (``FetchResult.html``); parsers take text. Both fetch modes therefore
see exactly the same characters for the same bytes.
"""

from __future__ import annotations

import codecs
import re


def _lookup_codec(label: str | None) -> str | None:
    """Python codec name for a charset label, or None if unknown.

    Follows the WHATWG Encoding Standard in one respect that matters here: ``latin-1``/``iso-8859-1`` and
    ``ascii`` labels mean windows-1252, which is what browsers decode them as.
    """
    if not label:
        return None
    label = label.strip().strip("\"'").lower()
    if label in {"latin-1", "latin1", "iso-8859-1", "iso8859-1", "l1", "us-ascii", "ascii"}:
        return "cp1252"
    try:
        return codecs.lookup(label).name
    except LookupError:
        return None


_HEADER_CHARSET_RE = re.compile(r"charset\s*=\s*[\"']?([\w.:-]+)", re.IGNORECASE)
_META_CHARSET_RE = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?\s*([\w.:-]+)", re.IGNORECASE)
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
META_SNIFF_BYTES = 4096


def detect_charset(body: bytes, content_type: str | None) -> str:
    """The Python codec to decode ``body`` with; see ``decode_html`` for the order of precedence."""
    for bom, codec in _BOMS:
        if body.startswith(bom):
            return codec
    if content_type:
        match = _HEADER_CHARSET_RE.search(content_type)
        declared = _lookup_codec(match.group(1)) if match else None
        if declared:
            return declared
    meta = _META_CHARSET_RE.search(body[:META_SNIFF_BYTES])
    if meta:
        sniffed = _lookup_codec(meta.group(1).decode("ascii", "replace"))
        # A document that declares UTF-16 in ASCII-compatible bytes cannot be UTF-16 (HTML spec rule).
        if sniffed and not sniffed.startswith("utf-16"):
            return sniffed
    return "utf-8"


def decode_html(body: bytes, content_type: str | None) -> str:
    """Decode a served HTML body to text.

    Precedence, as browsers do it: a byte-order mark; the ``charset`` of the Content-Type header; a
    ``<meta charset>`` / ``<meta http-equiv="content-type">`` in the first 4 KiB; else UTF-8. The live site
    sends ``Content-Type: text/html`` without a charset while its bodies are UTF-8, so falling back to
    latin-1 (as some HTTP clients do) would turn "£" into "Â£"; we never do that.

    Undecodable bytes become U+FFFD (``errors="replace"``) instead of raising: a stray bad byte must not
    lose a whole page, and the replacement character is visible in stored text if it ever happens.
    NUL characters become U+FFFD too: PostgreSQL text cannot hold them (storing such a page failed on
    every attempt), and HTML parsers drop or replace them anyway.
    Unknown charset labels are ignored and the next source is tried.
    """
    return body.decode(detect_charset(body, content_type), errors="replace").replace("\x00", "\ufffd")
