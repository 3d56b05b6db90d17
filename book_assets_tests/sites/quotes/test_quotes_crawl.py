"""A crawl of quotes.toscrape.com's stand-in (spidyquotes itself, ``quotes_site``) through the real pipeline, each
quote and author stored compared with the truth field by field, in each fetch mode.

Plain HTTP reads every page but ``/js/`` whole: every quote (each is on a page of ``/``'s chain) and every author
equal the truth, and the ``/js/`` pages fail as pages that are no listing (their quotes are only in a script). The
browser reads them all; adaptive mode reads them all too and renders, once its probes have decided, only the
``/js/`` pages (their kind, ``quotes_js``, goes to the browser; the others to plain HTTP).
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from book_assets.crawl.adaptive import Mode, list_decisions
from book_assets.crawl.pipeline import CrawlReport, crawl
from book_assets.db.connection import Database
from book_assets.sandbox.quotes import truth
from book_assets.sandbox.quotes.server import QuotesServer
from book_assets.scraper.errors import ErrorKind
from book_assets_tests.conftest import child_env
from book_assets_tests.sites.quotes.crawling import quotes_config, stored_authors, stored_quotes

#: The ``/js/`` pages: as many as the pages of ``/``.
JS_PAGES = truth.page_count()


def _failed_urls(db: Database) -> dict[str, str]:
    return {
        row["url"]: row["error_kind"]
        for row in db.query("SELECT payload->>'url' AS url, error_kind FROM tasks WHERE status = 'failed'")
    }


def _completed(db: Database) -> Counter[str]:
    rows = db.query("SELECT task_type, count(*) AS n FROM tasks WHERE status = 'completed' GROUP BY task_type")
    return Counter({row["task_type"]: row["n"] for row in rows})


def test_an_http_crawl_stores_every_quote_and_author_as_shown_and_fails_only_the_script_written_pages(
    db: Database, database_url: str, quotes_site: QuotesServer
) -> None:
    report = crawl(database_url, quotes_config(quotes_site))
    summary = "\n".join(report.summary_lines())
    assert truth.quote_differences(stored_quotes(db)) == [], summary
    assert truth.author_differences(stored_authors(db)) == [], summary
    assert len(truth.quotes()) == 100 and len(truth.authors()) == 50
    # /js/ is a start page of its own (nothing links it); its served HTML holds its quotes in a script only.
    assert _failed_urls(db) == {quotes_site.url_for("/js/"): ErrorKind.NOT_A_LISTING_PAGE}, summary
    assert report.failed_by_reason == {ErrorKind.NOT_A_LISTING_PAGE: 1}
    done = _completed(db)
    # The pages of /, the ten tags of its sidebar with their pages, and each author once.
    tag_pages = sum(-(-truth.tag_counts()[tag] // truth.QUOTES_PER_PAGE) for tag in _top_ten())
    assert done == {"quotes": truth.page_count() + tag_pages, "author": 50}, summary
    assert report.counts["total"] == 50 and report.run.books_new == 50 and report.failure is None
    assert report.removals is not None and not report.removals.decided and report.fields is None


def _top_ten() -> list[str]:
    return [tag for tag, _n in truth.tag_counts().most_common(10)]


def _exact(db: Database, report: CrawlReport) -> None:
    summary = "\n".join(report.summary_lines())
    assert truth.quote_differences(stored_quotes(db)) == [], summary
    assert truth.author_differences(stored_authors(db)) == [], summary
    assert _failed_urls(db) == {} and report.failed_by_reason == {}, summary
    assert _completed(db)["quotes_js"] == JS_PAGES, summary


@pytest.mark.browser
def test_a_browser_crawl_stores_every_quote_and_author_the_js_pages_included(
    db: Database, database_url: str, quotes_site: QuotesServer
) -> None:
    report = crawl(database_url, quotes_config(quotes_site, mode="browser", concurrency=4))
    _exact(db, report)
    # The quotes /js/ writes carry no author link: each keeps the link its page of / showed.
    assert db.query("SELECT count(*) AS n FROM quotes WHERE author_url IS NULL")[0]["n"] == 0


@pytest.mark.browser
def test_an_adaptive_crawl_renders_only_the_js_pages_once_its_probes_decide(
    db: Database, database_url: str, quotes_site: QuotesServer
) -> None:
    # One worker, its host's renderer: while a kind is undecided each page it fetches is a probe (rendered and
    # fetched plain), so the kinds whose pages parse plain go http after adaptive_probe_pages agreements.
    config = quotes_config(quotes_site, mode="adaptive", concurrency=4)
    report = crawl(database_url, config)
    _exact(db, report)
    decisions = {d.page_type: d for d in list_decisions(db)}
    lines = "\n".join(d.line() for d in decisions.values())
    assert decisions["quotes_js"].mode == Mode.BROWSER, lines
    assert decisions["quotes_js"].rendered >= JS_PAGES, lines
    for kind in ("quotes", "author"):
        decision = decisions[kind]
        assert decision.mode == Mode.HTTP and decision.disagreements == 0, lines
        assert decision.agreements >= config.adaptive_probe_pages, lines
        # Rendered: its probes, and the re-check sample (adaptive_sample_rate); every other page plain.
        assert decision.rendered < decision.plain, lines
    assert _completed(db)["author"] == 50
    assert report.stats.rendered < report.run.pages / 2, lines


def test_book_pipeline_crawl_site_quotes_crawls_the_stand_in_and_status_counts_its_authors(
    db: Database, database_url: str, quotes_site: QuotesServer, tmp_path: Path
) -> None:
    env = child_env(DATABASE_URL=database_url)

    def cli(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "book_assets.cli", *args], env=env, cwd=tmp_path, capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout

    base = ["--site", "quotes", "--base-url", quotes_site.url + "/", "--fetch", "http", "--workers", "1"]
    out = cli("crawl", *base, "--no-progress")
    assert "authors: total 50 / unique URLs 50 / with raw HTML 50" in out, out
    assert "50 new, 0 changed, 0 unchanged authors" in out and "failed     1  not_a_listing_page" in out, out
    assert truth.quote_differences(stored_quotes(db)) == [] and truth.author_differences(stored_authors(db)) == []
    status = cli("status", "--site", "quotes")
    assert "authors total 50 / unique URLs 50 / with raw HTML 50; versions 50" in status, status
    assert "failed      1  quotes_js not_a_listing_page" in status and "tasks   author   completed    50" in status
