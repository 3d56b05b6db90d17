"""The change feed per day against the sandbox's simulated days, and removals decided only from whole listings.

A crawl "yesterday" is a crawl whose recorded times are moved back one day (:func:`as_yesterday`), so two
crawls a few seconds apart make two days of the feed. Day 1 of the sandbox (seed 0) removes book 557
(Nonfiction, on the category's third page) and book 730 ("Add a comment", first page); both categories have
several listing pages.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

from book_assets.cli import main
from book_assets.crawl.config import CrawlConfig
from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets.publish.changes import changes_of_day
from book_assets.sandbox.catalogue import Catalogue
from book_assets.sandbox.faults import Faults
from book_assets_tests.crawl.conftest import sandbox_config

DAY0, DAY1 = Catalogue(seed=0, day=0), Catalogue(seed=0, day=1)
NONFICTION_BOOK, COMMENT_BOOK = 557, 730
NONFICTION_PAGE_3 = "/catalogue/category/books/nonfiction_13/page-3.html"
#: The two categories of day 1's removals: crawled alone, a partial crawl's tests stay fast.
BOTH = ("Add a comment", "Nonfiction")
#: Every kind of change day 1 makes: its two removals, its three new books (Health, Religion) and 10 of its 50
#: changed books, in 188 books instead of 1000.
FEED = (*BOTH, "Health", "Religion")

pytestmark = pytest.mark.slow


def as_yesterday(db: Database) -> None:
    """Move every recorded time of the change feed back one day."""
    for sql in (
        "UPDATE book_versions SET recorded_at = recorded_at - interval '1 day'",
        "UPDATE book_presence SET at = at - interval '1 day'",
        "UPDATE listing_pages SET listed_at = listed_at - interval '1 day'",
        "UPDATE crawls SET started_at = started_at - interval '1 day', finished_at = finished_at - interval '1 day'",
        "UPDATE books SET removed_at = removed_at - interval '1 day' WHERE removed_at IS NOT NULL",
    ):
        db.query(sql)


def today() -> Any:
    return datetime.now(UTC).date()


def crawled_on_day_0(database_url: str, sandbox_factory: Any) -> tuple[Any, CrawlConfig]:
    """A sandbox crawled in full on day 0 (both categories), now serving day 1; and that crawl's config."""
    site = sandbox_factory(day=0)
    config = sandbox_config(site.url, categories=BOTH)
    crawl(database_url, config)
    site.set_day(1)
    return site, config


def paths(ids: frozenset[int] | set[int], catalogue: Catalogue) -> set[str]:
    return {catalogue.book_by_id(i).url_path for i in ids}  # type: ignore[union-attr]


def in_feed(ids: frozenset[int] | set[int], catalogue: Catalogue) -> set[str]:
    """The paths of the books among ``ids`` that are in the categories ``FEED`` crawls."""
    return {book.url_path for i in ids if (book := catalogue.book_by_id(i)) and book.category in FEED}


def feed_paths(feed: list[dict[str, Any]], change: str) -> set[str]:
    return {urlsplit(r["url"]).path for r in feed if r["change"] == change}


def removed_paths(db: Database) -> set[str]:
    return {urlsplit(r["url"]).path for r in db.query("SELECT url FROM books WHERE removed_at IS NOT NULL")}


def test_the_feed_of_each_day_equals_the_sandboxs_ground_truth_and_removed_books_stay(
    db: Database, database_url: str, sandbox_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = sandbox_factory(day=0)
    config = sandbox_config(site.url, categories=FEED)
    first = crawl(database_url, config)
    assert first.removals is not None and first.removals.decided
    assert (first.removals.removed, first.removals.complete, first.removals.not_crawled) == (0, 4, 46)
    as_yesterday(db)
    site.set_day(1)

    report = crawl(database_url, config)
    assert report.removals is not None and report.removals.removed == len(DAY1.removed_ids) == 2
    assert "removed: 2 books no longer listed, marked (not deleted); returned: 0" in "\n".join(report.summary_lines())
    feed = changes_of_day(db, today())
    assert feed_paths(feed, "new") == paths(DAY1.added_ids, DAY1) == in_feed(DAY1.added_ids, DAY1)
    assert feed_paths(feed, "changed") == in_feed(DAY1.changed_ids, DAY1) and len(in_feed(DAY1.changed_ids, DAY1)) == 10
    assert feed_paths(feed, "removed") == paths(DAY1.removed_ids, DAY0) == in_feed(DAY1.removed_ids, DAY0)
    assert feed_paths(feed, "returned") == set()
    assert len(feed) == 3 + 10 + 2
    changed_fields = {tuple(r["fields"]) for r in feed if r["change"] == "changed"}
    assert changed_fields == {("availability", "price_amount", "price_excl_tax", "price_incl_tax", "stock")}
    yesterday = changes_of_day(db, today() - timedelta(days=1))
    assert len(yesterday) == 188 and {r["change"] for r in yesterday} == {"new"}

    # Removed books are marked, never deleted: the rows and every version stay.
    kept = db.query(
        "SELECT b.url, count(v.version)::int AS versions FROM books b JOIN book_versions v ON v.book_id = b.id"
        " WHERE b.removed_at IS NOT NULL GROUP BY b.url"
    )
    assert {urlsplit(r["url"]).path for r in kept} == paths(DAY1.removed_ids, DAY0)
    assert all(r["versions"] == 1 for r in kept) and db.query("SELECT count(*)::int AS n FROM books")[0]["n"] == 191

    # The CLI prints the same feed, as JSON Lines or CSV.
    monkeypatch.setenv("DATABASE_URL", database_url)
    out = CliRunner().invoke(main, ["changes", "--day", today().isoformat()], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    printed = [json.loads(line) for line in out.output.splitlines()]
    assert [(r["change"], r["url"], r["fields"]) for r in printed] == [
        (r["change"], r["url"], r["fields"]) for r in feed
    ]
    as_csv = CliRunner().invoke(main, ["changes", "--format", "csv"], catch_exceptions=False).output.splitlines()
    assert as_csv[0] == "day,change,book_id,url,title,category,price,version,fields,changed_at"
    assert len(as_csv) == len(feed) + 1

    # The next day the site is back as on day 0: the removed books return, the added ones are removed.
    as_yesterday(db)
    site.set_day(0)
    back = crawl(database_url, config)
    assert back.removals is not None and (back.removals.removed, back.removals.returned) == (3, 2)
    feed = changes_of_day(db, today())
    assert feed_paths(feed, "returned") == paths(DAY1.removed_ids, DAY0)
    assert feed_paths(feed, "removed") == paths(DAY1.added_ids, DAY1)
    assert feed_paths(feed, "changed") == in_feed(DAY1.changed_ids, DAY1)
    assert removed_paths(db) == paths(DAY1.added_ids, DAY1)


def test_a_failed_listing_page_decides_nothing_in_its_category(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    # Served on day 0, not found from then on (404 is not retried).
    site = sandbox_factory(faults=Faults(scripted={NONFICTION_PAGE_3: ["serve", *["404"] * 5]}))
    config = sandbox_config(site.url, categories=BOTH)
    crawl(database_url, config)
    site.set_day(1)
    report = crawl(database_url, config)
    assert report.failed_by_reason == {"http_404": 1}
    assert removed_paths(db) == paths({COMMENT_BOOK}, DAY0)  # Nonfiction's book 557 stays listed
    assert report.removals is not None and len(report.removals.incomplete) == 1
    assert (
        f"not decided in 1 with incomplete listings (Nonfiction ({urlsplit(site.url).netloc}): "
        f"{site.url}{NONFICTION_PAGE_3} not completed in this crawl), 48 not crawled"
    ) in report.removals.line()


def test_a_categories_filter_decides_only_the_crawled_categories(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    site, _ = crawled_on_day_0(database_url, sandbox_factory)
    report = crawl(database_url, sandbox_config(site.url, categories=("Add a comment",)))
    assert removed_paths(db) == paths({COMMENT_BOOK}, DAY0)  # Nonfiction's 557 is gone too, but was not crawled
    assert report.removals is not None and (report.removals.complete, report.removals.not_crawled) == (1, 49)
    assert report.removals.line().endswith("not decided in 49 not crawled")


def test_listings_cut_by_max_pages_mark_nothing_removed(db: Database, database_url: str, sandbox_factory: Any) -> None:
    site = sandbox_factory(day=0)
    crawl(database_url, sandbox_config(site.url, categories=(*BOTH, "Travel")))
    site.set_day(1)
    report = crawl(database_url, sandbox_config(site.url, categories=(*BOTH, "Travel"), max_pages=1))
    assert removed_paths(db) == set()  # 557 and 730 are gone, but their categories' listings were cut
    assert report.removals is not None and report.removals.complete == 1  # Travel has one page
    assert [line.split(" (")[0] for line in report.removals.incomplete] == sorted(BOTH)


def test_a_retry_of_the_failures_decides_no_removals(db: Database, database_url: str, sandbox_factory: Any) -> None:
    from book_assets.crawl.pipeline import retry_failed

    site, _ = crawled_on_day_0(database_url, sandbox_factory)
    report = retry_failed(database_url, sandbox_config(site.url, categories=BOTH))
    assert report.removals is not None and not report.removals.decided
    assert any(line.startswith("removed: not decided (a retry of the failures") for line in report.summary_lines())
    assert removed_paths(db) == set()


def test_books_of_another_host_are_never_marked_removed(db: Database, database_url: str, sandbox: Any) -> None:
    db.query(
        "INSERT INTO books (url, category, title) VALUES ('http://elsewhere.test/catalogue/x_1/index.html',"
        " 'Travel', 'x') RETURNING id"
    )
    report = crawl(database_url, sandbox_config(sandbox.url, categories=("Travel",)))
    assert report.removals is not None and report.removals.complete == 1
    assert removed_paths(db) == set()


def test_pending_listing_pages_at_the_report_decide_nothing(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    import asyncio

    from book_assets.crawl.config import LISTING
    from book_assets.crawl.pipeline import begin, finish, work
    from book_assets.crawl.worker import Worker

    _, config = crawled_on_day_0(database_url, sandbox_factory)
    partial = begin(database_url, config)
    # The start page and the first pages of both categories; their next pages stay pending.
    stats = asyncio.run(Worker(database_url, config, task_types=(LISTING,), max_tasks=3).run())
    report = finish(database_url, partial, stats)
    assert removed_paths(db) == set()
    assert report.removals is not None and not report.removals.decided
    assert report.removals.line().startswith("removed: not decided (")
    assert "listing pages still queued; the crawl stays open" in report.removals.line()
    # Left open, for the run to settle once its listing pages are done.
    assert partial.opened is not None
    assert db.query("SELECT finished_at FROM crawls WHERE id = %s", (partial.opened.id,))[0]["finished_at"] is None
    settled = finish(database_url, *work(database_url, partial))
    assert settled.removals is not None and settled.removals.decided
    assert removed_paths(db) == paths({NONFICTION_BOOK, COMMENT_BOOK}, DAY0)


def test_a_drain_that_opened_no_crawl_leaves_the_open_crawl_to_the_run_that_opened_it(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    from book_assets.crawl.pipeline import begin, finish, join, work

    _, config = crawled_on_day_0(database_url, sandbox_factory)
    owner = begin(database_url, config)  # a crawl in progress (its run on another host, say)
    assert owner.opened is not None
    # A drain-only run here: it drains the whole queue, the owner's pages among it, and reports.
    drained = finish(database_url, *work(database_url, join(database_url, config)))
    assert drained.removals is not None and not drained.removals.decided
    assert removed_paths(db) == set()
    still_open = db.query("SELECT id FROM crawls WHERE finished_at IS NULL")
    assert [r["id"] for r in still_open] == [owner.opened.id]
    # The run that opened the crawl settles it.
    report = finish(database_url, *work(database_url, owner))
    assert report.removals is not None and report.removals.decided
    assert removed_paths(db) == paths({NONFICTION_BOOK, COMMENT_BOOK}, DAY0)


def test_a_deep_budget_limits_book_pages_but_not_the_listings_that_decide(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    site, _ = crawled_on_day_0(database_url, sandbox_factory)
    report = crawl(database_url, sandbox_config(site.url, categories=BOTH, deep_budget=10))
    assert report.budgets and sum(b.completed for b in report.budgets) == 10
    # Listed books whose pages the budget left unfetched stay; the two that left the listings are removed.
    assert removed_paths(db) == paths({NONFICTION_BOOK, COMMENT_BOOK}, DAY0)
