"""What the browser refuses to load, as URL patterns Chromium matches itself (CDP ``Network.setBlockedURLs``).

Why patterns and not a request handler: Playwright's request routing pauses every request and asks Python
whether to continue it, a Python ↔ Node ↔ Chromium round trip per subresource. A bare
Playwright loop over sandbox book pages runs about twice as fast with the same blocking done inside
Chromium as with a Python route handler (``benchmarks/browser_bench.py``; ``docs/benchmarks.md``). So resource
types become file-extension patterns and the ``block_url_patterns`` regexes are translated to Chromium's
wildcard patterns (``*`` matches any run of characters, the pattern must match the whole URL).

Only a small regex subset translates exactly: literal text, escaped characters (``\\.``), ``x?`` and
non-nested ``(a|b)`` groups. Anything else (``.``, ``*``, ``+``, classes, anchors) is refused with a
``ValueError`` naming the setting, rather than blocked approximately.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

#: File extensions per Playwright resource type (the ones ``block_resource_types`` can name).
RESOURCE_TYPE_EXTENSIONS: dict[str, tuple[str, ...]] = {
    "image": ("jpg", "jpeg", "png", "gif", "webp", "avif", "svg", "ico", "bmp"),
    "stylesheet": ("css",),
    "font": ("woff", "woff2", "ttf", "otf", "eot"),
    "media": ("mp4", "webm", "ogg", "ogv", "mp3", "wav", "m4a", "mov", "flac"),
}
#: Internal IPv6 literals, refused inside Chromium when no allowed hosts are set: the resolver rules of
#: ``fetch_browser.host_resolver_rules`` cover IPv4 literals and localhost names, not bracketed IPv6.
INTERNAL_IPV6_PATTERNS: tuple[str, ...] = ("*://[::1]*", "*://[fc*", "*://[fd*", "*://[fe80:*", "*://[::ffff:*")
_SPECIAL = set(".^$*+[]{}\\")


def resource_type_patterns(resource_types: Iterable[str]) -> list[str]:
    """Wildcard patterns for ``resource_types`` (with or without a query string); unknown types raise."""
    patterns: list[str] = []
    for resource_type in sorted(resource_types):
        if resource_type not in RESOURCE_TYPE_EXTENSIONS:
            known = ", ".join(sorted(RESOURCE_TYPE_EXTENSIONS))
            raise ValueError(f"block_resource_types: {resource_type!r} cannot be blocked inside Chromium ({known})")
        for ext in RESOURCE_TYPE_EXTENSIONS[resource_type]:
            patterns += [f"*.{ext}", f"*.{ext}?*"]
    return patterns


def regex_to_patterns(regex: str) -> list[str]:
    """Chromium wildcard patterns matching exactly the URLs in which ``regex`` is found (``re.search``).

    Raises:
        ValueError: ``regex`` uses more than literal text, escapes, ``?`` and ``(a|b)`` groups.
    """
    pieces: list[list[str]] = []  # each piece: the alternatives for one position
    i = 0
    while i < len(regex):
        char = regex[i]
        if char == "\\" and i + 1 < len(regex) and not regex[i + 1].isalnum():
            pieces.append([regex[i + 1]])
            i += 2
        elif char == "(":
            end = regex.find(")", i)
            body = regex[i + 1 : end].removeprefix("?:") if end > 0 else ""
            if end < 0 or not body or any(c in _SPECIAL or c in "()?" for c in body.replace("|", "")):
                raise _untranslatable(regex)
            pieces.append(body.split("|"))
            i = end + 1
        elif char == "?" and pieces:
            pieces[-1] = [*pieces[-1], ""]
            i += 1
        elif char in _SPECIAL or char in "()|?":
            raise _untranslatable(regex)
        else:
            pieces.append([char])
            i += 1
    if not pieces:
        raise _untranslatable(regex)
    return sorted({"*" + "".join(combo) + "*" for combo in itertools.product(*pieces)})


def _untranslatable(regex: str) -> ValueError:
    return ValueError(
        f"block_url_patterns: {regex!r} cannot be matched inside Chromium; use literal text, \\., x? and (a|b)"
    )


def blocked_url_patterns(
    resource_types: Iterable[str], url_regexes: Iterable[str], *, internal_ipv6: bool = False
) -> list[str]:
    """Every pattern the browser hands Chromium: resource types, URL regexes, internal IPv6 literals."""
    patterns = resource_type_patterns(resource_types)
    for regex in url_regexes:
        patterns += regex_to_patterns(regex)
    if internal_ipv6:
        patterns += INTERNAL_IPV6_PATTERNS
    return list(dict.fromkeys(patterns))
