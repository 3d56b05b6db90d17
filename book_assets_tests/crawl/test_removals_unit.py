"""walk_chains: a category's listing counts as seen whole only with an unbroken chain of its pages."""

from __future__ import annotations

from typing import Any

from book_assets.store.removals import ListedPage, walk_chains

BASE = "http://site.test/catalogue/category/books/travel_2"


def page(n: int, *, last: int, cards: int = 20, results: int | None = None, category: str = "Travel") -> ListedPage:
    url = f"{BASE}/index.html" if n == 1 else f"{BASE}/page-{n}.html"
    return ListedPage(
        url=url,
        category=category,
        depth=n,
        next_url=None if n == last else f"{BASE}/page-{n + 1}.html",
        result_count=results,
        cards=cards,
    )


KEY = ("site.test", "Travel")


def test_every_page_from_the_first_to_the_last_is_complete() -> None:
    pages = [page(1, last=3, results=45), page(2, last=3), page(3, last=3, cards=5)]
    assert walk_chains(pages) == {KEY: None}


def test_a_missing_middle_page_leaves_the_category_incomplete() -> None:
    verdict = walk_chains([page(1, last=3, results=45), page(3, last=3)])[KEY]
    assert verdict is not None and "page-2.html not completed" in verdict


def test_a_chain_cut_by_max_pages_is_incomplete() -> None:
    assert walk_chains([page(1, last=3)])[KEY] is not None


def test_no_first_page_means_no_verdict_at_all() -> None:
    assert walk_chains([page(2, last=3), page(3, last=3)]) == {}


def test_cards_that_disagree_with_the_results_shown_are_incomplete() -> None:
    verdict = walk_chains([page(1, last=2, results=41), page(2, last=2)])[KEY]
    assert verdict == "40 cards on its pages but 41 results shown"


def test_a_first_page_without_a_result_count_is_incomplete() -> None:
    assert walk_chains([page(1, last=1)])[KEY] == f"{BASE}/index.html shows no result count"


def test_a_page_whose_result_count_differs_from_the_first_pages_is_incomplete() -> None:
    verdict = walk_chains([page(1, last=2, results=40), page(2, last=2, results=39)])[KEY]
    assert verdict == f"{BASE}/page-2.html shows 39 results, its first page 40"


def test_a_loop_is_incomplete() -> None:
    first = page(1, last=2, results=40)
    looping = ListedPage(url=f"{BASE}/page-2.html", category="Travel", depth=2, next_url=first.url, cards=20)
    verdict = walk_chains([first, looping])[KEY]
    assert verdict is not None and "loops" in verdict


def test_a_page_of_another_category_breaks_the_chain() -> None:
    verdict = walk_chains([page(1, last=2, results=40), page(2, last=2, category="Poetry")])[KEY]
    assert verdict is not None and "Poetry" in verdict


def test_start_pages_and_pages_without_a_category_give_no_verdict() -> None:
    start = ListedPage(url="http://site.test/index.html", category=None, depth=1, next_url=None, sidebar=("Travel",))
    assert walk_chains([start]) == {}


def test_hosts_are_judged_apart() -> None:
    other = ListedPage(url="http://other.test/travel/index.html", category="Travel", depth=1, next_url="http://x/2")
    verdicts = walk_chains([page(1, last=1, results=20), other])
    assert verdicts[KEY] is None and verdicts[("other.test", "Travel")] is not None


def _listing(next_url: str | None, cards: tuple[str, ...] = ("http://site.test/catalogue/a_1/index.html",)) -> Any:
    from book_assets.sites.site import DetailLink, Listing

    return Listing(
        url=f"{BASE}/index.html", details=tuple(DetailLink(u) for u in cards), next_url=next_url, category="Travel"
    )


def test_a_next_link_that_does_not_parse_keeps_the_chain_open() -> None:
    from book_assets.crawl.discovery import ListingOutcome, listing_record

    outcome = ListingOutcome(category="Travel", followed=True)
    payload = {"url": f"{BASE}/index.html", "depth": 1, "category": "Travel"}
    record = listing_record(
        payload, _listing("http://[bad/page-2.html", ("http://[bad/x",)), outcome, drop_query_params=()
    )
    assert record is not None and record["next_url"] == "http://[bad/page-2.html" and record["book_urls"] == []
    first = ListedPage(url=record["url"], category="Travel", depth=1, next_url=record["next_url"], cards=1)
    assert walk_chains([first])[KEY] is not None


def test_a_category_page_discovery_did_not_follow_is_no_evidence() -> None:
    from book_assets.crawl.discovery import ListingOutcome, listing_record

    payload = {"url": f"{BASE}/index.html", "depth": 1, "category": "Travel"}
    assert listing_record(payload, _listing(None), ListingOutcome(), drop_query_params=()) is None
