"""The quotes.toscrape.com stand-in: spidyquotes served over HTTP shows exactly its truth, page by page."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from selectolax.lexbor import LexborHTMLParser

from book_assets.sandbox.quotes import fixtures, truth
from book_assets.sandbox.quotes.server import QuotesServer
from book_assets.sandbox.quotes.truth import Author, Quote

FIXTURES = Path(__file__).parents[1] / "fixtures" / "quotes"
DATA = truth.DATA_DIR


def shown_quotes(html: str) -> list[Quote]:
    """The quotes a listing page shows (server-rendered or written by its script), as the truth's type."""
    found = []
    for node in LexborHTMLParser(html).css("div.quote"):
        text, author = node.css_first("span.text"), node.css_first("small.author")
        assert text is not None and author is not None
        link = node.css_first('a[href^="/author/"]')
        slug = (link.attributes["href"] or "").removeprefix("/author/") if link else ""
        tags = tuple(tag.text(strip=True) for tag in node.css("a.tag"))
        found.append(Quote(text.text(), author.text(), slug, tags))
    return found


def shown_author(html: str, slug: str) -> Author:
    tree = LexborHTMLParser(html)

    def text(selector: str) -> str:
        node = tree.css_first(selector)
        assert node is not None, selector
        return node.text()

    return Author(
        name=text("h3.author-title"),
        slug=slug,
        born_date=text("span.author-born-date"),
        born_location=text("span.author-born-location"),
        description=" ".join(text("div.author-description").split()),  # as a browser shows it
    )


def test_truth_has_every_line_of_the_data_files() -> None:
    quote_lines = (DATA / "quotesdb.jl").read_text(encoding="utf-8").splitlines()
    author_lines = (DATA / "authorsdb.jl").read_text(encoding="utf-8").splitlines()
    assert (len(quote_lines), len(author_lines)) == (100, 50)
    assert len(truth.quotes()) == len(quote_lines)
    assert len(truth.authors()) == len(author_lines)
    assert {q.text for q in truth.quotes()} == {json.loads(line)["text"] for line in quote_lines}
    assert {a.name for a in truth.authors().values()} == {json.loads(line)["name"] for line in author_lines}
    assert truth.page_count() == 10
    assert len(truth.tag_counts()) == 137 and truth.tag_counts().most_common(1) == [("love", 14)]


def test_every_quotes_author_has_an_author_page_in_the_truth() -> None:
    assert {q.author_slug for q in truth.quotes()} == set(truth.authors())
    named_differently = {
        (q.author, truth.authors()[q.author_slug].name)
        for q in truth.quotes()
        if q.author != truth.authors()[q.author_slug].name
    }
    assert named_differently == {("Alexandre Dumas fils", "Alexandre Dumas-fils")}  # as the live site shows


def test_every_listing_page_shows_the_truths_quotes_in_order(quotes_site: QuotesServer) -> None:
    for page in range(1, truth.page_count() + 2):
        path = "/" if page == 1 else f"/page/{page}/"
        shown = shown_quotes(httpx.get(quotes_site.url_for(path)).text)
        expected = [q for q in truth.quotes() if q.page == page]
        assert shown == expected, path
        assert [q.author_slug for q in shown] == [q.author_slug for q in expected], path
    assert not expected  # the page past the last one shows none


def test_every_author_page_shows_the_truths_author(quotes_site: QuotesServer) -> None:
    with httpx.Client(base_url=quotes_site.url) as client:
        found = [shown_author(client.get(a.url_path).text, a.slug) for a in truth.authors().values()]
    assert truth.author_differences(found) == []


def test_quotes_link_their_author_by_a_redirect_to_the_author_page(quotes_site: QuotesServer) -> None:
    quote = truth.quotes()[0]
    response = httpx.get(quotes_site.url_for(f"/author/{quote.author_slug}"))
    assert response.status_code == 308
    assert response.headers["location"].endswith(truth.authors()[quote.author_slug].url_path)


def test_a_tag_page_lists_exactly_the_quotes_of_that_tag(quotes_site: QuotesServer) -> None:
    shown = [q for page in (1, 2) for q in shown_quotes(httpx.get(quotes_site.url_for(f"/tag/love/page/{page}/")).text)]
    assert shown == [q for q in truth.quotes() if "love" in q.tags]
    assert len(shown) == truth.tag_counts()["love"]


def test_differences_name_what_a_crawl_got_wrong() -> None:
    first, second = truth.quotes()[:2]
    wrong = Quote(first.text, first.author, first.author_slug, (*first.tags, "extra"))
    problems = truth.quote_differences([wrong, second, Quote("“Not a quote.”", "Nobody", "Nobody", ())])
    assert len(problems) == len(truth.quotes()) - 2 + 2
    assert any(p.startswith("unexpected quote") and "Nobody" in p for p in problems)
    assert any("found" in p and "'extra'" in p for p in problems)


def test_quote_values_hold_nothing_a_script_would_write_as_markup() -> None:
    """/js/ writes text, author and tags unescaped with document.write: equal to the truth only if they hold no
    markup characters."""
    values = [v for q in truth.quotes() for v in (q.text, q.author, *q.tags)]
    assert not [v for v in values if re.search(r"[<>&]", v)]


def test_exactly_the_pages_without_quote_markup_need_javascript(quotes_site: QuotesServer) -> None:
    paths = ["/", "/page/2/", "/tag/love/", "/js/", "/js/page/2/", "/js-delayed/", "/js-onclick/", "/scroll"]
    without_quotes = {p for p in paths if not shown_quotes(httpx.get(quotes_site.url_for(p)).text)}
    assert without_quotes == {p for p in paths if truth.needs_javascript(p)}
    assert {"/js/", "/js/page/2/", "/scroll"} <= without_quotes
    assert not truth.needs_javascript("/author/Albert-Einstein/")


def test_raw_js_page_has_no_quote_markup_and_carries_its_quotes_as_a_script(quotes_site: QuotesServer) -> None:
    raw = httpx.get(quotes_site.url_for("/js/page/2/")).text
    assert shown_quotes(raw) == []
    data = re.search(r"var data = (\[.*?\]);\n", raw, re.S)
    assert data is not None
    texts = [q["text"] for q in json.loads(data.group(1))]
    assert texts == [q.text for q in truth.quotes() if q.page == 2]


@pytest.mark.parametrize("page", fixtures.PAGES, ids=lambda p: p.file)
def test_stand_in_serves_each_recorded_page_byte_for_byte(
    quotes_site: QuotesServer, page: fixtures.RecordedPage
) -> None:
    response = fixtures.fetch(quotes_site, page)
    assert response.status_code == page.status
    assert response.content == (FIXTURES / page.file).read_bytes()


def test_a_scripted_path_answers_its_statuses_in_order_then_serves_the_page() -> None:
    with QuotesServer(scripted={"/author/Albert-Einstein/": [500, 503]}) as server:
        statuses = [httpx.get(server.url_for("/author/Albert-Einstein/")).status_code for _ in range(3)]
        other = httpx.get(server.url_for("/author/Jane-Austen/")).status_code
    assert (statuses, other) == ([500, 503, 200], 200)


def test_a_scripted_status_that_is_no_http_status_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="999"):
        QuotesServer(scripted={"/": [999]})


def test_recorded_pages_manifest_lists_every_recorded_page() -> None:
    manifest = json.loads((FIXTURES / fixtures.MANIFEST).read_text(encoding="utf-8"))
    assert manifest == [{"path": p.path, "file": p.file, "status": p.status} for p in fixtures.PAGES]
    assert {f.name for f in FIXTURES.iterdir()} == {p.file for p in fixtures.PAGES} | {fixtures.MANIFEST}


def test_jquery_the_js_pages_load_is_served_by_the_stand_in(quotes_site: QuotesServer) -> None:
    raw = httpx.get(quotes_site.url_for("/js/")).text
    src = LexborHTMLParser(raw).css_first("script[src]")
    assert src is not None and src.attributes["src"] == "/static/jquery.js"
    script = httpx.get(quotes_site.url_for("/static/jquery.js"))
    assert script.status_code == 200 and script.text.startswith("/*! jQuery v2.1.4")


@pytest.mark.browser
def test_chromium_renders_the_js_pages_quotes_exactly(quotes_site: QuotesServer) -> None:
    from playwright.sync_api import sync_playwright

    from book_assets.scraper.chromium import CHROMIUM_ARGS, find_chromium

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=find_chromium(), args=list(CHROMIUM_ARGS))
        try:
            page = browser.new_page()
            # Nothing outside the stand-in may answer: the page must render from what the stand-in serves.
            page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(quotes_site.url) else r.abort())
            rendered = {}
            for number in (1, 2):
                page.goto(quotes_site.url_for("/js/" if number == 1 else f"/js/page/{number}/"), wait_until="load")
                rendered[number] = shown_quotes(page.content())
        finally:
            browser.close()
    for number, shown in rendered.items():
        expected = [q for q in truth.quotes() if q.page == number]
        # The script writes no "(about)" link: the author's slug is not on the page.
        assert shown == [Quote(q.text, q.author, "", q.tags) for q in expected]


def test_cli_serves_the_stand_in_until_sigterm() -> None:
    command = [sys.executable, "-m", "book_assets.cli", "sandbox", "quotes", "--port", "0", "--no-log-requests"]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        match = re.search(r"100 quotes by 50 authors at (http://127\.0\.0\.1:\d+)/", line)
        assert match, line
        response = httpx.get(match.group(1) + "/page/10/", timeout=30)
        assert response.status_code == 200 and shown_quotes(response.text) == list(truth.quotes()[90:])
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=60) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
