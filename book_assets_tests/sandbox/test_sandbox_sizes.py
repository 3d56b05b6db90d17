"""A catalogue of any size and a fleet of sites: the same markup, pagination, ground truth and days as the
replica, the replica itself unchanged by default, and pages rendered on demand within a bounded cache."""

from __future__ import annotations

import hashlib
import re
import signal
import subprocess
import sys
from posixpath import join, normpath
from urllib.parse import urljoin

import httpx
import pytest
from click.testing import CliRunner
from selectolax.lexbor import LexborHTMLParser

from book_assets.sandbox import BOOK_COUNT, CATEGORY_SIZES, Catalogue, Site
from book_assets.sandbox.catalogue import category_plan
from book_assets.sandbox.cli import sandbox
from book_assets.sandbox.fleet import SandboxFleet, host_sizes
from book_assets.sandbox.pages import DAY_BEFORE_CACHE_SIZE
from book_assets.sandbox.testing import SandboxFactory

#: Fingerprints of the default replica (seed 0) taken before catalogues could be sized: its books,
#: categories and changes, and every page's bytes, ETag and day of last change.
DEFAULT_FINGERPRINTS = {
    0: ("5c4f2276561b0418", "94cd83f189ad2443"),
    1: ("16f0c0251c7cb043", "5305a5cc472fe8c5"),
    3: ("47ba182121d42272", "662c13af5a94c3e3"),
}


def _fingerprint(catalogue: Catalogue, site: Site) -> tuple[str, str]:
    changes = (sorted(catalogue.added_ids), sorted(catalogue.removed_ids), sorted(catalogue.changed_ids))
    records = hashlib.sha256(
        repr([b.to_record() for b in catalogue]).encode() + repr(catalogue.categories).encode() + repr(changes).encode()
    )
    pages = hashlib.sha256()
    for path in catalogue.listing_paths() + sorted(catalogue.ground_truth()):
        body, etag = site.get(path), site.etag(path)
        assert body is not None and etag is not None
        pages.update(path.encode() + body + etag.encode() + str(site.changed_on(path)).encode())
    return records.hexdigest()[:16], pages.hexdigest()[:16]


@pytest.mark.parametrize("day", sorted(DEFAULT_FINGERPRINTS))
def test_the_default_catalogue_and_its_pages_are_the_replica_unchanged(day: int) -> None:
    catalogue = Catalogue(seed=0, day=day)
    assert _fingerprint(catalogue, Site(catalogue)) == DEFAULT_FINGERPRINTS[day]
    explicit = Catalogue(seed=0, day=day, books=BOOK_COUNT, categories=len(CATEGORY_SIZES))
    assert [b.to_record() for b in explicit] == [b.to_record() for b in catalogue]


def test_categories_beyond_the_live_fifty_are_named_after_them_and_sizes_sum_to_the_books() -> None:
    plan = category_plan(2345, 73)
    names = [name for name, _ in plan]
    assert names[:50] == [name for name, _ in CATEGORY_SIZES]
    assert names[50:53] == ["Travel 2", "Mystery 2", "Historical Fiction 2"]
    assert len(set(names)) == 73 and sum(size for _, size in plan) == 2345
    assert min(size for _, size in plan) >= 1
    assert category_plan(BOOK_COUNT, 50) == list(CATEGORY_SIZES)
    assert sum(size for _, size in category_plan(100_000, 50)) == 100_000
    assert sum(size for _, size in category_plan(10, 40)) == 10  # fewer books than categories: some empty
    with pytest.raises(ValueError, match="at least one book"):
        category_plan(0, 5)


def _links(body: bytes, selector: str) -> list[str]:
    return [str(node.attributes["href"]) for node in LexborHTMLParser(body).css(selector)]


def test_a_sized_catalogue_serves_exactly_its_books_through_its_listings_and_pagination() -> None:
    catalogue = Catalogue(seed=4, books=2345, categories=73)
    site = Site(catalogue)
    assert len(catalogue) == 2345 and sorted(b.id for b in catalogue) == list(range(1, 2346))
    assert [c.id for c in catalogue.categories] == list(range(2, 75))
    assert len({c.key for c in catalogue.categories}) == 73
    assert catalogue.page_count == 118

    def walk(first: str) -> tuple[list[str], list[str]]:
        """Follow a listing's ``next`` links from its first page: the pages and the book paths they link."""
        pages, books, path = [first], [], first
        while True:
            body = site.get(path)
            assert body is not None, path
            books += [normpath(join(path.rsplit("/", 1)[0], h)) for h in _links(body, "article.product_pod h3 a")]
            following = _links(body, "li.next a")
            if not following:
                return pages, books
            path = normpath(join(path.rsplit("/", 1)[0], following[0]))
            pages.append(path)

    pages, books = walk("/catalogue/page-1.html")
    assert len(pages) == catalogue.page_count and books == [b.url_path for b in catalogue.books]
    assert f"Page {catalogue.page_count} of {catalogue.page_count}".encode() in (site.get(pages[-1]) or b"")
    by_category: list[str] = []
    for category in catalogue.categories:
        pages, books = walk(category.url_path)
        assert len(pages) == max(1, -(-category.size // 20))
        assert books == [b.url_path for b in catalogue.books_in(category)]
        by_category += books
    assert sorted(by_category) == sorted(catalogue.ground_truth())
    sidebar = _links(site.get("/index.html") or b"", "div.side_categories ul ul a")
    assert [normpath("/" + h) for h in sidebar] == [c.url_path for c in catalogue.categories]
    for path, book in list(catalogue.ground_truth().items())[::97]:
        page = LexborHTMLParser(site.get(path) or b"")
        queries = ("div.product_main h1", "table.table-striped td", "ul.breadcrumb li:nth-child(3) a")
        nodes = [page.css_first(query) for query in queries]
        assert [node.text() if node else None for node in nodes] == [book.title, book.upc, book.category]
    assert site.get(f"/catalogue/page-{catalogue.page_count + 1}.html") is None


def test_days_of_a_sized_catalogue_are_reproducible_and_scale_their_changes() -> None:
    day2 = Catalogue(seed=4, day=2, books=5000, categories=60)
    again = Catalogue(seed=4, day=2, books=5000, categories=60)
    assert [b.to_record() for b in day2] == [b.to_record() for b in again]
    assert 20 <= len(day2.added_ids) <= 30 and 20 <= len(day2.removed_ids) <= 30  # 10 to 15 a day per 5,000
    assert len(day2.changed_ids) > 400
    assert min(day2.added_ids) == 5001
    day1 = day2.day_before()
    assert [b.to_record() for b in day1] == [b.to_record() for b in Catalogue(seed=4, day=1, books=5000, categories=60)]
    unchanged = next(b for b in day2 if b.id not in day2.changed_ids and b.id not in day2.added_ids)
    assert day1.book_by_id(unchanged.id) is unchanged  # the days before share the books they did not change


def test_a_book_pages_day_of_last_change_is_the_first_day_of_its_run_of_identical_bytes() -> None:
    days = [Site(Catalogue(seed=7, day=d, books=400, categories=12)) for d in range(4)]
    today = days[-1]
    for path in today.catalogue.ground_truth():
        expected = 3
        while expected > 0 and days[expected - 1].get(path) == today.get(path):
            expected -= 1
        assert today.changed_on(path) == expected, path


def test_the_page_cache_is_bounded_and_validators_stay_those_of_an_unbounded_one() -> None:
    catalogue = Catalogue(seed=7, day=2, books=400, categories=12)
    small, large = Site(catalogue, cache_size=10), Site(catalogue, cache_size=10_000)
    paths = catalogue.listing_paths() + sorted(catalogue.ground_truth())
    for path in paths + paths[:50]:
        assert (small.get(path), small.etag(path), small.changed_on(path)) == (
            large.get(path),
            large.etag(path),
            large.changed_on(path),
        )
    assert small.cached_pages == 10
    assert small.day_before().cached_pages <= DAY_BEFORE_CACHE_SIZE
    with pytest.raises(ValueError, match="cache_size"):
        Site(catalogue, cache_size=0)


def test_a_sized_server_keeps_its_size_from_day_to_day(sandbox_factory: SandboxFactory) -> None:
    server = sandbox_factory(books=1500, categories=60, seed=2)
    index = httpx.get(server.url_for("/index.html"))
    assert "<strong>1500</strong> results" in index.text
    day = httpx.post(server.url_for("/__sandbox__/day")).json()
    assert day["day"] == 1 and 1495 <= day["books"] <= 1505
    assert server.catalogue.size == 1500 and len(server.catalogue.categories) == 60
    assert server.app.site._day_before is None  # the previous day's site was not kept


def test_a_fleet_serves_distinct_catalogues_on_distinct_ports() -> None:
    assert host_sizes(10, 3) == [4, 3, 3]
    with SandboxFleet(3, seed=5, books=301, categories=8) as fleet:
        assert len(set(fleet.urls)) == 3 and len({s.port for s in fleet.servers}) == 3
        assert [len(s.catalogue) for s in fleet.servers] == [101, 100, 100] and fleet.book_count() == 301
        assert [s.catalogue.seed for s in fleet.servers] == [5, 6, 7]
        truth = fleet.ground_truth()
        assert len(truth) == 301
        titles = []
        for server in fleet.servers:
            response = httpx.get(server.url_for("/index.html"))
            assert f"<strong>{len(server.catalogue)}</strong> results" in response.text
            titles.append({b.title for b in server.catalogue})
            book = server.catalogue.books[0]
            page = httpx.get(urljoin(server.url + "/", book.url_path.lstrip("/")))
            assert page.status_code == 200 and truth[server.url + book.url_path] is book
        assert titles[0] != titles[1] != titles[2]
        fleet.set_day(1)
        assert {s.catalogue.day for s in fleet.servers} == {1}
    with pytest.raises(ValueError, match="cannot fill"):
        SandboxFleet(4, books=3)


def test_serve_with_hosts_prints_every_url_and_each_serves_its_own_site() -> None:
    command = [sys.executable, "-m", "book_assets.sandbox.cli", "serve", "--port", "0", "--hosts", "3"]
    command += ["--books", "90", "--categories", "5"]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        lines = [child.stdout.readline() for _ in range(3)]
        urls = [m.group(1) for line in lines if (m := re.search(r"(http://127\.0\.0\.1:\d+)/", line))]
        assert len(set(urls)) == 3, lines
        for url in urls:
            assert "<strong>30</strong> results" in httpx.get(url + "/index.html", timeout=5).text
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=10) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_more_hosts_than_books_is_a_usage_error() -> None:
    result = CliRunner().invoke(sandbox, ["serve", "--books", "2", "--hosts", "3"])
    assert result.exit_code == 2 and "cannot fill --hosts 3" in result.output
