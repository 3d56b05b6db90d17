"""The engine names no site: what is site-specific is reached through the site's definition
(:mod:`book_assets.sites`), never imported from it or written into the engine.

The engine is the queue, the crawl (worker, discovery, adaptive fetching, the crawl's composition), the archive,
observability, the fetchers and the Dagster layer. None of its modules imports a site definition (a module of
``book_assets.sites`` other than the interface and the registry, or the books' parsers, records, store and
categories the books definition delegates to), and none names a site's host.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from book_assets.settings import PROJECT_ROOT
from book_assets_tests.foundation.test_package_cycles import imports_of

pytestmark = pytest.mark.unit

PACKAGE = PROJECT_ROOT / "book_assets"
ENGINE = [
    *(PACKAGE / name for name in ("queue", "crawl", "archive", "observe", "defs")),
    *(PACKAGE / "scraper" / f"{name}.py" for name in ("fetching", "fetch_http", "fetch_browser", "chromium")),
    *(PACKAGE / "scraper" / f"{name}.py" for name in ("blocking", "softblock", "targets", "charset", "errors")),
]
#: What the engine may import from book_assets.sites: the interface and the registry that names the sites.
INTERFACE = {"book_assets.sites", "book_assets.sites.site", "book_assets.sites.registry"}
#: The modules of the books definition that live outside book_assets.sites (it delegates to them).
BOOKS_MODULES = {
    "book_assets.categories",
    "book_assets.scraper.models",
    "book_assets.scraper.parsers",
    "book_assets.store.books",
}
#: Engine modules that still reach books directly, each with why.
ALLOWED = {
    # `reextract --from-warc` and `replay` rebuild the books table from the archive: a books command whose
    # parse, columns and store are the books' (a site hook for rebuilding from WARC is not in the interface yet).
    "archive/rebuild.py": {"book_assets.scraper.models", "book_assets.scraper.parsers", "book_assets.store.books"},
}
HOST = re.compile(r"toscrape", re.IGNORECASE)


def _engine_files() -> list[Path]:
    files: list[Path] = []
    for entry in ENGINE:
        files += sorted(entry.rglob("*.py")) if entry.is_dir() else [entry]
    return files


def _site_definition(module: str) -> bool:
    if module in BOOKS_MODULES:
        return True
    return module.startswith("book_assets.sites.") and not any(
        module == allowed or module.startswith(f"{allowed}.") for allowed in INTERFACE - {"book_assets.sites"}
    )


def test_the_engine_is_where_the_test_looks() -> None:
    files = _engine_files()
    assert all(path.exists() for path in files)
    assert PACKAGE / "crawl" / "worker.py" in files and PACKAGE / "defs" / "crawl" / "observe.py" in files


def test_no_engine_module_imports_a_site_definition() -> None:
    offenders = []
    for path in _engine_files():
        relative = path.relative_to(PACKAGE).as_posix()
        wrong = {m for m in imports_of(path) if _site_definition(m)} - ALLOWED.get(relative, set())
        offenders += [f"{relative}: imports {module}" for module in sorted(wrong)]
    assert offenders == []


def test_every_allowance_is_still_needed() -> None:
    for relative, modules in ALLOWED.items():
        assert modules <= imports_of(PACKAGE / relative), relative


def test_no_engine_module_names_a_site_host() -> None:
    offenders = [
        f"{path.relative_to(PROJECT_ROOT)}:{n}: {line.strip()}"
        for path in _engine_files()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if HOST.search(line)
    ]
    assert offenders == []


def test_a_site_definition_is_told_from_the_interface() -> None:
    assert _site_definition("book_assets.sites.books") and _site_definition("book_assets.sites.quotes.parsers")
    assert _site_definition("book_assets.store.books")
    assert not _site_definition("book_assets.sites.site") and not _site_definition("book_assets.sites.registry")
    assert not _site_definition("book_assets.sites.site.Role") and not _site_definition("book_assets.store.pages")
