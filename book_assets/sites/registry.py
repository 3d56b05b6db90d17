"""The site definitions by name: what ``--site`` (the ``site`` setting) picks from."""

from __future__ import annotations

from collections.abc import Mapping

from book_assets.settings import ConfigError
from book_assets.sites.books import BOOKS
from book_assets.sites.quotes.definition import QUOTES
from book_assets.sites.site import Site

#: Every site a crawl can be run on, by name.
SITES: Mapping[str, Site] = {site.name: site for site in (BOOKS, QUOTES)}


def site_named(name: str) -> Site:
    """The site definition called ``name``; a :class:`ConfigError` naming the known sites when there is none."""
    try:
        return SITES[name]
    except KeyError:
        raise ConfigError(
            f"invalid setting site (BOOK_PIPELINE_SITE): no site named {name!r}; known: {', '.join(sorted(SITES))}"
        ) from None
