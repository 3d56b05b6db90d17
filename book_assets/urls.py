"""Canonical URLs: one spelling per resource, so one URL is one task and one book.

``HTTP://Books.ToScrape.com:80/a/../b.html#reviews`` and ``http://books.toscrape.com/b.html`` name the same
page; without a canonical form they pass the queue's one-live-task-per-URL index and ``books.url UNIQUE``
as two. The rules are RFC 3986's syntax-based normalisation (section 6.2.2) plus its scheme-based one
(6.2.3) for http(s): scheme and host lower-cased, a trailing dot dropped from the host, the default port
dropped, dot segments removed, an empty path made ``/``, and the fragment dropped (it never reaches the
server). Query strings are kept as written: their order and encoding can matter to a site.
"""

from __future__ import annotations

import functools
from urllib.parse import urlsplit, urlunsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}


def canonical_url(url: str) -> str:
    """The canonical spelling of an http(s) URL (see the module docstring).

    Raises:
        ValueError: the URL cannot be parsed (a malformed host or port).
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    netloc = _canonical_netloc(scheme, parts.netloc)
    path = _remove_dot_segments(parts.path) or "/"
    return urlunsplit((scheme, netloc, path, parts.query, ""))


@functools.lru_cache(maxsize=4096)
def _canonical_netloc(scheme: str, netloc: str) -> str:
    # A crawl repeats a handful of origins thousands of times: parse each once.
    parts = urlsplit(f"{scheme}://{netloc}/")
    host = (parts.hostname or "").rstrip(".")
    port = parts.port  # raises ValueError on a malformed or out-of-range port
    if ":" in host:
        host = f"[{host}]"
    userinfo, _, _ = netloc.rpartition("@")
    prefix = f"{userinfo}@" if "@" in netloc else ""
    suffix = f":{port}" if port is not None and port != _DEFAULT_PORTS.get(scheme) else ""
    return f"{prefix}{host}{suffix}"


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
