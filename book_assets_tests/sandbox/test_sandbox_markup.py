"""The sandbox's pages read like the live site's: same selectors, same fields, same URL forms and headers.

Each test extracts fields from a real saved page and from the sandbox's counterpart with the same
selectolax code, so a markup drift in the replica shows up as a field one side has and the other lacks.
"""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from urllib.parse import urljoin

import httpx
import pytest
from selectolax.lexbor import LexborHTMLParser as HTMLParser
from selectolax.lexbor import LexborNode as Node

from book_assets.sandbox import Catalogue, SandboxServer, Site

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real-site"  # vendored copy of shared/fixtures
REAL_BOOKS = sorted(REAL.glob("catalogue/*_*/index.html"))
RATINGS = {"One": 1, "Two": 2, "Three": 3, "Four": 4, "Five": 5}


def _text(node: Node | None) -> str | None:
    return None if node is None else node.text(strip=True)


def _attr(node: HTMLParser | Node, query: str, name: str) -> str | None:
    """Attribute ``name`` of the first match of ``query`` under ``node`` (None without a match)."""
    found = node.css_first(query)
    return None if found is None else found.attributes.get(name)


def listing_fields(html: str) -> dict[str, object]:
    tree = HTMLParser(html)
    pods = tree.css("article.product_pod")
    return {
        "title": _text(tree.css_first("title")),
        "h1": _text(tree.css_first("div.page-header h1")),
        "current": _text(tree.css_first("ul.pager li.current")),
        "next": (n.attributes.get("href") if (n := tree.css_first("ul.pager li.next a")) else None),
        "previous": (n.attributes.get("href") if (n := tree.css_first("ul.pager li.previous a")) else None),
        "counts": [s.text() for s in tree.css("form.form-horizontal strong")],
        "sidebar": [
            (a.attributes.get("href"), a.text(strip=True)) for a in tree.css("div.side_categories ul li ul li a")
        ],
        "breadcrumb": [li.text(strip=True) for li in tree.css("ul.breadcrumb li")],
        "pods": [
            {
                "href": _attr(pod, "h3 a", "href"),
                "title": _attr(pod, "h3 a", "title"),
                "shown": link.text() if (link := pod.css_first("h3 a")) else None,
                "image_href": _attr(pod, "div.image_container a", "href"),
                "rating": (_attr(pod, "p.star-rating", "class") or "").split()[1],
                "price": _text(pod.css_first("div.product_price p.price_color")),
                "availability": _text(pod.css_first("p.instock.availability")),
            }
            for pod in pods
        ],
    }


def book_fields(html: str) -> dict[str, object]:
    tree = HTMLParser(html)
    main = tree.css_first("div.product_main")
    rows = tree.css("table.table-striped tr")
    crumbs = tree.css("ul.breadcrumb li")
    return {
        "title": _text(main.css_first("h1")) if main else None,
        "price": _text(main.css_first("p.price_color")) if main else None,
        "availability": _text(main.css_first("p.instock.availability")) if main else None,
        "rating": ((_attr(main, "p.star-rating", "class") or "").split()[1] if main else None),
        "description": _text(tree.css_first("#product_description + p")),
        "table": {_text(r.css_first("th")): _text(r.css_first("td")) for r in rows},
        "row_order": [_text(r.css_first("th")) for r in rows],
        "breadcrumb_links": [a.attributes.get("href") for a in tree.css("ul.breadcrumb li a")],
        "category": _text(tree.css_first("ul.breadcrumb li:nth-child(3) a")),
        "active": _text(tree.css_first("ul.breadcrumb li.active")),
        "crumb_count": len(crumbs),
        "head": sorted(
            (m.attributes.get("name") or m.attributes.get("http-equiv") or "") for m in tree.css("head meta")
        ),
    }


def signature(html: str) -> set[str]:
    """Every element as its ancestry of ``tag#id.classes``: equal sets mean the same page skeleton.

    Rating words are dropped (they vary per book) and so is the live book page's "Products you recently
    viewed" block, which the live site only adds for a browsing session with cookies.
    """
    out: set[str] = set()
    for node in HTMLParser(html).css("body *"):
        chain = []
        cur: Node | None = node
        while cur is not None and cur.tag not in ("body", "-undef"):
            ident = f"#{cur.id}" if cur.id else ""
            words = (cur.attributes.get("class") or "").split()
            classes = "".join(f".{c}" for c in sorted(words) if c not in RATINGS)
            chain.append(f"{cur.tag}{ident}{classes}")
            cur = cur.parent
        out.add(" > ".join(reversed(chain)))
    return {sig for sig in out if "article.product_page > ul.row" not in sig}


@pytest.fixture(scope="module")
def site() -> Site:
    return Site(Catalogue(seed=0))


def page(site: Site, path: str) -> str:
    body = site.get(path)
    assert body is not None, path
    return body.decode("utf-8")


def test_root_listing_has_the_live_fields_and_link_forms(site: Site) -> None:
    real = listing_fields((REAL / "index.html").read_text("utf-8"))
    ours = listing_fields(page(site, "/index.html"))
    for key in ("title", "h1", "current", "next", "previous", "counts", "sidebar", "breadcrumb"):
        assert ours[key] == real[key], key
    assert len(ours["pods"]) == len(real["pods"]) == 20  # type: ignore[arg-type]
    for pods in (real["pods"], ours["pods"]):
        for pod in pods:  # type: ignore[attr-defined]
            assert re.fullmatch(r"catalogue/[a-z0-9-]+_\d+/index\.html", pod["href"])
            assert pod["href"] == pod["image_href"]
            assert pod["rating"] in RATINGS
            assert re.fullmatch(r"£\d+\.\d\d", pod["price"])
            assert pod["availability"] == "In stock"
            words = pod["title"].split()
            expected = pod["title"] if len(words) <= 4 else " ".join(words[:4]) + " ..."
            assert pod["shown"] == expected


def test_page_two_links_books_and_pages_relative_to_the_catalogue_directory(site: Site) -> None:
    real = listing_fields((REAL / "catalogue/page-2.html").read_text("utf-8"))
    ours = listing_fields(page(site, "/catalogue/page-2.html"))
    for key in ("title", "current", "next", "previous", "counts", "breadcrumb"):
        assert ours[key] == real[key], key
    assert [href for href, _ in ours["sidebar"]] == [href for href, _ in real["sidebar"]]  # type: ignore[attr-defined]
    for pods in (real["pods"], ours["pods"]):
        assert all(re.fullmatch(r"[a-z0-9-]+_\d+/index\.html", p["href"]) for p in pods)  # type: ignore[attr-defined]


@pytest.mark.parametrize("real_path", REAL_BOOKS, ids=lambda p: p.parent.name[-4:])
def test_book_page_has_the_live_fields_in_the_same_places(site: Site, real_path: Path) -> None:
    real = book_fields(real_path.read_text("utf-8"))
    catalogue = site.catalogue
    book = next(b for b in catalogue.books if (b.description is None) == (real["description"] is None))
    ours = book_fields(page(site, book.url_path))
    assert ours["row_order"] == real["row_order"]
    assert ours["head"] == real["head"]
    assert ours["crumb_count"] == real["crumb_count"] == 4
    for fields in (real, ours):
        price, availability = fields["price"], fields["availability"]
        assert isinstance(price, str) and re.fullmatch(r"£\d+\.\d\d", price)
        assert isinstance(availability, str) and re.fullmatch(r"In stock \(\d+ available\)", availability)
        assert fields["rating"] in RATINGS
        table = fields["table"]
        assert re.fullmatch(r"[0-9a-f]{16}", table["UPC"])  # type: ignore[index]
        assert table["Price (excl. tax)"] == table["Price (incl. tax)"] == fields["price"]  # type: ignore[index]
        assert table["Tax"] == "£0.00"  # type: ignore[index]
        assert table["Availability"] == fields["availability"]  # type: ignore[index]
        assert table["Product Type"] == "Books"  # type: ignore[index]
        links = fields["breadcrumb_links"]
        assert links[:2] == ["../../index.html", "../category/books_1/index.html"]  # type: ignore[index]
        assert re.fullmatch(r"\.\./category/books/[a-z0-9-]+_\d+/index\.html", links[2])  # type: ignore[index]
        assert fields["active"] == fields["title"]
    assert signature(page(site, book.url_path)) == signature(real_path.read_text("utf-8"))


def test_listing_skeleton_matches_the_live_root_page(site: Site) -> None:
    assert signature(page(site, "/index.html")) == signature((REAL / "index.html").read_text("utf-8"))


def test_every_served_book_page_shows_its_ground_truth_record(site: Site) -> None:
    catalogue = site.catalogue
    for book in catalogue.books:
        fields = book_fields(page(site, book.url_path))
        table = fields["table"]
        assert fields["title"] == book.title
        assert fields["category"] == book.category
        assert Decimal(str(fields["price"]).removeprefix("£")) == book.price
        assert table["Price (excl. tax)"] == f"£{book.price_excl_tax}"  # type: ignore[index]
        assert table["Tax"] == f"£{book.tax}"  # type: ignore[index]
        assert RATINGS[str(fields["rating"])] == book.rating
        assert table["UPC"] == book.upc  # type: ignore[index]
        assert table["Availability"] == book.availability == f"In stock ({book.stock} available)"  # type: ignore[index]
        assert table["Number of reviews"] == str(book.num_reviews)  # type: ignore[index]
        assert fields["description"] == book.description


def test_every_listing_link_resolves_to_a_served_page(site: Site) -> None:
    """Following every href of every listing page, resolved against that page's URL, never 404s."""
    base = "http://sandbox"
    for path in site.catalogue.listing_paths():
        tree = HTMLParser(page(site, path))
        for a in tree.css("article.product_pod h3 a, ul.pager a, div.side_categories a"):
            target = urljoin(base + path, a.attributes.get("href") or "")
            assert site.get(target.removeprefix(base)) is not None, (path, target)


def test_category_listings_link_books_three_levels_up(site: Site) -> None:
    mystery = next(c for c in site.catalogue.categories if c.key == "mystery_3")
    fields = listing_fields(page(site, mystery.url_path))
    assert fields["current"] == "Page 1 of 2"
    assert fields["next"] == "page-2.html"
    assert fields["counts"] == ["32", "1", "20"]
    assert fields["h1"] == "Mystery"
    assert all(p["href"].startswith("../../../") for p in fields["pods"])  # type: ignore[attr-defined]
    last = listing_fields(page(site, "/catalogue/category/books/mystery_3/page-2.html"))
    assert last["previous"] == "page-1.html"
    assert last["next"] is None
    assert len(last["pods"]) == 12  # type: ignore[arg-type]
    travel = listing_fields(page(site, "/catalogue/category/books/travel_2/index.html"))
    assert travel["counts"] == ["11"]
    assert travel["current"] is None


def test_unknown_paths_get_an_html_404(sandbox: SandboxServer) -> None:
    for path in ("/nope", "/catalogue/page-51.html", "/catalogue/page-0.html", "/catalogue/x_99999/index.html",
                 "/catalogue/category/books/travel_2/page-2.html", "/robots.txt"):  # fmt: skip
        response = httpx.get(sandbox.url_for(path))
        assert response.status_code == 404, path
        assert response.headers["content-type"] == "text/html"
        assert "<html>" in response.text


def test_content_type_has_no_charset_while_body_is_utf8(sandbox: SandboxServer) -> None:
    response = httpx.get(sandbox.url + "/")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html"
    assert "£".encode() in response.content
    assert "Â£" in response.content.decode("latin-1")  # what a decoder trusting HTTP's default sees
    assert response.content == httpx.get(sandbox.url + "/index.html").content


def test_head_returns_headers_without_body(sandbox: SandboxServer) -> None:
    path = sandbox.catalogue.books[0].url_path
    full = httpx.get(sandbox.url_for(path))
    head = httpx.head(sandbox.url_for(path))
    assert head.status_code == 200
    assert head.content == b""
    assert head.headers["content-length"] == str(len(full.content))
