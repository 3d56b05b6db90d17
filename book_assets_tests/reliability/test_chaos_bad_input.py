"""Bad input through the real crawl path: garbage, huge pages, redirect loops and escapes, hostile text,
malformed URLs and invalid settings. Each ends as a clear, classified failure; nothing corrupt is stored.
"""

from __future__ import annotations

import html
import itertools
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import httpx
import pytest

from book_assets.crawl.config import DETAIL, DETAIL_PRIORITY, TASK_TYPES, make_queue
from book_assets.crawl.pipeline import drain, prepare
from book_assets.db.connection import Database
from book_assets.queue import TaskQueue
from book_assets.sandbox.pages import escape, escape_text
from book_assets.sql import load_queries
from book_assets_tests.crawl.conftest import sandbox_config
from book_assets_tests.reliability.conftest import task_counts, worker_env
from book_assets_tests.reliability.stub_site import Page, StubSite

pytestmark = pytest.mark.chaos

MB = 1024 * 1024
CHUNK = b"<p>" + b"x" * (64 * 1024 - 7) + b"</p>\n"
HUGE_CHUNKS = 20 * 16  # 20 MiB in 64 KiB chunks, generated on the fly (never held in memory)

#: Text a hostile catalogue could hold: SQL, markup, bidirectional scripts, emoji sequences, combining marks,
#: zero-width characters, format strings. Stored byte for byte, or it is a bug.
ODD_TITLE = (
    "Robert'); DROP TABLE books; -- <script>alert('x')</script> "
    "مرحبا بالعالم שלום 👩‍👩‍👧‍👦 🏳️‍🌈 Ze\u0301\u0308\u0327ro\u200bwidth\u200djoin\ufeff %s %(url)s {0} $1 \\x00"
)
ODD_DESCRIPTION = (
    "1'; DELETE FROM tasks WHERE '1'='1 <script>document.write('<img src=x onerror=alert(1)>')</script> "
    "&amp; is literal here. \u202eRTL override\u202c עברית ועוד العربية 🧑🏽‍💻 a\u0300\u0301\u0302\u0303 "
    "\u2028line separator\u2029 ‮ -- /* comment */ E'\\\\' $$dollar$$"
)


def _odd_book_page(sandbox: Any) -> str:
    """A real sandbox book page with its title and description replaced by ``ODD_*`` (HTML-escaped)."""
    path, book = next(
        (p, b)
        for p, b in sandbox.catalogue.ground_truth().items()
        if b.description and not any(c in b.title + b.description for c in "'&<>\"")
    )
    page = httpx.get(sandbox.url_for(path), timeout=10).content.decode()
    assert escape(book.title) in page and escape_text(book.description) in page
    page = page.replace(escape_text(book.description), html.escape(ODD_DESCRIPTION))  # first: it quotes the title
    page = page.replace(escape(book.title), html.escape(ODD_TITLE))
    return page


def _tasks(db: Database) -> dict[str, dict[str, Any]]:
    rows = db.query("SELECT payload->>'url' AS url, status, attempts, error FROM tasks")
    return {r["url"]: r for r in rows}


def test_bad_pages_fail_cleanly_and_hostile_text_is_stored_verbatim(
    db: Database, database_url: str, sandbox: Any
) -> None:
    odd_page = _odd_book_page(sandbox)
    with StubSite() as elsewhere, StubSite() as site:
        # The off-domain target really is reachable as "localhost": a hit there would be counted.
        assert httpx.get(elsewhere.url_for("/probe", host="localhost"), timeout=10).status_code == 404
        elsewhere.hits.clear()
        away = elsewhere.url_for("/catalogue/stolen_1/index.html", host="localhost")
        site.pages.update(
            {
                "/garbage/index.html": Page(body=b"\x00\xff<html><div class='product_main'><h1>\x89PNG</h1><table"),
                "/huge/index.html": Page(
                    chunks=lambda: itertools.repeat(CHUNK, HUGE_CHUNKS), length=HUGE_CHUNKS * len(CHUNK)
                ),
                "/huge-streamed/index.html": Page(chunks=lambda: itertools.repeat(CHUNK, HUGE_CHUNKS)),
                "/odd/index.html": Page(body=odd_page.encode()),
                "/nul/index.html": Page(body=odd_page.replace("Robert", "Rob\x00ert").encode()),
                "/loop/a.html": Page(status=302, headers={"Location": "/loop/b.html"}),
                "/loop/b.html": Page(status=302, headers={"Location": "a.html"}),
                "/offsite/index.html": Page(status=301, headers={"Location": away}),
                "/offsite-schemeless/index.html": Page(status=302, headers={"Location": away.removeprefix("http:")}),
                "/offsite-userinfo/index.html": Page(
                    status=307, headers={"Location": away.replace("localhost", f"127.0.0.1:{site.port}@localhost")}
                ),
            }
        )
        config = sandbox_config(site.url_for("/"), mode="http", max_attempts=3, timeout_s=10.0)
        prepare(db, config)
        urls = {path: site.url_for(path) for path in site.pages if path != "/loop/b.html"}  # b: a hop
        queue = make_queue(db, config)
        for url in urls.values():
            queue.enqueue(DETAIL, {"url": url, "category": "Travel"}, priority=DETAIL_PRIORITY, group="Travel")

        tracemalloc.start()
        started = time.monotonic()
        try:
            stats = drain(database_url, config, task_types=(DETAIL,), workers=1)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        elapsed = time.monotonic() - started
        assert elsewhere.total_hits() == 0, elsewhere.hits
        assert site.hits["/loop/a.html"] + site.hits["/loop/b.html"] <= config.fetch.max_redirects + 1

    tasks = _tasks(db)
    expected = {
        "/garbage/index.html": "not_a_book_page",
        "/huge/index.html": "too_large",
        "/huge-streamed/index.html": "too_large",
        "/loop/a.html": "redirect_loop",
        "/offsite/index.html": "offsite_redirect",
        "/offsite-schemeless/index.html": "offsite_redirect",
        "/offsite-userinfo/index.html": "offsite_redirect",
    }
    for path, kind in expected.items():
        task = tasks[urls[path]]
        assert (task["status"], task["error"].split(":", 1)[0], task["attempts"]) == ("failed", kind, 1), task
    assert tasks[urls["/odd/index.html"]]["status"] == "completed"
    assert tasks[urls["/nul/index.html"]]["status"] == "completed"
    assert stats.errors.get("internal", 0) == 0, stats.errors
    # Read up to max_body_bytes (10 MB) and cut off: a buffered 20 MB page would show here.
    assert peak < config.fetch.max_body_bytes + 8 * MB, f"peak {peak / MB:.1f} MB"

    # The books table is intact and holds exactly the two good pages, verbatim (a NUL shows as U+FFFD).
    assert db.query("SELECT to_regclass('books') IS NOT NULL AS ok")[0]["ok"]
    rows = {r["url"]: r for r in db.query("SELECT * FROM books")}
    assert sorted(rows) == sorted([urls["/odd/index.html"], urls["/nul/index.html"]])
    odd, nul = rows[urls["/odd/index.html"]], rows[urls["/nul/index.html"]]
    assert (odd["title"], odd["description"], odd["raw_html"]) == (ODD_TITLE, ODD_DESCRIPTION, odd_page)
    with_fffd = ODD_TITLE.replace("Robert", "Rob\ufffdert")
    assert (nul["title"], nul["raw_html"]) == (with_fffd, odd_page.replace("Robert", "Rob\ufffdert"))
    assert db.query(load_queries("checks")["error_pages_stored"])[0]["bad"] == 0
    versions = db.query("SELECT fields FROM book_versions ORDER BY book_id")
    assert sorted(v["fields"]["title"] for v in versions) == sorted([ODD_TITLE, with_fffd])
    print(f"\n{len(tasks)} bad/odd pages in {elapsed:.1f}s; peak Python memory {peak / MB:.1f} MB")


@pytest.mark.browser
def test_browser_never_follows_a_redirect_off_the_domain_or_round_a_loop(db: Database, database_url: str) -> None:
    with StubSite() as elsewhere, StubSite() as site:
        away = elsewhere.url_for("/catalogue/stolen_1/index.html", host="localhost")
        site.pages.update(
            {
                "/offsite/index.html": Page(status=301, headers={"Location": away}),
                "/offsite-schemeless/index.html": Page(status=302, headers={"Location": away.removeprefix("http:")}),
                "/hop/index.html": Page(status=302, headers={"Location": "/offsite/index.html"}),
                "/loop/a.html": Page(status=302, headers={"Location": "/loop/b.html"}),
                "/loop/b.html": Page(status=302, headers={"Location": "a.html"}),
            }
        )
        config = sandbox_config(site.url_for("/"), mode="browser", concurrency=2, max_attempts=3, timeout_s=10.0)
        prepare(db, config)
        entries = ["/offsite/index.html", "/offsite-schemeless/index.html", "/hop/index.html", "/loop/a.html"]
        queue = make_queue(db, config)
        for path in entries:
            queue.enqueue(DETAIL, {"url": site.url_for(path), "category": "Travel"}, priority=DETAIL_PRIORITY)
        drain(database_url, config, task_types=(DETAIL,), workers=1)
        assert elsewhere.total_hits() == 0, elsewhere.hits

    tasks = _tasks(db)
    kinds = {path: tasks[site.url_for(path)]["error"].split(":", 1)[0] for path in entries}
    assert kinds == {
        "/offsite/index.html": "offsite_redirect",
        "/offsite-schemeless/index.html": "offsite_redirect",
        "/hop/index.html": "offsite_redirect",
        "/loop/a.html": "redirect_loop",
    }
    assert {(t["status"], t["attempts"]) for t in tasks.values()} == {("failed", 1)}
    assert db.query("SELECT count(*) AS n FROM books")[0]["n"] == 0


@pytest.mark.parametrize(
    "url",
    ["ht!tp://", "", "http://[::1", "http://", "javascript:alert(1)", "http://127.0.0.1:99999/x", "  ", None, 42],
)
def test_malformed_urls_are_refused_by_the_queue_with_a_clear_error(db: Database, url: Any) -> None:
    queue = TaskQueue(db, task_types=TASK_TYPES)
    with pytest.raises(ValueError, match=r"url|URL") as raised:
        queue.enqueue(DETAIL, {"url": url})
    assert "\n" not in str(raised.value)
    # A batch with one bad URL writes nothing at all.
    from book_assets.queue import NewTask

    with pytest.raises(ValueError):
        queue.enqueue_many([NewTask(DETAIL, {"url": "http://127.0.0.1/ok.html"}), NewTask(DETAIL, {"url": url})])
    assert task_counts(db) == {}


def _cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "book_assets.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("case", "args", "settings", "named"),
    [
        ("negative weight", ["--weights", "weights.json"], {}, "Travel"),
        ("zero concurrency (option)", ["--concurrency", "0"], {}, "--concurrency"),
        ("zero concurrency (env)", [], {"concurrency": 0}, "BOOK_PIPELINE_CONCURRENCY"),
        ("bad fetch mode (env)", [], {"fetch_mode": "telnet"}, "BOOK_PIPELINE_FETCH_MODE"),
        ("unreachable database", [], {"database_url": "postgresql://u:pw@127.0.0.1:1/nowhere"}, "127.0.0.1:1"),
        ("not a database URL", [], {"database_url": "mysql://u@127.0.0.1/x"}, "DATABASE_URL"),
    ],
)
def test_invalid_crawl_settings_fail_in_one_line_and_write_nothing(
    case: str, args: list[str], settings: dict[str, Any], named: str, db: Database, database_url: str, tmp_path: Path
) -> None:
    (tmp_path / "weights.json").write_text('{"Travel": -1, "*": 1}')
    env = worker_env(settings.pop("database_url", database_url), "http://127.0.0.1:9/", **settings)
    proc = _cli(["crawl", "--no-progress", *args], env, tmp_path)
    stderr = proc.stderr.strip()
    errors = [line for line in stderr.splitlines() if line.lower().startswith("error")]
    assert proc.returncode == 2, (case, proc.returncode, stderr)
    assert "Traceback" not in stderr + proc.stdout, stderr
    assert len(errors) == 1 and named in errors[0], stderr
    assert "pw@" not in stderr
    assert task_counts(db) == {} and db.query("SELECT count(*) AS n FROM books")[0]["n"] == 0


def test_a_bad_cron_in_the_environment_fails_the_definitions_load_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from book_assets.definitions import build_definitions
    from book_assets.settings import ConfigError

    monkeypatch.setenv("BOOK_PIPELINE_SCHEDULE_CRON", "not a cron")
    with pytest.raises(ConfigError) as raised:
        build_definitions()
    message = str(raised.value)
    assert "BOOK_PIPELINE_SCHEDULE_CRON" in message and "'not a cron'" in message and "\n" not in message
