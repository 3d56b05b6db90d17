"""The site definitions by name: what ``--site`` (the ``site`` setting) picks from.

The sites shipped with the engine are listed (:data:`SITES`); any other package of :mod:`book_assets.sites`
with a ``definition`` module (what ``book-pipeline site new NAME`` writes) is a site too, found by its folder
and imported only when a crawl asks for it by name, so a half-written definition breaks only the crawls of its
own site, each with one line, and no edit of this module registers it.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import cast

import book_assets.sites
from book_assets.settings import ConfigError
from book_assets.sites.books import BOOKS
from book_assets.sites.quotes.definition import QUOTES
from book_assets.sites.site import Site

#: The sites shipped with the engine, by name.
SITES: Mapping[str, Site] = {site.name: site for site in (BOOKS, QUOTES)}
#: The module a discovered site's package declares it in, and the name it binds the definition to there.
DEFINITION_MODULE = "definition"
DEFINITION_NAME = "SITE"


def discovered() -> tuple[str, ...]:
    """The names of the packages of :mod:`book_assets.sites` beside the shipped ones that hold a definition
    module, sorted (read from their folders: nothing is imported)."""
    return tuple(
        sorted(
            folder.name
            for root in book_assets.sites.__path__
            for folder in Path(root).iterdir()
            if folder.name.isidentifier()
            and folder.name not in SITES
            and (folder / "__init__.py").is_file()
            and (folder / f"{DEFINITION_MODULE}.py").is_file()
        )
    )


def known() -> tuple[str, ...]:
    """Every site name ``--site`` accepts, sorted."""
    return tuple(sorted({*SITES, *discovered()}))


def site_named(name: str) -> Site:
    """The site definition called ``name``; a :class:`ConfigError` naming the known sites when there is none,
    or naming the definition's own failure when it does not load."""
    if name in SITES:
        return SITES[name]
    if name not in discovered():
        raise ConfigError(
            f"invalid setting site (BOOK_PIPELINE_SITE): no site named {name!r}; known: {', '.join(known())}"
        )
    module_name = f"book_assets.sites.{name}.{DEFINITION_MODULE}"
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigError(
            f"site {name}: its definition {module_name} does not load: {type(exc).__name__}: {exc}"
        ) from exc
    site = getattr(module, DEFINITION_NAME, None)
    if site is None or getattr(site, "name", None) != name:
        raise ConfigError(f"site {name}: {module_name} binds no {DEFINITION_NAME} whose name is {name!r}")
    return cast(Site, site)
