"""The sandbox: a faithful, deterministic local replica of books.toscrape.com with fault injection.

Public surface::

    from book_assets.sandbox import Catalogue, Faults, SandboxServer

    with SandboxServer(seed=0, day=0, faults=Faults(error_rate=0.1)) as server:
        ...  # crawl server.url, then compare with server.catalogue.ground_truth()

    # From day 2 on the markup changes (classes, ids, the UPC's place, descriptions in some categories),
    # and one page in twenty is a 200 that is not the page:
    SandboxServer(redesign=Redesign(day=2), faults=Faults(soft_block_rate=0.05))
"""

from book_assets.sandbox.catalogue import (
    BOOK_COUNT,
    CATEGORY_COUNT,
    CATEGORY_SIZES,
    PAGE_SIZE,
    Book,
    Catalogue,
    Category,
)
from book_assets.sandbox.faults import Action, Decision, Faults
from book_assets.sandbox.fleet import SandboxFleet
from book_assets.sandbox.pages import Site
from book_assets.sandbox.redesign import Change, Markup, Redesign
from book_assets.sandbox.server import SandboxApp, SandboxServer, SandboxStats

__all__ = [
    "BOOK_COUNT",
    "CATEGORY_COUNT",
    "CATEGORY_SIZES",
    "PAGE_SIZE",
    "Action",
    "Book",
    "Catalogue",
    "Category",
    "Change",
    "Decision",
    "Faults",
    "Markup",
    "Redesign",
    "SandboxApp",
    "SandboxFleet",
    "SandboxServer",
    "SandboxStats",
    "Site",
]
