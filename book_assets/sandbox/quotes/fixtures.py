"""The quotes site's recorded pages (``book_assets_tests/fixtures/quotes/``), for the parsers' tests.

``python -m book_assets.sandbox.quotes.fixtures DIR`` records them again from a fresh stand-in; the pages are
deterministic (no dates, no session unless someone logs in), so a recording equals the one before it, and
``book_assets_tests/sandbox/test_quotes_site.py`` holds that the stand-in still serves each byte for byte.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx

from book_assets.sandbox.quotes.server import QuotesServer


@dataclass(frozen=True)
class RecordedPage:
    path: str  # the URL path requested
    file: str  # its file in the fixtures folder
    status: int  # the status the stand-in answers with


PAGES = (
    RecordedPage("/", "index.html", 200),
    RecordedPage("/page/2/", "page-2.html", 200),
    RecordedPage("/page/10/", "page-10.html", 200),  # the last page: no "Next"
    RecordedPage("/page/11/", "page-11.html", 200),  # past the end: "No quotes found!", still a 200
    RecordedPage("/tag/love/", "tag-love.html", 200),
    RecordedPage("/tag/love/page/2/", "tag-love-page-2.html", 200),  # a tag's last page
    RecordedPage("/author/Albert-Einstein/", "author-Albert-Einstein.html", 200),
    RecordedPage("/author/No-Such-Author/", "author-unknown.html", 200),  # a 200 whose fields are all empty
    RecordedPage("/js/", "js.html", 200),  # quotes written by a script (JSON in the page)
    RecordedPage("/js/page/2/", "js-page-2.html", 200),
    RecordedPage("/no/such/page/", "404.html", 404),
)
MANIFEST = "pages.json"


def fetch(server: QuotesServer, page: RecordedPage) -> httpx.Response:
    return httpx.get(server.url_for(page.path), follow_redirects=False, timeout=30)


def record(directory: Path) -> None:
    """Write every page of ``PAGES`` and a manifest (path, file, status) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    with QuotesServer() as server:
        for page in PAGES:
            response = fetch(server, page)
            if response.status_code != page.status:
                raise RuntimeError(f"{page.path}: status {response.status_code}, expected {page.status}")
            (directory / page.file).write_bytes(response.content)
    manifest = [{"path": p.path, "file": p.file, "status": p.status} for p in PAGES]
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m book_assets.sandbox.quotes.fixtures DIR")
    record(Path(sys.argv[1]))
