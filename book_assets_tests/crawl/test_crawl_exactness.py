"""A crawl keeps its promises under faults: budgets deliver, failures are counted exactly, Retry-After is
bounded, one URL is one task and one book, and what is stored is what was served."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from book_assets.crawl.config import DETAIL, DETAIL_PRIORITY, make_queue
from book_assets.crawl.pipeline import crawl, drain, prepare
from book_assets.db.connection import Database
from book_assets.sandbox.catalogue import Catalogue
from book_assets.sandbox.faults import Faults
from book_assets.sandbox.pages import Site
from book_assets_tests.conftest import child_env
from book_assets_tests.crawl.conftest import sandbox_config
from book_assets_tests.reliability.stub_site import Page, StubSite

TRUTH = Catalogue(seed=0, day=0).ground_truth()


def test_deep_budget_of_100_stores_100_books_when_a_fifth_of_requests_fail(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    site = sandbox_factory(faults=Faults(error_rate=0.2), seed=3)
    config = sandbox_config(site.url, mode="http", deep_budget=100)
    report = crawl(database_url, config)
    assert report.run.retries > 0  # the faults did hit detail pages
    assert db.query("SELECT count(*) AS n FROM books")[0]["n"] == 100
    assert sum(b.completed for b in report.budgets) == 100
    assert any(line.startswith("deep budget 100: met") for line in report.summary_lines())
    leftover = db.query("SELECT count(*) AS n FROM tasks WHERE task_type = 'detail' AND status <> 'pending'")
    assert leftover[0]["n"] == 100  # nothing leased or failed beyond the budget


def test_a_budget_that_dead_letters_says_so_with_numbers(db: Database, database_url: str, sandbox_factory: Any) -> None:
    travel = sorted(p for p, b in TRUTH.items() if b.category == "Travel")
    site = sandbox_factory(faults=Faults(scripted={travel[0]: ["404"], travel[1]: ["404"]}))
    config = sandbox_config(site.url, mode="http", deep_budget=11, categories=("Travel",))
    report = crawl(database_url, config)
    assert db.query("SELECT count(*) AS n FROM books")[0]["n"] == 9
    line = next(line for line in report.summary_lines() if line.startswith("deep budget"))
    assert line.startswith("deep budget 11: NOT met, 9 stored, 2 failed for good"), line


def test_a_site_with_150_missing_book_pages_reports_exactly_150_failed_by_kind(
    db: Database, database_url: str, sandbox_factory: Any, tmp_path: Path
) -> None:
    # Three categories (337 books) hold the 150 missing pages: far more failures than any top-N list shows.
    categories = ("Default", "Nonfiction", "Sequential Art")
    missing = sorted(p for p, b in TRUTH.items() if b.category in categories)[:150]
    site = sandbox_factory(faults=Faults(scripted={path: ["404"] for path in missing}))
    report = crawl(database_url, sandbox_config(site.url, mode="http", categories=categories))
    assert report.failed_by_reason == {"http_404": 150}
    assert "retries: 0; failed tasks: 150" in "\n".join(report.summary_lines())
    failed = db.query("SELECT count(*) AS n FROM tasks WHERE status = 'failed' AND error_kind = 'http_404'")
    assert failed[0]["n"] == 150
    assert db.query("SELECT count(*) AS n FROM books")[0]["n"] == 337 - 150

    status = _cli(["status"], database_url, tmp_path)
    assert "failed tasks: 150" in status
    assert "failed    150  detail   http_404" in status


@pytest.mark.timeout(120)
def test_a_retry_after_of_thirty_years_is_clamped_and_the_crawl_completes(
    db: Database, database_url: str, sandbox_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOOK_PIPELINE_RETRY_AFTER_MAX_S", "2")
    path = sorted(p for p, b in TRUTH.items() if b.category == "Travel")[0]
    site = sandbox_factory(faults=Faults(scripted={path: ["429"]}, retry_after_s=999_999_999))
    report = crawl(database_url, sandbox_config(site.url, mode="http", categories=("Travel",)))
    assert report.counts["total"] == 11 and report.run.retries == 1
    row = db.query("SELECT status, error FROM tasks WHERE payload->>'url' = %s", (site.url + path,))[0]
    assert row["status"] == "completed"
    assert "Retry-After 999999999s clamped to 2s" in row["error"]
    slot = db.query("SELECT next_slot_at < now() + interval '1 hour' AS soon FROM domains")
    assert all(r["soon"] for r in slot)


def test_spellings_of_one_url_make_one_task_and_one_book(db: Database, database_url: str, sandbox: Any) -> None:
    config = sandbox_config(sandbox.url, mode="http")
    prepare(db, config)
    queue = make_queue(db, config)
    path = sorted(TRUTH)[0]
    host, port = sandbox.url.removeprefix("http://").split(":")
    variants = [
        sandbox.url + path,
        sandbox.url + path + "#product_description",
        f"HTTP://{host.upper()}:{port}{path}",
        sandbox.url + path.replace("/index.html", "/./index.html"),
        sandbox.url + "/catalogue/../" + path.lstrip("/"),
    ]
    created = [queue.enqueue(DETAIL, {"url": v, "category": "x"}, priority=DETAIL_PRIORITY).created for v in variants]
    assert created == [True, False, False, False, False]
    drain(database_url, config, task_types=(DETAIL,))
    assert db.query("SELECT url FROM books") == [{"url": sandbox.url + path}]


def test_a_same_site_redirect_stores_the_book_under_the_url_that_served_it(db: Database, database_url: str) -> None:
    path = sorted(TRUTH)[0]
    body = Site(Catalogue(seed=0, day=0)).get(path)
    assert body is not None
    pages = {"/old.html": Page(status=301, headers={"Location": path}), path: Page(body=body)}
    with StubSite(pages) as site:
        config = sandbox_config(site.url_for("/"), mode="http")
        prepare(db, config)
        queue = make_queue(db, config)
        for url in (site.url_for("/old.html"), site.url_for(path)):
            queue.enqueue(DETAIL, {"url": url, "category": "Poetry"}, priority=DETAIL_PRIORITY)
        drain(database_url, config, task_types=(DETAIL,))
        rows = db.query("SELECT url FROM books")
    assert rows == [{"url": site.url_for(path)}]
    assert db.query("SELECT count(*) AS n FROM book_versions")[0]["n"] == 1


@pytest.mark.parametrize(
    ("name", "mangle"),
    [
        ("invalid UTF-8", lambda b: b.replace(b"nothing is quite", b"nothing \xff is quite", 1)),
        ("a byte-order mark", lambda b: b"\xef\xbb\xbf" + b),
        ("a NUL byte", lambda b: b.replace(b"nothing is quite", b"nothing \x00 is quite", 1)),
    ],
)
def test_a_page_that_decodes_lossily_keeps_its_served_bytes(
    db: Database, database_url: str, name: str, mangle: Any
) -> None:
    path = "/catalogue/the-house-who-wasnt-there-obrien-fjord-and-everything-after_1000/index.html"
    body = Site(Catalogue(seed=0, day=0)).get(path)
    assert body is not None
    served = mangle(body)
    assert served != body, name
    with StubSite({path: Page(body=served)}) as site:
        config = sandbox_config(site.url_for("/"), mode="http")
        prepare(db, config)
        make_queue(db, config).enqueue(DETAIL, {"url": site.url_for(path), "category": "Poetry"})
        drain(database_url, config, task_types=(DETAIL,))
    row = db.query("SELECT raw_html, raw_body, content_hash FROM books")[0]
    assert bytes(row["raw_body"]) == served
    assert row["content_hash"] == hashlib.sha256(served).hexdigest()
    assert "\x00" not in row["raw_html"]


def test_a_page_that_decodes_exactly_stores_its_text_only_and_the_hash_of_that_text(
    db: Database, database_url: str, sandbox: Any
) -> None:
    path = sorted(TRUTH)[0]
    config = sandbox_config(sandbox.url, mode="http")
    prepare(db, config)
    make_queue(db, config).enqueue(DETAIL, {"url": sandbox.url + path, "category": "x"})
    drain(database_url, config, task_types=(DETAIL,))
    row = db.query("SELECT raw_html, raw_body, content_hash FROM books")[0]
    assert row["raw_body"] is None
    assert row["content_hash"] == hashlib.sha256(row["raw_html"].encode("utf-8")).hexdigest()


def test_an_unchanged_recrawl_whose_bytes_differ_stores_the_new_bytes_and_their_hash(
    db: Database, database_url: str
) -> None:
    path = sorted(TRUTH)[0]
    body = Site(Catalogue(seed=0, day=0)).get(path)
    assert body is not None
    page = Page(body=body)
    with StubSite({path: page}) as site:
        config = sandbox_config(site.url_for("/"), mode="http")
        prepare(db, config)
        queue = make_queue(db, config)
        for served in (body, body.replace(b"</body>", b"<!-- served at 12:00 --></body>")):
            page.body = served
            queue.enqueue(DETAIL, {"url": site.url_for(path), "category": "x"})
            drain(database_url, replace(config), task_types=(DETAIL,))
    row = db.query("SELECT raw_html, content_hash, version FROM books")[0]
    assert row["version"] == 1  # the extracted fields did not change
    assert "served at 12:00" in row["raw_html"]
    assert row["content_hash"] == hashlib.sha256(row["raw_html"].encode("utf-8")).hexdigest()


def _cli(args: list[str], database_url: str, cwd: Path) -> str:
    env = child_env(DATABASE_URL=database_url)
    proc = subprocess.run(
        [sys.executable, "-m", "book_assets.cli", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout
