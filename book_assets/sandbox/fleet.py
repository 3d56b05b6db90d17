"""Many sandbox sites at once, one per port: a crawl of many domains on one machine.

The queue's politeness domain is a URL's host and port (``book_assets.queue.domain_of``), so K servers on K
ports of the loopback address are K domains, each with its own interval, robots.txt and removals. Host ``i``
of a fleet with seed ``s`` serves ``Catalogue(seed=s + i)`` with its share of the books, so the sites are
distinct, reproducible, and a fleet of one is exactly ``SandboxServer(seed=s)``.
"""

from __future__ import annotations

from types import TracebackType

from book_assets.sandbox.catalogue import BOOK_COUNT, CATEGORY_COUNT, Book, Catalogue
from book_assets.sandbox.faults import Faults
from book_assets.sandbox.redesign import Redesign
from book_assets.sandbox.server import SandboxServer


def host_sizes(books: int, hosts: int) -> list[int]:
    """Books per host: ``books`` split as evenly as possible, the first hosts taking the remainder."""
    if hosts < 1:
        raise ValueError("hosts must be >= 1")
    if books < hosts:
        raise ValueError(f"{books} books cannot fill {hosts} hosts: each needs at least one")
    share, extra = divmod(books, hosts)
    return [share + (1 if i < extra else 0) for i in range(hosts)]


class SandboxFleet:
    """``hosts`` sandbox servers in background threads, the ``books`` spread over them.

    Args:
        hosts: number of sites, each on its own port.
        books: day 0's books over all sites; ``categories`` is each site's number of categories.
        port: first port (site ``i`` on ``port + i``); 0 picks a free port for each.
        The rest as for ``SandboxServer``, the same for every site.
    """

    def __init__(
        self,
        hosts: int,
        *,
        seed: int = 0,
        day: int = 0,
        books: int = BOOK_COUNT,
        categories: int = CATEGORY_COUNT,
        faults: Faults | None = None,
        js_mode: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
        keepalive_timeout_s: float = 5.0,
        redesign: Redesign | None = None,
    ) -> None:
        self.servers = [
            SandboxServer(
                Catalogue(seed=seed + i, day=day, books=size, categories=categories),
                seed=seed + i,
                faults=faults,
                js_mode=js_mode,
                host=host,
                port=port + i if port else 0,
                keepalive_timeout_s=keepalive_timeout_s,
                redesign=redesign,
            )
            for i, size in enumerate(host_sizes(books, hosts))
        ]

    @property
    def urls(self) -> list[str]:
        """Each site's base URL, without a trailing slash, in host order."""
        return [server.url for server in self.servers]

    def __len__(self) -> int:
        return len(self.servers)

    def book_count(self) -> int:
        """Books served now over all sites."""
        return sum(len(server.catalogue) for server in self.servers)

    def ground_truth(self) -> dict[str, Book]:
        """Every served book keyed by its full URL: the expected record of a complete crawl of every site."""
        return {
            server.url + path: book for server in self.servers for path, book in server.catalogue.ground_truth().items()
        }

    def start(self) -> SandboxFleet:
        started: list[SandboxServer] = []
        try:
            for server in self.servers:
                started.append(server.start())
        except BaseException:
            for server in started:
                server.stop()
            raise
        return self

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

    def set_day(self, day: int) -> None:
        """Serve simulated day ``day`` on every site."""
        for server in self.servers:
            server.set_day(day)

    def reset_stats(self) -> None:
        for server in self.servers:
            server.reset_stats()

    def __enter__(self) -> SandboxFleet:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
