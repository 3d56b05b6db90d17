"""A new catalogue's starting point: ``book-pipeline site new NAME`` writes a site definition package and its
tests from the templates beside this module (``templates/*.tmpl``, :class:`string.Template`).

What it writes type-checks and imports as it stands, and its test fails, naming what to fill (the selectors,
the record's fields, the recorded pages), until the ``TODO(NAME)`` marks are done. The registry finds the new
package by its folder (:func:`book_assets.sites.registry.discovered`), so ``--site NAME`` reaches it once written.
"""

from __future__ import annotations

import keyword
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from book_assets.settings import ConfigError

if TYPE_CHECKING:
    from book_assets.sites.scaffold.record import Recorded

TEMPLATES = Path(__file__).parent / "templates"
#: Names a new site cannot take: the modules of ``book_assets.sites`` that are not sites.
RESERVED = frozenset({"site", "registry", "scaffold", "generic"})
#: The start page a definition is written with when ``site new`` is given none: a TODO of its own.
PLACEHOLDER_URL = "https://example.com/"
#: Characters a URL written into a generated module's string literal may not hold.
URL_UNSAFE = frozenset("\"\\'")


@dataclass(frozen=True)
class Planned:
    """One file to write: where (relative to the project root) and from which template."""

    path: Path
    template: str


def plan(name: str) -> tuple[Planned, ...]:
    """The files a site called ``name`` starts with."""
    package = Path("book_assets", "sites", name)
    tests = Path("book_assets_tests", "sites", name)
    return (
        Planned(package / "__init__.py", "site_init.py.tmpl"),
        Planned(package / "definition.py", "definition.py.tmpl"),
        Planned(tests / "__init__.py", "tests_init.py.tmpl"),
        Planned(tests / f"test_{name}_parsers_unit.py", "test_parsers_unit.py.tmpl"),
        Planned(tests / "pages" / "README.md", "pages_README.md.tmpl"),
    )


def refusal(name: str, into: Path, known: tuple[str, ...]) -> str | None:
    """Why ``name`` cannot be a new site in project ``into`` (one line), or None when it can."""
    if not (name.isascii() and name.isidentifier() and name[0].isalpha() and name.islower()) or keyword.iskeyword(name):
        return f"site name {name!r} is not a lowercase Python identifier (letters, digits, _; not a keyword)"
    if name in RESERVED or name in known:
        return f"site name {name!r} is taken (known sites: {', '.join(known)})"
    taken = [str(p.path.parent) for p in plan(name) if (into / p.path.parent).exists()]
    if taken:
        return f"site {name!r} already exists: {taken[0]} is there in {into}"
    return None


def url_refusal(url: str) -> str | None:
    """Why ``url`` cannot be written into a definition as its start page (one line), or None when it can: an
    http(s) URL with a host, of characters that need no escape in a Python string."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{url!r} is not an http(s) URL"
    if any(c in URL_UNSAFE or not c.isprintable() or c.isspace() for c in url):
        return f"{url!r} holds a quote, a backslash, a blank or a control character: percent-encode it"
    return None


def check(name: str, into: Path, known: tuple[str, ...], start_url: str) -> None:
    """Raise :class:`ConfigError` (one line) when ``name`` cannot be a new site in project ``into``, or
    ``start_url`` its start page."""
    why = refusal(name, into, known)
    if why is not None:
        raise ConfigError(why)
    why = url_refusal(start_url)
    if why is not None:
        raise ConfigError(f"--base-url {why}")


def scaffold(
    name: str, into: Path, start_url: str, known: tuple[str, ...], pages: Sequence[Recorded] = ()
) -> tuple[Path, ...]:
    """Write site ``name``'s package and tests into project ``into``, with ``pages`` recorded in its fixture
    folder (the test reads them from the URLs they were served from); the files written.

    Raises :class:`ConfigError` (one line, nothing written) for a name that is no identifier or is taken.
    """
    check(name, into, known, start_url)
    for page in pages:
        why = url_refusal(page.url)
        if why is not None:
            raise ConfigError(f"--record {why}")
    served = {page.file: page.url for page in pages}
    values = {
        "name": name,
        "Name": "".join(part.capitalize() for part in name.split("_")),
        "base_url": start_url,
        "listing_url": served.get("listing.html", start_url),
        "detail_url": served.get("detail.html", start_url),
    }
    rendered = [
        (into / p.path, Template((TEMPLATES / p.template).read_text(encoding="utf-8")).substitute(values))
        for p in plan(name)
    ]
    fixtures = into / "book_assets_tests" / "sites" / name / "pages"
    rendered += [(fixtures / page.file, page.html) for page in pages]
    for path, text in rendered:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tuple(path for path, _ in rendered)
