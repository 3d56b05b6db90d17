"""Workers on several hosts share one queue and one politeness budget: proven on network-namespace hosts.

Two hosts (network namespaces, each its own address) run ``book-pipeline work`` against the sandbox and a
PostgreSQL served in the root namespace on the bridge. With the domain's interval binding (the hosts could
fetch four times faster), every book is stored once and fetched once, nothing is left pending, both hosts
did part of the work, the database handed the domain's slots out an interval apart across the hosts, and no
request reached the site before its slot. How close two starts come at the site also holds each worker's
delay between its slot and the wire, which a busy machine stretches: ``benchmarks/scale_bench.py`` measures
that spacing (``min_warm_spacing_s``) and the speed, never asserted here.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from book_assets.categories import slugify
from book_assets.sandbox.catalogue import Catalogue
from book_assets.sandbox.faults import Faults
from book_assets_tests.scale.hosts import NamespaceHosts, PostgresOnAddress, unavailable_reason
from book_assets_tests.scale.multihost import HostSandbox, run_on_hosts

pytestmark = pytest.mark.slow

CATEGORIES = ("Fantasy", "Romance", "Mystery")
INTERVAL_S = 0.1
#: How far before its slot a request may reach the site: the site's timestamp and the slot are readings of
#: one clock, and a worker waits for the latest moment its slot can be (``DatabaseClock.due``). A worker
#: that started on claiming would arrive up to its claim horizon early; two hosts on one slot, an interval.
EARLY_S = 0.005


@pytest.fixture(scope="module")
def two_hosts() -> Iterator[tuple[NamespaceHosts, PostgresOnAddress]]:
    reason = unavailable_reason()
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
    assert {path for _, path in run.paths} == set(run.slots), "a page fetched without a slot, or never"
    assert min(run.slot_gaps) >= INTERVAL_S - 0.001, sorted(run.slot_gaps)[:5]
    assert run.early_starts(EARLY_S) == {}, "requests that reached the site before their slot (s early)"
