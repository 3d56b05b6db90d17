"""``book-pipeline site new NAME``: a new catalogue's definition and tests, written into a scratch project.

What it writes must type-check, lint and import as it stands, its test must fail naming what to fill until
the TODO marks are done and pass once they are, and the registry must reach it by name with no edit of its own.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import dagster as dg
import pytest
from click.testing import CliRunner

import book_assets.sites
from book_assets.cli import main
from book_assets.scraper.errors import NotAListingPage
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


def test_the_generated_test_passes_once_the_selectors_read_the_recorded_pages(scaffolded: Path) -> None:
    pages = scaffolded / "book_assets_tests" / "sites" / NAME / "pages"
    (pages / "listing.html").write_text(LISTING, encoding="utf-8")
    (pages / "detail.html").write_text(DETAIL, encoding="utf-8")
    definition = scaffolded / "book_assets" / "sites" / NAME / "definition.py"
    text = definition.read_text(encoding="utf-8")
    for todo, selector in FILLED.items():
        text = text.replace(todo, selector)
    definition.write_text(text, encoding="utf-8")
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
    assert checks == {"crawl_complete", "found_records", "no_failed_listing_pages"}


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
    """A made-up shop: its listing at ``/``, its item at ``/item/1/``, nothing else."""

    def do_GET(self) -> None:
        page = SHOP_PAGES.get(self.path)
        body = (page or "<html><body>Not Found</body></html>").encode()
        self.send_response(200 if page else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def shop_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Shop)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


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
