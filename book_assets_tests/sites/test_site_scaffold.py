"""``book-pipeline site new NAME``: a new catalogue's definition and tests, written into a scratch project.

What it writes must type-check, lint and import as it stands, its test must fail naming what to fill until
the TODO marks are done and pass once they are, the registry must reach it by name with no edit of its own, and,
once filled, it must crawl a local copy and store its records in the generic record store, which ``status`` and
``export`` read.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import dagster as dg
import pytest
from click.testing import CliRunner

import book_assets.sites
from book_assets.cli import main
from book_assets.db.connection import Cursor, Database
from book_assets.scraper.errors import NotAListingPage
from book_assets.scraper.fetching import build_result
from book_assets.settings import PROJECT_ROOT, ConfigError
from book_assets.sites.registry import known, site_named
from book_assets_tests.conftest import child_env

CLI = [sys.executable, "-m", "book_assets.cli"]
NAME = "shop"
#: A listing and a detail page of a made-up shop, and the selectors that read them.
LISTING = '<html><body><ul class="items"><li><a href="item/1/">One</a></li></ul><a class="next" href="page/2/">next</a>'
DETAIL = '<html><body><div class="item"><h1> The  first item </h1></div></body></html>'
NO_IDENTIFIER = "is not a lowercase Python identifier (letters, digits, _; not a keyword)"
FILLED = {
    '"TODO-listing-mark"': '"ul.items"',
    '"TODO-detail-link[href]"': '"ul.items a[href]"',
    '"TODO-next-link[href]"': '"a.next[href]"',
    '"TODO-detail-mark"': '"div.item"',
    '"TODO-title"': '"h1"',
}


def scaffold(into: Path, name: str = NAME) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "site", "new", name, "--into", str(into), "--base-url", "http://127.0.0.1:8800/"],
        capture_output=True,
        text=True,
        timeout=120,
        env=child_env(),
    )


def run_generated_tests(into: Path) -> subprocess.CompletedProcess[str]:
    """The generated tests, run with the scratch project's sites beside the installed ones."""
    program = (
        "import sys, book_assets.sites, pytest\n"
        f"book_assets.sites.__path__.append({str(into / 'book_assets' / 'sites')!r})\n"
        f"sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', {str(into / 'book_assets_tests' / 'sites' / NAME)!r}]))"
    )
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, cwd=into, env=child_env()
    )


@pytest.fixture
def scaffolded(tmp_path: Path) -> Path:
    result = scaffold(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    return tmp_path


def test_site_new_writes_a_definition_package_and_its_tests(scaffolded: Path) -> None:
    written = sorted(p.relative_to(scaffolded).as_posix() for p in scaffolded.rglob("*") if p.is_file())
    assert written == [
        "book_assets/sites/shop/__init__.py",
        "book_assets/sites/shop/definition.py",
        "book_assets_tests/sites/shop/__init__.py",
        "book_assets_tests/sites/shop/pages/README.md",
        "book_assets_tests/sites/shop/test_shop_parsers_unit.py",
    ]
    definition = (scaffolded / "book_assets/sites/shop/definition.py").read_text(encoding="utf-8")
    assert "class ShopSite:" in definition and 'DEFAULT_BASE_URL = "http://127.0.0.1:8800/"' in definition
    assert "$" not in definition


def test_the_written_files_type_check_and_lint_clean(scaffolded: Path) -> None:
    package = scaffolded / "book_assets" / "sites" / NAME
    mypy = subprocess.run(
        [sys.executable, "-m", "mypy", str(package / "__init__.py"), str(package / "definition.py")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=PROJECT_ROOT,
    )
    assert mypy.returncode == 0, mypy.stdout + mypy.stderr
    config = ["--config", str(PROJECT_ROOT / "pyproject.toml")]
    first_party = ["--config", "lint.isort.known-first-party=['book_assets', 'book_assets_tests']"]
    ruff = [str(Path(sys.executable).parent / "ruff")]
    lint = subprocess.run([*ruff, "check", *config, *first_party, "."], capture_output=True, text=True, cwd=scaffolded)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    formatted = subprocess.run(
        [*ruff, "format", "--check", *config, "."], capture_output=True, text=True, cwd=scaffolded
    )
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr


def test_the_generated_test_fails_naming_the_page_to_record_until_it_is_filled(scaffolded: Path) -> None:
    result = run_generated_tests(scaffolded)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "2 failed, 2 passed" in result.stdout
    assert "TODO(shop): record a page as" in result.stdout and "pages/listing.html" in result.stdout


def test_the_generated_test_names_the_selectors_to_fill_once_pages_are_recorded(scaffolded: Path) -> None:
    pages = scaffolded / "book_assets_tests" / "sites" / NAME / "pages"
    (pages / "listing.html").write_text(LISTING, encoding="utf-8")
    (pages / "detail.html").write_text(DETAIL, encoding="utf-8")
    result = run_generated_tests(scaffolded)
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        "TODO(shop): the recorded listing.html does not parse (NotAListingPage: no TODO-listing-mark)" in result.stdout
    )


def fill(into: Path) -> None:
    """Record the shop's pages and fill the written definition's selectors, as a user does."""
    pages = into / "book_assets_tests" / "sites" / NAME / "pages"
    (pages / "listing.html").write_text(LISTING, encoding="utf-8")
    (pages / "detail.html").write_text(DETAIL, encoding="utf-8")
    definition = into / "book_assets" / "sites" / NAME / "definition.py"
    text = definition.read_text(encoding="utf-8")
    for todo, selector in FILLED.items():
        text = text.replace(todo, selector)
    definition.write_text(text, encoding="utf-8")


def test_the_generated_test_passes_once_the_selectors_read_the_recorded_pages(scaffolded: Path) -> None:
    fill(scaffolded)
    result = run_generated_tests(scaffolded)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout


@pytest.fixture
def beside_the_shipped_sites(scaffolded: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The scratch project's sites folder searched after the installed one, as a site written into the project
    is; the modules imported from it are forgotten afterwards."""
    monkeypatch.setattr(
        book_assets.sites, "__path__", [*book_assets.sites.__path__, str(scaffolded / "book_assets/sites")]
    )
    try:
        yield scaffolded
    finally:
        for module in [
            m for m in sys.modules if m == f"book_assets.sites.{NAME}" or m.startswith(f"book_assets.sites.{NAME}.")
        ]:
            del sys.modules[module]


def test_the_registry_reaches_a_written_definition_by_its_name(beside_the_shipped_sites: Path) -> None:
    assert known() == ("books", "quotes", "shop")
    site = site_named(NAME)
    assert site.name == NAME and [kind.name for kind in site.page_kinds] == ["shop_listing", "shop_detail"]
    assert site_named(NAME) is site
    with pytest.raises(NotAListingPage, match="no TODO-listing-mark"):
        site.parse_listing(LISTING, "http://127.0.0.1:8800/")


def test_a_definition_that_does_not_load_is_one_line_naming_it(beside_the_shipped_sites: Path) -> None:
    definition = beside_the_shipped_sites / "book_assets" / "sites" / NAME / "definition.py"
    definition.write_text("SITE = (\n", encoding="utf-8")
    message = r"^site shop: its definition book_assets\.sites\.shop\.definition does not load: SyntaxError: [^\n]*$"
    with pytest.raises(ConfigError, match=message):
        site_named(NAME)


def test_the_code_location_serves_a_written_definition_as_a_catalogue_of_its_own(
    beside_the_shipped_sites: Path,
) -> None:
    from book_assets.definitions import build_definitions
    from book_assets.defs.crawl.catalogue import served_sites

    assert [site.name for site in served_sites()] == ["books", "quotes", NAME]
    repo = build_definitions().get_repository_def()
    assert {"shop/listing_discovery", "shop/details"} <= {k.to_user_string() for k in repo.assets_defs_by_key}
    jobs = {job.name for job in repo.get_all_jobs()}
    assert {"shop_full_refresh_job", "shop_recrawl_failed_job", "shop_crawl_queue_job", "shop_drain_queue_job"} <= jobs
    schedule = repo.get_schedule_def("shop_daily_full_refresh")
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    checks = {k.name for k in repo.asset_graph.asset_check_keys if k.asset_key.path[0] == NAME}
    assert checks == {
        "unique_urls",
        "raw_html_present",
        "required_fields_present",
        "crawl_complete",
        "found_records",
        "no_failed_listing_pages",
    }


def test_a_definition_that_does_not_load_is_left_out_of_the_code_location_with_a_warning(
    beside_the_shipped_sites: Path,
) -> None:
    from book_assets.defs.crawl.catalogue import served_sites

    definition = beside_the_shipped_sites / "book_assets" / "sites" / NAME / "definition.py"
    definition.write_text("SITE = (\n", encoding="utf-8")
    with pytest.warns(UserWarning, match=r"^site shop: its definition .* does not load: SyntaxError: .*serves no"):
        served = served_sites()
    assert [site.name for site in served] == ["books", "quotes"]


def test_a_definition_that_binds_no_site_of_its_name_is_one_line_naming_it(beside_the_shipped_sites: Path) -> None:
    definition = beside_the_shipped_sites / "book_assets" / "sites" / NAME / "definition.py"
    definition.write_text("SITE = None\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^site shop: book_assets\.sites\.shop\.definition binds no SITE whose name"):
        site_named(NAME)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("9lives", NO_IDENTIFIER),
        ("my-shop", NO_IDENTIFIER),
        ("class", NO_IDENTIFIER),
        ("Shop", NO_IDENTIFIER),
        ("quotes", "is taken (known sites: books, quotes)"),
        ("registry", "is taken (known sites: books, quotes)"),
        ("generic", "is taken (known sites: books, quotes)"),
        ("_shop", NO_IDENTIFIER),
        ("café", NO_IDENTIFIER),
    ],
)
def test_a_name_that_cannot_be_a_site_is_refused_in_one_line_and_nothing_is_written(
    tmp_path: Path, name: str, why: str
) -> None:
    result = CliRunner().invoke(main, ["site", "new", name, "--into", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: site name {name!r} {why}\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.unit
@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://shop.example/", "is not an http(s) URL"),
        ("shop.example", "is not an http(s) URL"),
        ('https://shop.example/"', "holds a quote, a backslash, a blank or a control character: percent-encode it"),
        ("https://shop.example/a b", "holds a quote, a backslash, a blank or a control character: percent-encode it"),
    ],
)
def test_a_start_page_that_cannot_be_written_into_a_definition_is_refused_and_nothing_is_written(
    tmp_path: Path, url: str, why: str
) -> None:
    result = CliRunner().invoke(main, ["site", "new", NAME, "--into", str(tmp_path), "--base-url", url])
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: --base-url {url!r} {why}\n"
    assert list(tmp_path.iterdir()) == []


def test_a_site_that_exists_in_the_project_is_refused_and_left_as_it_is(scaffolded: Path) -> None:
    before = {p: p.read_bytes() for p in scaffolded.rglob("*") if p.is_file()}
    result = scaffold(scaffolded)
    assert result.returncode == 2
    assert result.stderr == f"error: site 'shop' already exists: book_assets/sites/shop is there in {scaffolded}\n"
    assert {p: p.read_bytes() for p in scaffolded.rglob("*") if p.is_file()} == before


SHOP_PAGES = {"/": LISTING, "/item/1/": DETAIL}


class _Shop(BaseHTTPRequestHandler):
    """A made-up shop: its listing at ``/``, its item at ``/item/1/``, nothing else. Each page carries an ETag (its
    body's hash) and answers a request that sends it back with a 304."""

    pages: ClassVar[dict[str, str]] = SHOP_PAGES
    #: The paths answered with a 304, in turn.
    not_modified: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        page = self.pages.get(self.path)
        body = (page or "<html><body>Not Found</body></html>").encode()
        etag = f'"{hashlib.sha256(body).hexdigest()[:16]}"'
        if page and self.headers.get("If-None-Match") == etag:
            self.not_modified.append(self.path)
            self.send_response(304)
            self.send_header("ETag", etag)
            self.end_headers()
            return
        self.send_response(200 if page else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        if page:
            self.send_header("ETag", etag)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def shop_server() -> Iterator[str]:
    yield from serve(_Shop)


def test_recorded_pages_are_saved_as_the_fixtures_the_generated_test_reads(tmp_path: Path, shop_server: str) -> None:
    result = subprocess.run(
        [
            *CLI,
            "site",
            "new",
            NAME,
            "--into",
            str(tmp_path),
            "--record",
            shop_server,
            "--record",
            f"{shop_server}item/1/",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=child_env(),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    pages = tmp_path / "book_assets_tests" / "sites" / NAME / "pages"
    assert (pages / "listing.html").read_text(encoding="utf-8") == LISTING
    assert (pages / "detail.html").read_text(encoding="utf-8") == DETAIL
    test = (pages.parent / f"test_{NAME}_parsers_unit.py").read_text(encoding="utf-8")
    assert f'LISTING_URL = "{shop_server}"' in test and f'DETAIL_URL = "{shop_server}item/1/"' in test
    generated = run_generated_tests(tmp_path)
    assert "does not parse (NotAListingPage: no TODO-listing-mark)" in generated.stdout


def test_a_page_that_cannot_be_recorded_is_one_line_and_nothing_is_written(tmp_path: Path, shop_server: str) -> None:
    result = subprocess.run(
        [*CLI, "site", "new", NAME, "--into", str(tmp_path), "--record", f"{shop_server}missing/"],
        capture_output=True,
        text=True,
        timeout=120,
        env=child_env(),
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert (
        result.stderr.startswith(f"error: --record {shop_server}missing/: http_404") and result.stderr.count("\n") == 1
    )
    assert list(tmp_path.iterdir()) == []


def _item(title: str) -> str:
    return f'<html><body><div class="item"><h1>{title}</h1></div></body></html>'


#: A shop of two listing pages and three items, which the filled selectors read.
CRAWLED_SHOP = {
    "/": '<html><body><ul class="items"><li><a href="item/1/">One</a></li><li><a href="item/2/">Two</a></li></ul>'
    '<a class="next" href="page/2/">next</a></body></html>',
    "/page/2/": '<html><body><ul class="items"><li><a href="/item/3/">Three</a></li></ul></body></html>',
    "/item/1/": _item(" The  first item "),
    "/item/2/": _item("The second item"),
    "/item/3/": _item("The third item"),
}


class _CrawledShop(_Shop):
    pages: ClassVar[dict[str, str]] = dict(CRAWLED_SHOP)
    not_modified: ClassVar[list[str]] = []


@pytest.fixture
def crawled_shop() -> Iterator[str]:
    """The shop of :data:`CRAWLED_SHOP` served: a test may change a page of ``_CrawledShop.pages``."""
    _CrawledShop.pages = dict(CRAWLED_SHOP)
    _CrawledShop.not_modified.clear()
    yield from serve(_CrawledShop)


def project_env(into: Path, database_url: str) -> dict[str, str]:
    """The environment of a command run in the scratch project on the test database: one worker, plain HTTP, no
    politeness interval (the shop is ours). Its sites are searched beside the installed ones by every process of
    the command, its crawl's worker processes included (a ``sitecustomize`` on ``PYTHONPATH``), as a site
    written into the project is found."""
    boot = into / "boot"
    boot.mkdir(exist_ok=True)
    (boot / "sitecustomize.py").write_text(
        f"import book_assets.sites\nbook_assets.sites.__path__.append({str(into / 'book_assets' / 'sites')!r})\n",
        encoding="utf-8",
    )
    settings = {"WORKERS": "1", "FETCH_MODE": "http", "MIN_INTERVAL_S": "0", "DATA_DIR": str(into / ".data")}
    return child_env(
        DATABASE_URL=database_url, PYTHONPATH=str(boot), **{f"BOOK_PIPELINE_{k}": v for k, v in settings.items()}
    )


def run_cli(into: Path, database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``book-pipeline ARGS`` in the scratch project (:func:`project_env`)."""
    env = project_env(into, database_url)
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, cwd=into, env=env)


def test_a_filled_site_crawls_and_stores_its_records_which_status_and_export_show(
    scaffolded: Path, crawled_shop: str, db: Database, database_url: str
) -> None:
    fill(scaffolded)
    first = run_cli(scaffolded, database_url, "crawl", "--site", NAME, "--base-url", crawled_shop)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    rows = db.query("SELECT url, fields, category, version, raw_html, fetched_at FROM site_records ORDER BY url")
    assert [(r["url"], r["fields"], r["version"]) for r in rows] == [
        (f"{crawled_shop}item/1/", {"title": "The first item"}, 1),
        (f"{crawled_shop}item/2/", {"title": "The second item"}, 1),
        (f"{crawled_shop}item/3/", {"title": "The third item"}, 1),
    ]
    assert [r["raw_html"] for r in rows] == [CRAWLED_SHOP[f"/item/{n}/"] for n in (1, 2, 3)]

    _CrawledShop.pages["/item/2/"] = _item("The second item, revised")
    again = run_cli(scaffolded, database_url, "crawl", "--site", NAME, "--base-url", crawled_shop)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    recrawled = db.query("SELECT fields ->> 'title' AS title, version, fetched_at FROM site_records ORDER BY url")
    assert {"/item/1/", "/item/3/"} <= set(_CrawledShop.not_modified) and "/item/2/" not in _CrawledShop.not_modified
    # items 1 and 3 answered 304: their records stand, seen again; item 2 changed: its record is updated
    assert [(r["title"], r["version"]) for r in recrawled] == [
        ("The first item", 1),
        ("The second item, revised", 2),
        ("The third item", 1),
    ]
    assert all(c["fetched_at"] > r["fetched_at"] for c, r in zip(recrawled, rows, strict=True))

    status = run_cli(scaffolded, database_url, "status", "--site", NAME)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "records total 3 / unique URLs 3 / with raw HTML 3; versions 4" in status.stdout

    exported = run_cli(scaffolded, database_url, "export", "--site", NAME, "--into", str(scaffolded / "out"))
    assert exported.returncode == 0, exported.stdout + exported.stderr
    assert exported.stdout == f"wrote 3 {NAME} to {scaffolded / 'out' / f'{NAME}.jsonl'}\n"
    lines = (scaffolded / "out" / f"{NAME}.jsonl").read_text(encoding="utf-8").splitlines()
    exported_rows = sorted((json.loads(line) for line in lines), key=lambda row: row["url"])  # in id order: as stored
    assert [row["title"] for row in exported_rows] == ["The first item", "The second item, revised", "The third item"]

    reextracted = run_cli(scaffolded, database_url, "reextract", "--site", NAME)
    assert reextracted.returncode == 0, reextracted.stdout + reextracted.stderr
    assert reextracted.stdout.startswith("re-extracted 3 records: 0 changed, 0 unparseable"), reextracted.stdout

    refused = run_cli(scaffolded, database_url, "changes", "--site", NAME)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stdout + refused.stderr
    assert "keeps no versions: changes needs a store of its own" in refused.stderr


def test_a_filled_sites_data_checks_hold_on_its_stored_records_and_catch_a_record_without_its_title(
    beside_the_shipped_sites: Path, db: Database
) -> None:
    fill(beside_the_shipped_sites)
    site = site_named(NAME)
    url = "http://127.0.0.1:8800/item/1/"
    html = _item("The first item")
    record = site.parse_detail(html, None, url)
    untitled = replace(record, url="http://127.0.0.1:8800/item/2/", title="")
    fetched = build_result(
        url=url, final_url=url, status=200, headers={}, body=html.encode(), fetched_at=datetime.now(UTC), elapsed_s=0.0
    )
    for stored in (record, untitled):

        def _write(cur: Cursor, r: Any = stored) -> None:
            site.write_detail(cur, r, fetched, requested_url=r.url)

        db.run(_write)
    results = {check.name: db.query(check.sql, check.params)[0] for check in site.data_checks}
    assert {name: int(row["bad"]) for name, row in results.items()} == {
        "unique_urls": 0,
        "raw_html_present": 0,
        "required_fields_present": 1,
    }
    assert list(results["required_fields_present"]["sample"]) == [untitled.url]


#: The shop's full refresh job run in process through Dagster, its result's success and checks printed as JSON.
FULL_REFRESH = """
import json, sys
import dagster as dg
from book_assets.defs.crawl.assets import crawl_asset
from book_assets.defs.crawl.checks import crawl_checks
from book_assets.defs.crawl.jobs import crawl_jobs
from book_assets.defs.resources import (
    ArchiveResource, DatabaseResource, FetcherResource, SchedulingResource, SiteResource,
)
from book_assets.sites.registry import site_named

site = site_named("shop")
definitions = dg.Definitions(
    assets=[crawl_asset(site)],
    asset_checks=crawl_checks(site).every,
    jobs=[crawl_jobs(site).full_refresh],
    resources={
        "database": DatabaseResource(url=sys.argv[1]),
        "site": SiteResource(base_url=sys.argv[2], min_interval_s=0.0),
        "fetcher": FetcherResource(fetch_mode="http", workers=1, concurrency=4),
        "scheduling": SchedulingResource(),
        "archive": ArchiveResource(),
    },
    executor=dg.in_process_executor,
)
with dg.DagsterInstance.ephemeral() as instance:
    result = definitions.resolve_job_def("shop_full_refresh_job").execute_in_process(
        instance=instance, raise_on_error=False
    )
checks = {e.check_name: [e.passed, e.description] for e in result.get_asset_check_evaluations()}
print(json.dumps({"success": result.success, "checks": checks}))
"""


def test_a_filled_sites_dagster_full_refresh_stores_its_records_and_passes_its_checks(
    scaffolded: Path, crawled_shop: str, db: Database, database_url: str
) -> None:
    fill(scaffolded)
    env = project_env(scaffolded, database_url)
    run = subprocess.run(
        [sys.executable, "-c", FULL_REFRESH, database_url, crawled_shop],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=scaffolded,
        env=env,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["success"], result
    assert {name: passed for name, (passed, _) in result["checks"].items()} == {
        "unique_urls": True,
        "raw_html_present": True,
        "required_fields_present": True,
        "crawl_complete": True,
        "found_records": True,
        "no_failed_listing_pages": True,
    }
    assert result["checks"]["required_fields_present"][1] == "all 3 records: required fields present (title)"
    assert db.query("SELECT count(*) AS n FROM site_records WHERE site = 'shop'")[0]["n"] == 3
