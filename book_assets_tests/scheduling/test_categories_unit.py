"""One rule for category names (pure): --categories, weights and the sandbox accept the same spellings."""

from __future__ import annotations

import pytest

from book_assets.categories import KNOWN_CATEGORIES, is_one_of, slugify
from book_assets.crawl.config import weights_by_category_name


@pytest.mark.parametrize(
    "spelling", ["Sequential Art", "sequential art", "sequential-art", "SEQUENTIAL-ART", " Sequential  Art "]
)
def test_every_spelling_of_a_category_picks_it_and_weights_it(spelling: str) -> None:
    assert is_one_of("Sequential Art", [spelling])
    assert weights_by_category_name({spelling: 3.0}) == {"Sequential Art": 3.0}


def test_no_pick_means_every_category_and_another_name_is_not_picked() -> None:
    assert is_one_of("Travel", None) and is_one_of("Travel", [])
    assert not is_one_of("Travel", ["Mystery", "sequential-art"])


def test_the_site_category_slugs_are_unique() -> None:
    assert len({slugify(name) for name in KNOWN_CATEGORIES}) == len(KNOWN_CATEGORIES) == 50
