"""Canonical URLs: one spelling per resource, so one URL is one task and one book.

``HTTP://Books.ToScrape.com:80/a/../b.html#reviews``, ``http://books.toscrape.com/%62.html`` and
``http://books.toscrape.com/b.html`` name the same page; without a canonical form they pass the queue's
one-live-task-per-URL index and ``books.url UNIQUE`` as separate rows. :func:`canonical_url` applies RFC 3986's
syntax-based normalisation (section 6.2.2) and its scheme-based one (6.2.3) for http(s):

* scheme and host lower-cased, a trailing dot dropped from the host, the default port dropped (a non-ASCII
  host is kept as written: ``allowed_domains`` and the fetchers' guards compare hosts as written);
* percent-encoding normalised in the userinfo, path and query (6.2.2.1, 6.2.2.2): hex digits upper-cased, an
  encoded unreserved character (``%7E``, ``%41``) decoded, and every character a URI cannot hold as it is
  (non-ASCII, a space, ``"<>\\^`{|}``, controls) encoded as the percent-encoded bytes of its UTF-8 (section
  2.5; how browsers send a non-ASCII path); a ``%`` that starts no escape is kept as written;
* dot segments removed (after the decoding, so ``%2E%2E`` is ``..``), an empty path made ``/``;
* the fragment dropped (it never reaches the server).

Reserved characters keep their spelling (``%2F`` is not ``/``), and the query keeps its order: both can
matter to a site. Dropping query parameters (tracking tags) is a crawl's choice, not an equivalence:
:func:`without_query_params` applies the ``drop_query_params`` setting where the crawl discovers links.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Sequence
from urllib.parse import unquote, urlsplit, urlunsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
#: What a component may hold as written: unreserved and reserved characters (RFC 3986 section 2) and ``%``.
_AS_WRITTEN = _UNRESERVED | frozenset(":/?#[]@!$&'()*+,;=%")
#: A component that needs no percent-encoding work: no escape, nothing outside :data:`_AS_WRITTEN`.
_NEEDS_WORK = re.compile(r"%|[^A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]")
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


def canonical_url(url: str) -> str:
    """The canonical spelling of an http(s) URL (see the module docstring).

    Raises:
        ValueError: the URL cannot be parsed (a malformed host or port).
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    netloc = _canonical_netloc(scheme, parts.netloc)
    path = _remove_dot_segments(_normalise_percent(parts.path)) or "/"
    return urlunsplit((scheme, netloc, path, _normalise_percent(parts.query), ""))


def without_query_params(url: str, patterns: Sequence[str]) -> str:
    """``url`` without the query parameters whose names match one of ``patterns`` (pure).

    A pattern is a shell-style glob matched against the parameter's decoded name, case-insensitively
    (``utm_*`` matches ``utm_source`` and ``UTM_Medium``; ``fbclid`` only ``fbclid``), on every site; one
    written ``HOST:NAME`` applies on the hosts matching the glob ``HOST`` only (``*.example.com:sid``). The
    other parameters keep their order and spelling; a query left empty is dropped with its ``?``. The
    fragment is kept.
    """
    parts = urlsplit(url)
    if not parts.query or not patterns:
        return url
    host = (parts.hostname or "").rstrip(".")
    names = [_site_pattern(p, host) for p in patterns]
    here = [name for name in names if name is not None]
    kept = [pair for pair in parts.query.split("&") if not _matches(_param_name(pair), here)]
    if len(kept) == len(parts.query.split("&")):
        return url
    return urlunsplit(parts._replace(query="&".join(kept)))


def _site_pattern(pattern: str, host: str) -> str | None:
    """The name pattern of ``pattern`` when it applies on ``host``; None when it is another site's."""
    site, colon, name = pattern.rpartition(":")
    if not colon:
        return pattern
    return name if fnmatch.fnmatchcase(host, site.lower()) else None


def _param_name(pair: str) -> str:
    return unquote(pair.partition("=")[0].replace("+", " ")).lower()


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern.lower()) for pattern in patterns)


@functools.lru_cache(maxsize=4096)
def _canonical_netloc(scheme: str, netloc: str) -> str:
    # A crawl repeats a handful of origins thousands of times: parse each once.
    parts = urlsplit(f"{scheme}://{netloc}/")
    host = (parts.hostname or "").rstrip(".")
    port = parts.port  # raises ValueError on a malformed or out-of-range port
    if ":" in host:
        host = f"[{host}]"
    userinfo, _, _ = netloc.rpartition("@")
    prefix = f"{_normalise_percent(userinfo)}@" if "@" in netloc else ""
    suffix = f":{port}" if port is not None and port != _DEFAULT_PORTS.get(scheme) else ""
    return f"{prefix}{host}{suffix}"


def _normalise_percent(component: str) -> str:
    """RFC 3986 sections 6.2.2.1 and 6.2.2.2 on one component (see the module docstring)."""
    if _NEEDS_WORK.search(component) is None:
        return component
    out: list[str] = []
    i = 0
    while i < len(component):
        char = component[i]
        if char == "%" and _ESCAPE.match(component, i):
            decoded = chr(int(component[i + 1 : i + 3], 16))
            out.append(decoded if decoded in _UNRESERVED else component[i : i + 3].upper())
            i += 3
            continue
        if char in _AS_WRITTEN:
            out.append(char)
        else:
            # surrogatepass: a lone surrogate (never valid text) still gets one spelling instead of an error.
            out.append("".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass")))
        i += 1
    return "".join(out)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4 for an absolute path; paths without dot segments come back unchanged."""
    if "." not in path:
        return path
    segments = path.split("/")
    out: list[str] = []
    for segment in segments[1:] if path.startswith("/") else segments:
        if segment == ".":
            continue
        if segment == "..":
            if out:
                out.pop()
            continue
        out.append(segment)
    if segments[-1] in (".", ".."):
        out.append("")  # "/a/b/.." names the folder "/a/"
    return "/" + "/".join(out)
