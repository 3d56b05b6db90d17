"""Soft blocks: a 200 that is not the page, at a rate or scripted per path, counted in the stats."""

from __future__ import annotations

from collections import Counter
from urllib.parse import urljoin

import httpx
import pytest
from selectolax.lexbor import LexborHTMLParser as HTMLParser

from book_assets.sandbox import Action, Faults
from book_assets.sandbox.faults import SOFT_BLOCKS
from book_assets.sandbox.testing import SandboxFactory
from book_assets.scraper.errors import NotAListingPage
from book_assets.scraper.parsers import parse_listing

PATHS = [f"/catalogue/book-{i}_{i}/index.html" for i in range(6000)]


# --- pure decisions ----------------------------------------------------------------------------------------


def test_soft_blocks_come_at_their_rate_in_even_kinds_the_same_for_the_same_seed() -> None:
    faults = Faults(soft_block_rate=0.1)

    actions = [faults.decide(0, path, 0).action for path in PATHS]
    again = [faults.decide(0, path, 0).action for path in PATHS]
    other_seed = [faults.decide(1, path, 0).action for path in PATHS]

    kinds = Counter(a for a in actions if a.is_soft_block)
    assert actions == again != other_seed
    assert 0.085 < sum(kinds.values()) / len(PATHS) < 0.115
    assert set(kinds) == set(SOFT_BLOCKS)
    assert all(0.025 < n / len(PATHS) < 0.042 for n in kinds.values()), kinds
    assert set(actions) == {Action.SERVE, *SOFT_BLOCKS}


def test_a_soft_block_rate_leaves_the_other_faults_where_they_were() -> None:
    without = Faults(error_rate=0.2, reset_rate=0.1)
    with_soft = Faults(error_rate=0.2, reset_rate=0.1, soft_block_rate=0.3)

    pairs = [(without.decide(5, p, 0).action, with_soft.decide(5, p, 0).action) for p in PATHS[:2000]]

    assert all(after == before for before, after in pairs if before is not Action.SERVE)
    assert all(after in (Action.SERVE, *SOFT_BLOCKS) for before, after in pairs if before is Action.SERVE)


@pytest.mark.parametrize(
    ("step", "action"),
    [
        ("soft_block", Action.SOFT_BLOCK_CHALLENGE),
        ("login", Action.SOFT_BLOCK_LOGIN),
        ("empty", Action.SOFT_BLOCK_EMPTY),
        ("soft_block_empty", Action.SOFT_BLOCK_EMPTY),
    ],
)
def test_a_scripted_soft_block_step_names_its_kind(step: str, action: Action) -> None:
    faults = Faults(scripted={"/a": [step]})

    assert [faults.decide(0, "/a", n).action for n in range(2)] == [action, Action.SERVE]


@pytest.mark.parametrize("kwargs", [{"soft_block_rate": 1.5}, {"soft_block_rate": 0.6, "error_rate": 0.6}])
def test_an_invalid_soft_block_rate_is_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Faults(**kwargs)  # type: ignore[arg-type]


# --- over the wire -----------------------------------------------------------------------------------------


def test_scripted_soft_blocks_answer_200_with_bodies_that_are_not_the_page_and_are_counted(
    sandbox_factory: SandboxFactory,
) -> None:
    server = sandbox_factory(faults=Faults(scripted={"/index.html": ["soft_block", "login", "empty"]}))
    with httpx.Client(base_url=server.url, timeout=10) as client:
        challenge, login, empty, page = (client.get("/index.html") for _ in range(4))
    stats = server.stats()

    assert [r.status_code for r in (challenge, login, empty, page)] == [200, 200, 200, 200]
    assert "<title>Attention Required! | Cloudflare</title>" in challenge.text
    assert "Sorry, you have been blocked" in challenge.text and "Cloudflare Ray ID" in challenge.text
    assert "Please log in to continue" in login.text
    assert all("product_pod" not in r.text and "product_main" not in r.text for r in (challenge, login))
    assert empty.content == b"" and empty.headers["content-length"] == "0"
    assert "product_pod" in page.text
    assert [("etag" in r.headers) for r in (challenge, login, empty, page)] == [False, False, False, True]
    assert stats.soft_blocks == {"/index.html": ["soft_block_challenge", "soft_block_login", "soft_block_empty"]}
    assert stats.responses["/index.html"] == [200, 200, 200, 200]
    assert {k: stats.outcomes[k] for k in ("soft_block_challenge", "soft_block_login", "soft_block_empty")} == {
        "soft_block_challenge": 1,
        "soft_block_login": 1,
        "soft_block_empty": 1,
    }


def test_a_soft_block_rate_over_the_wire_is_counted_once_per_soft_block(sandbox_factory: SandboxFactory) -> None:
    server = sandbox_factory(faults=Faults(soft_block_rate=0.3), seed=3)
    paths = [book.url_path for book in server.catalogue.books[:120]]
    with httpx.Client(base_url=server.url, timeout=10) as client:
        bodies = {path: client.get(path).text for path in paths}
    stats = server.stats()

    blocked = set(stats.soft_blocks)
    expected = {p for p in paths if server.faults.decide(3, p, 0).action.is_soft_block}
    assert blocked == expected and 0 < len(blocked) < len(paths)
    assert all(server.catalogue.book_by_path(p).title not in bodies[p] for p in blocked)  # type: ignore[union-attr]
    assert sum(stats.outcomes.get(a.value, 0) for a in SOFT_BLOCKS) == len(blocked)


def test_the_login_wall_links_back_into_the_site_from_where_it_is_served(sandbox_factory: SandboxFactory) -> None:
    book = "/catalogue/some-book_1/index.html"
    server = sandbox_factory(faults=Faults(scripted={book: ["login"], "/index.html": ["login"]}))

    for path in (book, "/index.html"):
        url = server.url_for(path)
        home = HTMLParser(httpx.get(url, timeout=10).text).css_first("ul.breadcrumb li a")
        assert home is not None
        assert urljoin(url, home.attributes.get("href") or "") == server.url_for("/index.html")


def test_a_burst_of_soft_blocks_can_be_switched_on_at_runtime(sandbox_factory: SandboxFactory) -> None:
    server = sandbox_factory()

    started = httpx.post(server.url_for("/__sandbox__/faults?soft_block_rate=1&seconds=600"), timeout=10)
    during = [httpx.get(server.url_for("/index.html"), timeout=10) for _ in range(3)]
    httpx.post(server.url_for("/__sandbox__/faults?seconds=0"), timeout=10)
    after = httpx.get(server.url_for("/index.html"), timeout=10)

    assert started.json()["burst"] == {"soft_block_rate": 1.0}
    assert all(r.status_code == 200 and "product_pod" not in r.text for r in during)
    assert len(server.stats().soft_blocks["/index.html"]) == 3
    assert "product_pod" in after.text


def test_the_login_wall_is_not_a_listing_to_the_parser(sandbox_factory: SandboxFactory) -> None:
    """The sandbox's login wall, served for a listing page, carries the site's page header but no book card and
    no result count: the parser refuses it rather than read an empty last page."""
    path = "/catalogue/page-2.html"
    server = sandbox_factory(faults=Faults(scripted={path: ["login"]}))
    url = server.url_for(path)

    with pytest.raises(NotAListingPage, match="no book cards and no result count"):
        parse_listing(httpx.get(url, timeout=10).text, url)
    page = parse_listing(httpx.get(url, timeout=10).text, url)

    assert (len(page.cards), page.page_count) == (20, server.catalogue.page_count)
