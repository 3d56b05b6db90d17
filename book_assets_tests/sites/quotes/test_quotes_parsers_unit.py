"""quotes.toscrape.com's parsers on pages rendered from the application's templates, and on pages that are
not what they should be: a 404, an error page in the site's template, a page cut off, quotes or authors that
lack a field."""

from __future__ import annotations

from datetime import date

import pytest

from book_assets.scraper.errors import ContractViolation, ErrorKind, NotAListingPage
from book_assets.sites.quotes.parsers import (
    NotAnAuthorPage,
    author_page_url,
    parse_author,
    parse_birth_date,
    parse_quotes_page,
)
from book_assets_tests.sites.quotes.pages import EINSTEIN, SITE, fixture

FIRST_TEXT = (
    "\u201cThe world as we have created it is a process of our thinking. It cannot be changed without changing our"
    " thinking.\u201d"
)


def test_the_first_page_has_its_ten_quotes_with_text_author_link_and_tags_in_page_order() -> None:
    page = parse_quotes_page(fixture("index.html"), SITE)
    assert len(page.quotes) == 10
    first = page.quotes[0]
    assert first.text == FIRST_TEXT
    assert (first.author, first.author_url) == ("Albert Einstein", EINSTEIN)
    assert first.tags == ("change", "deep-thoughts", "thinking", "world")
    assert page.next_url == SITE + "page/2/"
    assert page.tag is None


def test_author_links_are_each_author_once_in_page_order_with_the_pages_trailing_slash() -> None:
    page = parse_quotes_page(fixture("index.html"), SITE)
    assert page.author_links[:3] == (EINSTEIN, SITE + "author/j-k-rowling/", SITE + "author/jane-austen/")
    assert len(page.author_links) == len(set(page.author_links)) == 8


def test_entities_in_a_quote_are_decoded_and_the_last_page_has_no_next() -> None:
    page = parse_quotes_page(fixture("page-10.html"), SITE + "page/10/")
    assert page.quotes[0].text.startswith('\u201cThe truth." Dumbledore sighed. "It is a beautiful')
    assert len(page.quotes) == 10 and page.next_url is None


def test_a_tag_page_names_its_tag_and_links_its_next_page() -> None:
    page = parse_quotes_page(fixture("tag-love.html"), SITE + "tag/love/")
    assert page.tag == "love"
    assert all("love" in quote.tags for quote in page.quotes)
    assert page.next_url == SITE + "tag/love/page/2/"


def test_a_listing_links_the_tags_of_its_sidebar_in_order_and_the_js_page_links_none() -> None:
    page = parse_quotes_page(fixture("index.html"), SITE)
    top_ten = "love inspirational life humor books reading friendship friends truth simile"
    assert [name for name, _url in page.tag_links] == top_ten.split()
    assert page.tag_links[0] == ("love", SITE + "tag/love/")
    assert parse_quotes_page(fixture("js-rendered.html"), SITE + "js/").tag_links == ()


def test_the_page_that_says_no_quotes_found_is_an_empty_listing() -> None:
    page = parse_quotes_page(fixture("page-11.html"), SITE + "page/11/")
    assert (page.quotes, page.next_url, page.author_links) == ((), None, ())


def test_the_served_js_page_is_refused_so_that_adaptive_mode_renders_it() -> None:
    with pytest.raises(NotAListingPage, match="written by a script") as refused:
        parse_quotes_page(fixture("js.html"), SITE + "js/")
    assert refused.value.kind is ErrorKind.NOT_A_LISTING_PAGE


def test_the_rendered_js_page_has_the_same_quotes_as_the_first_page_without_author_links() -> None:
    rendered = parse_quotes_page(fixture("js-rendered.html"), SITE + "js/")
    served = parse_quotes_page(fixture("index.html"), SITE)
    assert [(q.text, q.author, q.tags) for q in rendered.quotes] == [(q.text, q.author, q.tags) for q in served.quotes]
    assert all(q.author_url is None for q in rendered.quotes) and rendered.author_links == ()
    assert rendered.next_url == SITE + "js/page/2/"


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("not-found.html", "'Not Found'"),
        ("error-in-template.html", "'Something went wrong'"),
        ("author-albert-einstein.html", "is an author page"),
    ],
)
def test_a_page_without_quotes_that_is_no_explicit_end_is_not_a_listing(name: str, reason: str) -> None:
    with pytest.raises(NotAListingPage, match=reason):
        parse_quotes_page(fixture(name), SITE + "page/2/")


def test_a_page_cut_off_before_its_pager_is_not_a_listing() -> None:
    html = fixture("index.html")
    cut = html[: html.index("<nav>")]
    with pytest.raises(NotAListingPage, match="no pager"):
        parse_quotes_page(cut, SITE)


def test_a_quote_without_its_author_breaks_the_contract() -> None:
    html = fixture("index.html").replace('<small class="author" itemprop="author">J.K. Rowling</small>', "", 1)
    with pytest.raises(ContractViolation) as broken:
        parse_quotes_page(html, SITE)
    assert broken.value.fields == ("author",) and broken.value.kind is ErrorKind.MISSING_FIELD


def test_a_quote_without_its_text_breaks_the_contract() -> None:
    html = fixture("index.html").replace('class="text"', 'class="quote-text"', 1)
    with pytest.raises(ContractViolation) as broken:
        parse_quotes_page(html, SITE)
    assert broken.value.fields == ("text",)


def test_an_empty_tag_is_a_bad_value() -> None:
    html = fixture("index.html").replace(">deep-thoughts</a>", "> </a>", 1)
    with pytest.raises(ContractViolation) as broken:
        parse_quotes_page(html, SITE)
    assert broken.value.fields == ("tags",) and broken.value.kind is ErrorKind.BAD_VALUE


def test_a_quote_without_tags_has_an_empty_tuple() -> None:
    html = fixture("index.html")
    start = html.index('<a class="tag" href="/tag/change/page/1/">')
    end = html.index("</div>", start)
    page = parse_quotes_page(html[:start] + html[end:], SITE)
    assert page.quotes[0].tags == ()
    assert page.quotes[1].tags == ("abilities", "choices")


def test_the_about_link_is_the_author_link_even_after_another_link() -> None:
    goodreads = '<a href="http://goodreads.com/author/show/9810.Albert_Einstein">(Goodreads page)</a>'
    html = fixture("index.html").replace(
        '<a href="/author/albert-einstein">', goodreads + '<a href="/author/albert-einstein">', 1
    )
    assert parse_quotes_page(html, SITE).quotes[0].author_url == EINSTEIN


def test_an_author_page_reads_name_birth_date_place_and_description() -> None:
    author = parse_author(fixture("author-albert-einstein.html"), EINSTEIN)
    assert (author.url, author.name) == (EINSTEIN, "Albert Einstein")
    assert (author.birth_date, author.birth_place) == (date(1879, 3, 14), "in Ulm, Germany")
    assert author.description is not None
    assert author.description.startswith("In 1879, Albert Einstein was born in Ulm, Germany. He completed")
    assert author.description.endswith("http://www.nobelprize.org/nobel_prize...")


def test_the_page_of_an_unknown_author_is_not_an_author_page() -> None:
    with pytest.raises(NotAnAuthorPage, match="no name") as refused:
        parse_author(fixture("author-unknown.html"), SITE + "author/nobody/")
    assert refused.value.kind is ErrorKind.NOT_A_DETAIL_PAGE


@pytest.mark.parametrize("name", ["not-found.html", "error-in-template.html", "index.html"])
def test_a_page_without_an_author_box_is_not_an_author_page(name: str) -> None:
    with pytest.raises(NotAnAuthorPage, match=r"no div\.author-details"):
        parse_author(fixture(name), EINSTEIN)


def test_an_author_page_without_a_birth_date_breaks_the_contract() -> None:
    html = fixture("author-albert-einstein.html").replace("March 14, 1879", "")
    with pytest.raises(ContractViolation) as broken:
        parse_author(html, EINSTEIN)
    assert broken.value.fields == ("birth_date",) and broken.value.kind is ErrorKind.MISSING_FIELD


def test_a_birth_date_that_is_no_date_is_a_bad_value() -> None:
    html = fixture("author-albert-einstein.html").replace("March 14, 1879", "Smarch 14, 1879")
    with pytest.raises(ContractViolation, match="not a date: 'Smarch 14, 1879'") as broken:
        parse_author(html, EINSTEIN)
    assert broken.value.kind is ErrorKind.BAD_VALUE


def test_an_author_page_without_a_description_has_none() -> None:
    html = fixture("author-albert-einstein.html")
    start = html.index('<div class="author-description">') + len('<div class="author-description">')
    author = parse_author(html[:start] + html[html.index("</div>", start) :], EINSTEIN)
    assert author.description is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("March 14, 1879", date(1879, 3, 14)),
        ("June 01, 1926", date(1926, 6, 1)),
        ("december 5,  1901", date(1901, 12, 5)),
        ("February 30, 1900", None),
        ("Smarch 14, 1879", None),
        ("1879-03-14", None),
    ],
)
def test_a_birth_date_is_read_as_the_site_prints_it(text: str, expected: date | None) -> None:
    assert parse_birth_date(text) == expected


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        ("/author/albert-einstein", EINSTEIN),
        ("/author/albert-einstein/", EINSTEIN),
        ("/tag/love", SITE + "tag/love"),
    ],
)
def test_an_author_link_leads_to_the_author_pages_url_with_its_slash(href: str, expected: str) -> None:
    assert author_page_url(SITE + "page/2/", href) == expected
