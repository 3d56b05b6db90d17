"""Workers on several hosts share one queue and one politeness budget: proven on network-namespace hosts.

Two hosts (network namespaces, each its own address) run ``book-pipeline work`` against the sandbox and a
PostgreSQL served in the root namespace on the bridge. With the domain's interval binding (the hosts could
fetch four times faster), every book is stored once and fetched once, nothing is left pending, both hosts
did part of the work, and the request starts the site saw stay an interval apart across the hosts (from each
host's second request on: see ``HostRun.warm_spacings``). Speed is measured by ``benchmarks/scale_bench.py``,
never asserted here.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from book_assets.categories import slugify
from book_assets.sandbox.catalogue import Catalogue
from book_assets.sandbox.faults import Faults
from book_assets_tests.scale.hosts import (
    NamespaceHosts,
    PostgresOnAddress,
    postgres_unavailable_reason,
    unavailable_reason,
)
from book_assets_tests.scale.multihost import HostSandbox, run_on_hosts

pytestmark = pytest.mark.slow

CATEGORIES = ("Fantasy", "Romance", "Mystery")
INTERVAL_S = 0.1
#: How much closer than the interval two request starts may reach the site: the queue's slot tolerance
#: (5 ms) plus the time between a worker's start and the site reading the request head, which a loaded
#: machine stretches. Two hosts on one slot would arrive ~0 apart, a host on its own clock a skew apart.
SLACK_S = INTERVAL_S / 4


@pytest.fixture(scope="module")
def two_hosts() -> Iterator[tuple[NamespaceHosts, PostgresOnAddress]]:
    reason = unavailable_reason() or postgres_unavailable_reason()
    if reason:
        pytest.skip(f"namespace hosts unavailable: {reason}")
    with NamespaceHosts(2) as net, PostgresOnAddress(net.gateway, allow=f"{net.gateway}/24") as postgres:
        yield net, postgres


def test_two_hosts_share_the_queue_and_the_domain_interval(two_hosts: tuple[NamespaceHosts, PostgresOnAddress]) -> None:
    net, postgres = two_hosts
    catalogue = Catalogue()
    expected = {b.key for b in catalogue if b.category in CATEGORIES}
    with HostSandbox(catalogue, host=net.gateway, faults=Faults(latency_s=0.05)) as sandbox:
        run = run_on_hosts(
            net.hosts,
            postgres,
            sandbox,
            {
                "fetch_mode": "http",
                "concurrency": 4,
                "min_interval_s": INTERVAL_S,
                "categories": tuple(slugify(c) for c in CATEGORIES),
            },
            database="two_hosts",
            timeout_s=180,
        )
    details = {path: n for path, n in run.hits.items() if "/catalogue/" in path and "/category/" not in path}
    assert run.outstanding == 0 and run.failed == 0
    assert run.counts["total"] == run.counts["unique_urls"] == run.counts["versions"] == len(expected)
    assert len(details) == len(expected) and set(details.values()) == {1}, "a book fetched twice or never"
    assert sorted(run.requests_by_host) == sorted(h.address for h in net.hosts), "a host sent no request"
    assert run.pages_by_host == [run.requests_by_host[h.address] for h in net.hosts]  # each stopped cleanly
    assert run.min_warm_spacing_s >= INTERVAL_S - SLACK_S, sorted(run.warm_spacings)[:5]
