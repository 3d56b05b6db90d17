"""Pytest fixtures for the sandbox; register with ``pytest_plugins = ["book_assets.sandbox.testing"]``.

- ``sandbox``: one fault-free server (seed 0, day 0) shared by the whole session. Tests that read its stats
  should call ``sandbox.reset_stats()`` first, since other tests hit it too.
- ``sandbox_factory``: builds servers with faults (soft blocks among them), another seed, day or size, a
  redesign, or JavaScript mode; each is started on a free port and stopped when the test ends, so no server
  outlives its test.
- ``quotes_site``: the quotes.toscrape.com stand-in (``book_assets.sandbox.quotes``), one for the session: its
  pages have no state a test can change. Flask is imported only by the tests that ask for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from book_assets.sandbox.catalogue import BOOK_COUNT, CATEGORY_COUNT, Catalogue
from book_assets.sandbox.faults import Faults
from book_assets.sandbox.redesign import Redesign
from book_assets.sandbox.server import SandboxServer

if TYPE_CHECKING:
    from book_assets.sandbox.quotes.server import QuotesServer

SandboxFactory = Callable[..., SandboxServer]


@pytest.fixture(scope="session")
def sandbox() -> Iterator[SandboxServer]:
    with SandboxServer() as server:
        yield server


@pytest.fixture(scope="session")
def quotes_site() -> Iterator[QuotesServer]:
    from book_assets.sandbox.quotes.server import QuotesServer

    with QuotesServer() as server:
        yield server


@pytest.fixture
def sandbox_factory() -> Iterator[SandboxFactory]:
    servers: list[SandboxServer] = []

    def make(
        *,
        faults: Faults | None = None,
        seed: int = 0,
        day: int = 0,
        books: int = BOOK_COUNT,
        categories: int = CATEGORY_COUNT,
        js_mode: bool = False,
        catalogue: Catalogue | None = None,
        keepalive_timeout_s: float = 5.0,
        redesign: Redesign | None = None,
    ) -> SandboxServer:
        server = SandboxServer(
            catalogue,
            seed=seed,
            day=day,
            books=books,
            categories=categories,
            faults=faults,
            js_mode=js_mode,
            keepalive_timeout_s=keepalive_timeout_s,
            redesign=redesign,
        )
        servers.append(server)
        return server.start()

    yield make
    for server in servers:
        server.stop()
