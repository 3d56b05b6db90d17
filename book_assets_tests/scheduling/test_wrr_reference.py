"""The reference smooth weighted round-robin: exact sequences, skipping, re-entry and the fairness bound."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from book_assets.scheduling.weights import CategoryWeights
from book_assets_tests.queue.wrr import SmoothWRR, deviations, max_deviation, sequence

pytestmark = pytest.mark.unit

W321 = {"a": 3, "b": 2, "c": 1}


def test_weights_3_2_1_give_the_hand_computed_cycle() -> None:
    # currents after adding weights / winner / after subtracting 6:
    # (3,2,1) a (-3,2,1); (0,4,2) b (0,-2,2); (3,0,3) a by name (-3,0,3); (0,2,4) c (0,2,-2);
    # (3,4,-1) b (3,-2,-1); (6,0,0) a (0,0,0) -> back to zero, the cycle repeats.
    assert sequence(W321, {"a": 6, "b": 4, "c": 2}) == ["a", "b", "a", "c", "b", "a"] * 2


def test_nginx_documented_example_5_1_1() -> None:
    # From the comment in nginx's ngx_http_upstream_round_robin.c; every group stays backlogged.
    order = sequence({"a": 5, "b": 1, "c": 1}, {"a": 10, "b": 2, "c": 2})
    assert order[:7] == ["a", "a", "b", "a", "c", "a", "a"]


def test_weight_one_group_among_weight_100_groups_is_served_within_one_cycle() -> None:
    weights = {"big1": 100, "big2": 100, "big3": 100, "small": 1}
    order = sequence(weights, {g: 10 * w for g, w in weights.items()})  # ten cycles, all backlogged
    cycle = sum(weights.values())
    assert "small" in order[:cycle]
    for start in range(0, len(order), cycle):
        assert Counter(order[start : start + cycle]) == weights


def test_zero_weight_group_is_never_served() -> None:
    assert sequence({"a": 1, "b": 0}, {"a": 2, "b": 5}) == ["a", "a"]


def test_skipped_group_keeps_its_place() -> None:
    wrr = SmoothWRR(W321)
    assert [wrr.pick("abc") for _ in range(3)] == ["a", "b", "a"]
    before = dict(wrr.current)
    assert wrr.pick({"a", "b"}) == "b"  # c has no work: skipped ...
    assert wrr.current["c"] == before["c"]  # ... and its counter is untouched
    assert wrr.pick({"a", "b"}) in {"a", "b"}
    assert wrr.current["c"] == before["c"]


def test_group_returning_from_idle_restarts_at_zero_without_a_burst() -> None:
    wrr = SmoothWRR({"a": 1, "b": 1, "c": 1})
    wrr.current["c"] = 50  # a big saved credit from long ago
    wrr._eligible_last = frozenset({"a", "b"})
    order = [wrr.pick("abc") for _ in range(6)]
    assert order.count("c") == 2  # its fair share, not a run of c's


def test_clamp_reentry_keeps_the_place_within_one_round() -> None:
    wrr = SmoothWRR({"a": 1, "b": 1, "c": 1}, reentry="clamp")
    wrr.current["c"] = 50
    wrr._eligible_last = frozenset({"a", "b"})
    wrr.pick("abc")
    assert wrr.current["c"] == 3 + 1 - 3  # clamped to total 3, +1 weight, won and paid 3


def test_category_weights_default_applies_to_unlisted_groups() -> None:
    weights = CategoryWeights({"Travel": 2}, default=1)
    assert Counter(sequence(weights, {"Travel": 10, "Crime": 10})[:6]) == {"Travel": 4, "Crime": 2}


def test_lazy_discovery_matches_eager_while_everything_is_backlogged() -> None:
    pending = {"a": 30, "b": 20, "c": 10}
    eager = sequence(W321, pending, discovery="eager")
    lazy = sequence(W321, pending, discovery="lazy")
    assert eager[:60] == lazy[:60] == ["a", "b", "a", "c", "b", "a"] * 10


def test_lazy_discovery_keeps_a_dry_group_in_the_total_until_it_wins() -> None:
    # b has no work. Eager (a, c alone, total 4): (3,1) a; (2,2) a by name; (1,3) c; (4,0) a.
    assert sequence(W321, {"a": 3, "b": 0, "c": 1}) == ["a", "a", "c", "a"]
    # Lazy: pick 1 over a, b, c (total 6) a -> (-3, 2, 1); pick 2: b would win with 4, is found dry and
    # leaves; a, c (total 4): (0, 2) c -> (0, -2); then (3, -1) a -> (-1, -1); (2, 0) a.
    assert sequence(W321, {"a": 3, "b": 0, "c": 1}, discovery="lazy") == ["a", "c", "a", "a"]


def test_max_deviation_of_an_unfair_order_is_large() -> None:
    assert max_deviation(["a"] * 3 + ["b"] * 3, {"a": 1, "b": 1}) == Fraction(3, 2)
    assert max_deviation(["a", "b"] * 3, {"a": 1, "b": 1}) == Fraction(1, 2)


group_weights = st.dictionaries(
    st.sampled_from([f"g{i}" for i in range(8)]), st.integers(1, 20), min_size=2, max_size=8
)


@settings(max_examples=300, deadline=None)
@given(weights=group_weights, data=st.data())
def test_backlogged_prefixes_stay_within_the_stated_bound(weights: dict[str, int], data: st.DataObject) -> None:
    """While every group still has work: −(k−1) < count − n·w/W ≤ 1 − 1/k, for every prefix and group."""
    pending = {g: data.draw(st.integers(0, 60), label=f"pending {g}") for g in weights}
    order = sequence(weights, pending)
    assert Counter(order) == {g: n for g, n in pending.items() if n}
    backlogged = [g for g in weights if pending[g]]
    if len(backlogged) < 2:
        return
    k, total = len(backlogged), sum(weights[g] for g in backlogged)
    counts: Counter[str] = Counter()
    for n, g in enumerate(order, start=1):
        counts[g] += 1
        for h in backlogged:
            deviation = counts[h] - Fraction(n * weights[h], total)
            assert -(k - 1) < deviation <= 1 - Fraction(1, k), (n, h, deviation)
        if counts[g] == pending[g]:
            break  # g ran dry: from here on the eligible set changes and the bound no longer applies


@settings(max_examples=200, deadline=None)
@given(weights=group_weights)
def test_every_full_cycle_serves_each_group_exactly_its_weight(weights: dict[str, int]) -> None:
    total = sum(weights.values())
    order = sequence(weights, {g: 2 * w for g, w in weights.items()})
    assert Counter(order[:total]) == weights
    wrr = SmoothWRR(weights)
    for _ in range(total):
        wrr.pick(weights)
    assert set(wrr.current.values()) == {0}  # the state returns to its start after each cycle


@settings(max_examples=100, deadline=None)
@given(weights=group_weights)
def test_fluid_deviation_equals_the_counter_over_total_while_backlogged(weights: dict[str, int]) -> None:
    total = sum(weights.values())
    wrr = SmoothWRR(weights)
    order = [wrr.pick(weights) for _ in range(total)]
    order += sorted(weights)  # a tail so that every group stays eligible through the cycle
    last_cycle = deviations(order, weights)[total - 1]
    assert all(d == 0 for d in last_cycle.values())
