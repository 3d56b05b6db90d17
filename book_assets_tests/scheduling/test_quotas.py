"""split_budget: proportional quotas, capping with redistribution, rounding and determinism."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from book_assets.sandbox.catalogue import CATEGORY_SIZES
from book_assets.scheduling.quotas import split_budget
from book_assets.scheduling.weights import CategoryWeights, parse_weights

pytestmark = pytest.mark.unit

PLENTY = {"A": 100, "B": 100, "C": 100}
SITE = dict(CATEGORY_SIZES)


def test_budget_is_split_by_weight_with_largest_remainder() -> None:
    # 10 × 3/6, 2/6, 1/6 = 5, 3.33, 1.67: floors 5+3+1, the last unit to C (remainder .67)
    assert split_budget(10, parse_weights("A=3,B=2,C=1"), PLENTY) == {"A": 5, "B": 3, "C": 2}


def test_capped_category_gives_its_unused_share_to_the_others_by_weight() -> None:
    # A would get 6 but has 1; the other 11 go 2:1 -> 7.33 / 3.67 -> 7 / 4
    assert split_budget(12, parse_weights("A=3,B=2,C=1"), {"A": 1, "B": 100, "C": 100}) == {"A": 1, "B": 7, "C": 4}


def test_redistribution_can_cap_a_second_category() -> None:
    # C's 3.33 > 1 caps it; 19 over 3:2 gives A 11.4 > 11, capping A; B takes the remaining 8
    available = {"A": 11, "B": 32, "C": 1}
    assert split_budget(20, parse_weights("A=3,B=2,C=1"), available) == {"A": 11, "B": 8, "C": 1}


def test_weight_zero_category_gets_nothing_and_its_share_goes_to_the_others() -> None:
    assert split_budget(12, parse_weights("A=3,B=0,C=1"), PLENTY) == {"A": 9, "B": 0, "C": 3}


def test_budget_above_what_exists_takes_everything_with_positive_weight() -> None:
    assert split_budget(1000, parse_weights("B=0"), {"A": 3, "B": 2, "C": 1}) == {"A": 3, "B": 0, "C": 1}


def test_ties_go_to_higher_weight_then_name() -> None:
    assert split_budget(2, CategoryWeights(), {"B": 5, "A": 5, "C": 5}) == {"B": 1, "A": 1, "C": 0}
    # 2 × 1/4, 3/4 = 0.5, 1.5: equal remainders, the unit goes to the heavier C (by name it would be A)
    assert split_budget(2, parse_weights("A=1,C=3"), {"A": 5, "C": 5}) == {"A": 0, "C": 2}


def test_site_catalogue_with_default_weights_gives_every_category_a_fair_share() -> None:
    quotas = split_budget(200, CategoryWeights(), SITE)
    assert sum(quotas.values()) == 200
    assert all(quotas[c] == n for c, n in SITE.items() if n <= 4)  # small categories entirely
    assert max(quotas.values()) - min(q for c, q in quotas.items() if SITE[c] > 5) <= 1


def test_negative_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="budget"):
        split_budget(-1, CategoryWeights(), PLENTY)


weights_st = st.dictionaries(st.sampled_from([c for c, _ in CATEGORY_SIZES]), st.integers(0, 20), max_size=50)


@settings(max_examples=300, deadline=None)
@given(weights=weights_st, default=st.integers(0, 5), budget=st.integers(0, 1200))
def test_quotas_respect_budget_and_availability(weights: dict[str, int], default: int, budget: int) -> None:
    category_weights = CategoryWeights(weights, default)
    quotas = split_budget(budget, category_weights, SITE)
    positive = sum(n for c, n in SITE.items() if category_weights.weight(c) > 0)
    assert sum(quotas.values()) == min(budget, positive)
    assert all(0 <= quotas[c] <= SITE[c] for c in SITE)
    assert all(quotas[c] == 0 for c in SITE if category_weights.weight(c) == 0)
    assert split_budget(budget, category_weights, dict(reversed(SITE.items()))) == quotas  # order-independent


@settings(max_examples=200, deadline=None)
@given(weights=weights_st, budget=st.integers(0, 1200))
def test_uncapped_quotas_are_within_one_of_their_water_filled_share(weights: dict[str, int], budget: int) -> None:
    """An uncapped category never gets less than a capped-or-not heavier one would per unit of weight."""
    category_weights = CategoryWeights(weights, 1)
    quotas = split_budget(budget, category_weights, SITE)
    uncapped = [c for c in SITE if category_weights.weight(c) > 0 and quotas[c] < SITE[c]]
    for c in uncapped:
        for d in SITE:
            wc, wd = category_weights.weight(c), category_weights.weight(d)
            if wd > 0:
                # per unit of weight, nobody is more than one book ahead of an uncapped category
                assert (quotas[d] - 1) / wd < (quotas[c] + 1) / wc
