"""Pure parsers for quotes.toscrape.com pages: functions of ``(html, url)``, no I/O.

The markup is the application's own (zytedata/spidyquotes, ``templates/index.html`` and ``author.html``),
read with selectolax as the books' parsers read theirs (:mod:`book_assets.scraper.parsers`): text with its
whitespace collapsed, links resolved against the page's URL.

A page that is not what it should be raises a ``ParseError`` subclass, never a half-filled record:

- a listing is a page with quotes (``div.quote``), or the page that says "No quotes found!" (past the last
  page, a tag without quotes): an error or maintenance page in the site's template, a 404 page or a page cut
  off before its pager is not an empty listing (:class:`NotAListingPage`);
- the served HTML of ``/js/`` holds its quotes in a script (``var data = [...]``, written by
  ``document.write``), so it has no ``div.quote`` and is refused the same way: the crawl's adaptive mode then
  renders it, and the rendered DOM carries the same ``div.quote`` markup;
- an author page is a page whose author box shows a name (:class:`NotAnAuthorPage` if not: the application
  serves an unknown slug with a 200 and an empty box);
- a quote or an author that breaks its field contract (:data:`~book_assets.sites.quotes.models.QUOTE_CONTRACT`,
  :data:`~book_assets.sites.quotes.models.AUTHOR_CONTRACT`) is a :class:`ContractViolation` naming the fields.
"""

from __future__ import annotations

import re
from datetime import date
from urllib.parse import urlsplit, urlunsplit

from selectolax.lexbor import LexborHTMLParser, LexborNode

from book_assets.scraper.contract import Problem
from book_assets.scraper.errors import ContractViolation, ErrorKind, NotAListingPage, ParseError
from book_assets.scraper.parsers import collapse_ws, resolve_link
from book_assets.sites.quotes.models import AUTHOR_CONTRACT, QUOTE_CONTRACT, Author, Quote, QuotesPage

#: What the listing template prints instead of quotes when a page has none: the explicit end of a listing.
NO_QUOTES = "No quotes found!"
_MONTH_NAMES = "january february march april may june july august september october november december"
_MONTHS = {name: number for number, name in enumerate(_MONTH_NAMES.split(), start=1)}
_DATE_RE = re.compile(r"([A-Za-z]+)\s+(\d{1,2}),\s*(\d{4})")


class NotAnAuthorPage(ParseError):
    """The HTML is not an author page: no author box, or a box without a name (a 404 page, a listing, the
    application's page for an unknown slug). An author page that lacks fields is a :class:`ContractViolation`."""

    kind = ErrorKind.NOT_A_DETAIL_PAGE


def _text(node: LexborNode | None) -> str | None:
    """A node's text with its whitespace collapsed (entities decoded), or None when the node is absent."""
    if node is None:
        return None
    return collapse_ws(node.text(deep=True, separator="", strip=False) or "")


def author_page_url(base: str, href: str) -> str:
    """The author link ``href`` resolved against ``base``, with the trailing slash of the page it leads to.

    The template links ``/author/<slug>`` while the application's route is ``/author/<slug>/``, which the
    slashless form redirects to: the canonical URL is the one with the slash, so a quote's author link equals
    its author page's URL, and the crawl requests each author page once, without the redirect.
    """
    parts = urlsplit(resolve_link(base, href))
    if parts.path.startswith("/author/") and not parts.path.endswith("/"):
        parts = parts._replace(path=parts.path + "/")
    return urlunsplit(parts)


# --------------------------------------------------------------------------- listing pages


def _about_link(quote: LexborNode, url: str) -> str | None:
    """The quote's "(about)" link to its author's page, or None when it shows none."""
    for link in quote.css("a[href]"):
        href = (link.attributes.get("href") or "").strip()
        if href and _text(link) == "(about)":
            return author_page_url(url, href)
    return None


def _parse_quote(node: LexborNode, url: str) -> tuple[Quote | None, list[Problem]]:
    """One ``div.quote`` as a record, or None and the fields of its contract it breaks."""
    text = _text(node.css_first("span.text")) or None
    author = _text(node.css_first("small.author")) or None
    author_url = _about_link(node, url)
    tags = tuple(_text(tag) or "" for tag in node.css("div.tags a.tag"))
    problems = QUOTE_CONTRACT.problems({"text": text, "author": author, "author_url": author_url, "tags": tags})
    if problems or text is None or author is None:
        return None, problems
    return Quote(text=text, author=author, author_url=author_url, tags=tags), []


def _empty_listing_problem(tree: LexborHTMLParser) -> str | None:
    """Why a page without ``div.quote`` is not the explicit end of a listing, or None when it is one."""
    for script in tree.css("script"):
        if "document.write" in (script.text() or ""):
            return "its quotes are written by a script: no div.quote in this HTML (render it)"
    column = tree.css_first("div.col-md-8:has(nav ul.pager)")
    if column is not None and NO_QUOTES in collapse_ws(column.text(deep=False) or ""):
        return None
    heading = _text(tree.css_first("div.col-md-8 h2")) or _text(tree.css_first("h1")) or _text(tree.css_first("title"))
    named = f" (heading {heading[:80]!r})" if heading else ""
    return f"no quotes and no {NO_QUOTES!r}{named}"


def _viewing_tag(tree: LexborHTMLParser) -> str | None:
    """The tag a tag page lists, from its "Viewing tag: <tag>" heading; None on other listings."""
    for heading in tree.css("h3"):
        if (_text(heading) or "").startswith("Viewing tag:"):
            return _text(heading.css_first("a")) or None
    return None


def _tag_links(tree: LexborHTMLParser, url: str) -> tuple[tuple[str, str], ...]:
    """``(tag, absolute URL)`` of each tag the sidebar ("Top Ten tags", ``div.tags-box``) links, in its order."""
    links: dict[str, str] = {}
    for link in tree.css("div.tags-box a.tag[href]"):
        name, href = _text(link), (link.attributes.get("href") or "").strip()
        if name and href:
            links.setdefault(name, resolve_link(url, href))
    return tuple(links.items())


def parse_quotes_page(html: str, url: str) -> QuotesPage:
    """Parse a listing page (``/``, ``/page/N/``, a tag page, the rendered ``/js/``) into a :class:`QuotesPage`.

    Raises:
        NotAListingPage: not a listing (an author page, a 404 or error page, the served ``/js/`` HTML whose
            quotes a script writes) or visibly incomplete (no pager: cut off).
        ContractViolation: a quote without its text or author, or with an empty tag.
    """
    tree = LexborHTMLParser(html)
    if tree.css_first("div.author-details") is not None:
        raise NotAListingPage("is an author page")
    nodes = tree.css("div.quote")
    if not nodes:
        problem = _empty_listing_problem(tree)
        if problem is not None:
            raise NotAListingPage(problem)
    if tree.css_first("nav ul.pager") is None:
        raise NotAListingPage(f"{len(nodes)} quotes but no pager (cut off?)")
    quotes: list[Quote] = []
    problems: dict[tuple[str, str], Problem] = {}
    for node in nodes:
        quote, broken = _parse_quote(node, url)
        problems.update(((p.field, p.reason), p) for p in broken)
        if quote is not None:
            quotes.append(quote)
    if problems:
        order = [spec.name for spec in QUOTE_CONTRACT.fields]
        raise ContractViolation(sorted(problems.values(), key=lambda p: order.index(p.field)))
    next_link = tree.css_first("ul.pager li.next a[href]")
    next_href = (next_link.attributes.get("href") or "").strip() if next_link is not None else ""
    return QuotesPage(
        url=url,
        quotes=tuple(quotes),
        next_url=resolve_link(url, next_href) if next_href else None,
        tag=_viewing_tag(tree),
        author_links=tuple(dict.fromkeys(q.author_url for q in quotes if q.author_url is not None)),
        tag_links=_tag_links(tree, url),
    )


# --------------------------------------------------------------------------- author pages


def parse_birth_date(text: str) -> date | None:
    """The date of a birth date as the site prints it ("March 14, 1879", any case), or None if it is none.

    Month names are read from a table rather than by ``strptime``'s ``%B``, which follows the process's locale.
    """
    match = _DATE_RE.fullmatch(text.strip())
    if match is None or match.group(1).lower() not in _MONTHS:
        return None
    try:
        return date(int(match.group(3)), _MONTHS[match.group(1).lower()], int(match.group(2)))
    except ValueError:
        return None


def parse_author(html: str, url: str) -> Author:
    """Parse an author page into an :class:`Author` that keeps its contract.

    Raises:
        NotAnAuthorPage: no author box, or one without a name (a 404 page, a listing, an unknown slug).
        ContractViolation: an author page without a birth date or place (``missing_field``), or with a birth
            date that is no date (``bad_value``).
    """
    tree = LexborHTMLParser(html)
    box = tree.css_first("div.author-details")
    if box is None:
        raise NotAnAuthorPage("no div.author-details")
    name = _text(box.css_first("h3.author-title"))
    if not name:
        raise NotAnAuthorPage("author box has no name")
    born = _text(box.css_first("span.author-born-date")) or None
    birth_date = parse_birth_date(born) if born else None
    place = _text(box.css_first("span.author-born-location")) or None
    description = _text(box.css_first("div.author-description")) or None
    values = {"name": name, "birth_date": birth_date, "birth_place": place, "description": description}
    # A date shown but unreadable was read as None: its problem says why, not "missing".
    unreadable = {"birth_date": Problem("birth_date", f"not a date: {born!r}")} if born and birth_date is None else {}
    problems = [unreadable.get(p.field, p) for p in AUTHOR_CONTRACT.problems(values)]
    if problems or birth_date is None or place is None:
        raise ContractViolation(problems)
    return Author(url=url, name=name, birth_date=birth_date, birth_place=place, description=description)
