"""Adaptive fetching: plain HTTP where it gives the browser's records, the browser elsewhere.

Against the sandbox (normal and ``js_mode``) and a stub site whose book pages a script changes, with the
decision read back from PostgreSQL, where every worker shares it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from book_assets.crawl.adaptive import (
    AdaptiveState,
    Mode,
    RendererRole,
    forget_decisions,
    list_decisions,
    sampled,
)
from book_assets.crawl.pipeline import CrawlReport, crawl
from book_assets.db.connection import Database
from book_assets.defs.crawl.metadata import details_metadata
from book_assets.sandbox.catalogue import Catalogue
from book_assets.sandbox.pages import Site
from book_assets.sites.books import BOOKS
from book_assets.store.books import TRACKED_FIELDS
from book_assets_tests.crawl.conftest import sandbox_config, stored_vs_truth
from book_assets_tests.reliability.stub_site import Page, StubSite

LISTING = "/catalogue/category/books/mystery_3/index.html"
#: Agreements that decide a page type http (the ``adaptive_probe_pages`` default).
PROBE_PAGES = 5
CARD_HREF = re.compile(r'href="\.\./\.\./\.\./([a-z0-9-]+_\d+)/index\.html"')


def _books(db: Database) -> dict[str, dict[str, Any]]:
    rows = db.query("SELECT url, " + ", ".join(TRACKED_FIELDS) + " FROM books")
    return {row["url"]: row for row in rows}


def _decisions(db: Database) -> dict[str, Mode]:
    return {d.page_type: d.mode for d in list_decisions(db)}


# --------------------------------------------------------------------------- pure


def test_the_recheck_sample_is_stable_and_near_its_rate() -> None:
    urls = [f"http://127.0.0.1:8800/catalogue/book_{n}/index.html" for n in range(20_000)]
    picked = [u for u in urls if sampled(u, 0.02)]
    assert 0.015 < len(picked) / len(urls) < 0.025
    assert picked == [u for u in urls if sampled(u, 0.02)]
    assert not any(sampled(u, 0.0) for u in urls[:1000]) and all(sampled(u, 1.0) for u in urls[:1000])


def test_a_page_whose_data_only_a_script_builds_disagrees_and_a_plain_page_agrees() -> None:
    catalogue = Catalogue()
    path, _book = next(iter(catalogue.ground_truth().items()))
    plain = Site(catalogue).get(path)
    scripted = Site(catalogue, js_mode=True).get(path)
    assert plain is not None and scripted is not None
    url = "http://127.0.0.1:8800" + path
    assert BOOKS.records_agree("detail", plain.decode(), plain.decode(), url)
    assert not BOOKS.records_agree("detail", scripted.decode(), plain.decode(), url)  # only the render parses
    # An error page that no render can parse is no evidence for the browser.
    assert BOOKS.records_agree("detail", "<html>oops</html>", "<html>oops</html>", url)


# --------------------------------------------------------------------------- shared decision


def test_two_workers_share_one_decision(db: Database, database_url: str) -> None:
    one, two = Database(database_url), Database(database_url)
    try:
        first, second = AdaptiveState(one, probe_pages=5), AdaptiveState(two, probe_pages=5)
        for _ in range(3):
            first.count("example.org", "detail", rendered=1, plain=1, agreed=True)
        assert first.sync("example.org", "detail") == Mode.PROBE
        for _ in range(2):
            second.count("example.org", "detail", rendered=1, plain=1, agreed=True)
        assert second.sync("example.org", "detail") == Mode.HTTP  # 3 + 2 agreements, from two workers
        assert first.sync("example.org", "detail") == Mode.HTTP

        second.count("example.org", "detail", rendered=1, plain=1, agreed=False)
        assert second.sync("example.org", "detail") == Mode.BROWSER
        first.count("example.org", "detail", rendered=1, plain=1, agreed=True)
        assert first.sync("example.org", "detail") == Mode.BROWSER  # once browser, browser for good
        assert first.sync("example.org", "listing") == Mode.PROBE  # page types decide separately
        [detail, _listing] = list_decisions(db)
        assert (detail.agreements, detail.disagreements, detail.rendered, detail.plain) == (6, 1, 7, 7)
        forget_decisions(db, ["example.org"])
        assert list_decisions(db) == []
    finally:
        one.close()
        two.close()


def test_one_worker_per_host_renders_and_a_lost_renderer_is_replaced(tmp_path: Path) -> None:
    first, second = RendererRole("db-a", tmp_path), RendererRole("db-a", tmp_path)
    assert first.held and not second.held
    assert RendererRole("db-b", tmp_path).held  # another crawl's database: a renderer of its own
    first.release()
    assert RendererRole("db-a", tmp_path).held
    # A renderer in another process that is killed: the kernel drops its lock and the next worker takes over.
    path = RendererRole("db-c", tmp_path).path
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import fcntl, sys, time; f = open({str(path)!r}, 'w'); "
            "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert not RendererRole("db-c", tmp_path).held
    finally:
        holder.kill()
        holder.wait()
    assert RendererRole("db-c", tmp_path).held


# --------------------------------------------------------------------------- crawls


@pytest.mark.browser
def test_adaptive_on_the_normal_sandbox_stores_what_a_browser_crawl_stores_mostly_over_http(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    server = sandbox_factory()
    categories = ("Travel", "Mystery", "Poetry")
    crawl(database_url, sandbox_config(server.url, mode="browser", concurrency=4, categories=categories))
    by_browser = _books(db)
    db.query("TRUNCATE books, book_versions, pages, tasks RESTART IDENTITY CASCADE")
    server.reset_stats()

    report = crawl(
        database_url, sandbox_config(server.url, mode="adaptive", concurrency=4, categories=categories, workers=2)
    )
    assert _books(db) == by_browser and len(by_browser) == 62
    # How many probes the renderer finishes before the other worker has fetched every page plain depends on
    # how fast the machine runs its browser; what the evidence decides does not: no disagreement, so never
    # the browser, and http exactly when the probes agreed often enough (the next test reaches it for sure).
    [detail] = [d for d in list_decisions(db) if d.page_type == "detail"]
    assert detail.disagreements == 0 and detail.mode != Mode.BROWSER
    assert detail.mode == (Mode.HTTP if detail.agreements >= PROBE_PAGES else Mode.PROBE), detail.line()
    assert report.stats.disagreements == 0 and report.stats.plain >= len(by_browser)
    assert report.stats.rendered < len(by_browser) / 2
    assert report.stats.browsers == 1  # the host's renderer; the other worker fetched plain and rendered nothing
    assert any(line.startswith("adaptive:") for line in report.summary_lines())


@pytest.mark.browser
def test_adaptive_decides_http_once_its_probes_agree_and_fetches_the_rest_plain(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    # One worker is its host's renderer and fetches every page: while the page type is undecided each book
    # it fetches is a probe (its four slots stay under the five probes a decision needs), so the decision
    # comes after the fifth agreement, whatever the machine's speed, and the books after it go plain.
    server = sandbox_factory()
    config = sandbox_config(server.url, mode="adaptive", concurrency=4, categories=("Travel", "Mystery", "Poetry"))
    assert config.adaptive_probe_pages == PROBE_PAGES
    report = crawl(database_url, config)
    assert report.counts["total"] == 62 and report.failed_by_reason == {}
    [detail] = [d for d in list_decisions(db) if d.page_type == "detail"]
    assert detail.mode == Mode.HTTP, detail.line()
    assert detail.agreements >= PROBE_PAGES and detail.disagreements == 0
    assert report.stats.rendered < 62 / 2 and report.stats.plain >= 62
    # The probes cost a render beside their plain fetch; the books after the decision a plain fetch only.
    assert sum(fetches_by_mode(report, "detail").values()) == 62
    assert fetches_by_mode(report, "detail")["browser"] >= PROBE_PAGES


def fetches_by_mode(report: CrawlReport, page_type: str) -> Counter[str]:
    """The crawl's fetches of ``page_type`` pages by fetch mode, from its cost rows."""
    fetches: Counter[str] = Counter()
    for (kind, _category, mode), cost in report.stats.costs.items():
        if kind == page_type:
            fetches[mode] += cost.fetches
    return fetches


@pytest.mark.browser
def test_a_script_that_changes_book_pages_flips_only_the_book_page_type_to_the_browser(
    db: Database, database_url: str
) -> None:
    site = Site(Catalogue())
    listing = site.get(LISTING)
    assert listing is not None
    keys = list(dict.fromkeys(CARD_HREF.findall(listing.decode())))
    # Every book page gets a script that rewrites its title: the rendered DOM disagrees with the served HTML.
    rewrite = "<script>document.querySelector('.product_main h1').textContent = 'Rewritten by script';</script>"
    pages = {LISTING: Page(body=listing)}  # its next page is not served: one http_404, nothing else
    for key in keys:
        body = site.get(f"/catalogue/{key}/index.html")
        assert body is not None
        pages[f"/catalogue/{key}/index.html"] = Page(body=body.replace(b"</body>", rewrite.encode() + b"</body>"))
    with StubSite(pages) as stub:
        config = sandbox_config(stub.url_for(LISTING), mode="adaptive", concurrency=2)
        report = crawl(database_url, config)
    assert _decisions(db) == {"detail": Mode.BROWSER, "listing": Mode.PROBE}, report.summary_lines()
    # Books fetched after the flip came through the browser (their rendered DOM is kept; pages that went
    # plain while the first probe rendered have none). As in browser mode, the served HTML wins where it is
    # a complete book page, so every title is the served one.
    rows = db.query("SELECT title, rendered_html FROM books")
    by_browser = [row for row in rows if "Rewritten by script" in (row["rendered_html"] or "")]
    assert len(rows) == 20 and len(by_browser) == report.stats.rendered - 1 >= 1  # minus the listing's probe
    assert "Rewritten by script" not in {row["title"] for row in rows}
    assert report.stats.disagreements >= 1
    assert any("127.0.0.1 detail: browser" in line for line in report.summary_lines())
    metadata = details_metadata(report)
    assert metadata["disagreements"] == report.stats.disagreements and "fetch_decisions" in metadata
    assert metadata["browsers_started"] == report.stats.browsers >= 1


@pytest.mark.browser
@pytest.mark.slow
def test_adaptive_on_the_javascript_sandbox_stores_every_book_by_the_browser(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    # Three categories (62 books, Mystery over two listing pages): every book page needs its script, so the
    # decision flips to the browser on the first probe and each book after it is rendered; the whole catalogue
    # would only repeat that a thousand times over.
    server = sandbox_factory(js_mode=True)
    categories = ("Travel", "Mystery", "Poetry")
    config = sandbox_config(server.url, mode="adaptive", concurrency=4, workers=2, categories=categories)
    report = crawl(database_url, config)
    truth = {path: book for path, book in server.catalogue.ground_truth().items() if book.category in categories}
    assert report.counts["total"] == len(truth) == 62 and report.failed_by_reason == {}
    assert stored_vs_truth(db.query("SELECT * FROM books"), truth, server.url) == []
    decisions = list_decisions(db)
    assert [(d.page_type, d.mode) for d in decisions if d.page_type == "detail"] == [("detail", Mode.BROWSER)]
    assert sum(d.rendered for d in decisions if d.page_type == "detail") >= len(truth)


@pytest.mark.browser
def test_browser_mode_runs_no_script_on_pages_that_need_none(
    database_url: str, db: Database, sandbox_factory: Any
) -> None:
    server = sandbox_factory()
    report = crawl(database_url, sandbox_config(server.url, mode="browser", concurrency=4, categories=("Travel",)))
    assert report.counts["total"] == 11
    assert [p for p in server.stats().hits if p.endswith(".js")] == []
    assert fetches_by_mode(report, "detail") == {"browser": 11}  # scripts off, the browser's fetch all the same
