"""AutoThrottle: a domain's interval follows observed latency, backs off on throttling, stays in its bounds."""

from __future__ import annotations

import itertools

import pytest

from book_assets.db.connection import Database
from book_assets.queue import AutoThrottle, TaskQueue, next_interval
from book_assets.queue.throttle import THROTTLED_MIN_S

DOMAIN = "site.example"
RULE = {"floor_s": 0.1, "max_s": 5.0, "target_concurrency": 2.0}


# --- the pure rule ---------------------------------------------------------------------------------------


def test_a_slower_server_raises_the_interval_to_latency_over_target_concurrency_at_once() -> None:
    assert next_interval(0.1, 1.0, throttled=False, ok=True, **RULE) == pytest.approx(0.5)


def test_a_faster_server_lowers_the_interval_half_way_per_observation() -> None:
    steps = [2.0]
    for _ in range(3):
        steps.append(next_interval(steps[-1], 0.4, throttled=False, ok=True, **RULE))
    assert steps == pytest.approx([2.0, 1.1, 0.65, 0.425])


def test_an_error_response_may_raise_the_interval_but_never_lowers_it() -> None:
    assert next_interval(1.0, 0.01, throttled=False, ok=False, **RULE) == 1.0
    assert next_interval(0.2, 3.0, throttled=False, ok=False, **RULE) == pytest.approx(1.5)


def test_throttling_doubles_the_interval_and_lifts_zero() -> None:
    assert next_interval(0.4, 0.01, throttled=True, ok=False, **RULE) == pytest.approx(0.8)
    assert next_interval(0.0, 0.0, throttled=True, ok=False, floor_s=0, max_s=5, target_concurrency=1) == (
        THROTTLED_MIN_S
    )


def test_the_interval_stays_between_the_floor_and_the_cap_and_the_floor_wins() -> None:
    assert next_interval(4.0, 0.0, throttled=True, ok=False, **RULE) == 5.0
    assert next_interval(0.2, 0.0, throttled=False, ok=True, **RULE) == pytest.approx(0.1)
    assert next_interval(3.0, 0.0, throttled=True, ok=False, floor_s=8.0, max_s=5.0, target_concurrency=1) == 8.0


def test_impossible_throttle_rules_are_refused() -> None:
    with pytest.raises(ValueError, match="target_concurrency"):
        AutoThrottle(target_concurrency=0, max_interval_s=1)
    with pytest.raises(ValueError, match="max_interval_s"):
        AutoThrottle(target_concurrency=1, max_interval_s=-1)


# --- in the database -------------------------------------------------------------------------------------


def test_the_database_applies_the_same_rule_as_the_reference(db: Database) -> None:
    grid = list(
        itertools.product(
            [0.0, 0.05, 0.3, 2.0],  # interval
            [0.0, 0.02, 0.5, 4.0],  # latency
            [(False, True), (False, False), (True, False)],  # (throttled, ok)
            [(0.0, 1.0), (0.2, 3.0), (2.5, 1.0)],  # (floor, cap)
            [0.5, 1.0, 4.0],  # target concurrency
        )
    )
    rows = db.query(
        "SELECT queue_throttle_interval_v1(i, l, t, o, f, c, g, %(step)s) AS v FROM unnest("
        "%(i)s::float8[], %(l)s::float8[], %(t)s::bool[], %(o)s::bool[], %(f)s::float8[], %(c)s::float8[], "
        "%(g)s::float8[]) WITH ORDINALITY AS x(i, l, t, o, f, c, g, n) ORDER BY n",
        {
            "step": THROTTLED_MIN_S,
            "i": [g[0] for g in grid],
            "l": [g[1] for g in grid],
            "t": [g[2][0] for g in grid],
            "o": [g[2][1] for g in grid],
            "f": [g[3][0] for g in grid],
            "c": [g[3][1] for g in grid],
            "g": [g[4] for g in grid],
        },
    )
    expected = [
        next_interval(i, lat, throttled=t, ok=o, floor_s=f, max_s=c, target_concurrency=g)
        for i, lat, (t, o), (f, c), g in grid
    ]
    assert [r["v"] for r in rows] == pytest.approx(expected)


def _interval(queue: TaskQueue) -> float:
    policy = queue.domain_policy(DOMAIN)
    assert policy is not None
    return float(policy["min_interval_s"])


def test_throttled_observations_raise_the_shared_interval_and_fast_ones_bring_it_back_to_the_floor(
    queue: TaskQueue,
) -> None:
    queue.set_domain_policy(DOMAIN, min_interval_s=0.05, throttle=AutoThrottle(1.0, 2.0))
    assert _interval(queue) == 0.05
    raised = [queue.observe(DOMAIN, 0.01, throttled=True, ok=False) for _ in range(6)]
    assert raised == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 2.0])  # doubling, capped at the max
    for _ in range(12):
        lowered = queue.observe(DOMAIN, 0.01)
    assert lowered == pytest.approx(0.05)  # the floor, not the latency of 0.01
    policy = queue.domain_policy(DOMAIN)
    assert policy is not None and policy["latency_s"] == pytest.approx(0.01)


def test_a_domain_without_autothrottle_ignores_observations(queue: TaskQueue) -> None:
    queue.set_domain_policy(DOMAIN, min_interval_s=0.3)
    assert queue.observe(DOMAIN, 5.0, throttled=True, ok=False) is None
    assert _interval(queue) == 0.3


def test_a_new_floor_raises_a_learnt_interval_but_never_lowers_it_and_switching_off_restores_the_floor(
    queue: TaskQueue,
) -> None:
    queue.set_domain_policy(DOMAIN, min_interval_s=0.0, throttle=AutoThrottle(1.0, 10.0))
    queue.observe(DOMAIN, 1.0)
    queue.set_domain_policy(DOMAIN, min_interval_s=0.5)  # a Crawl-delay below what was learnt
    assert _interval(queue) == pytest.approx(1.0)
    queue.set_domain_policy(DOMAIN, min_interval_s=2.0)  # one above it
    assert _interval(queue) == pytest.approx(2.0)
    assert queue.observe(DOMAIN, 0.0) == pytest.approx(2.0)  # the new floor holds
    queue.set_domain_policy(DOMAIN, throttle=None)
    policy = queue.domain_policy(DOMAIN)
    assert policy is not None
    assert (policy["min_interval_s"], policy["max_interval_s"], policy["floor_interval_s"]) == (2.0, None, None)
    assert queue.observe(DOMAIN, 9.0) is None


def test_a_back_off_widens_any_domains_interval_up_to_its_cap_and_the_next_policy_starts_it_again(
    queue: TaskQueue,
) -> None:
    queue.set_domain_policy(DOMAIN, min_interval_s=0.0)  # not autothrottled: the cap is the caller's
    steps = [queue.back_off(DOMAIN, max_interval_s=0.5) for _ in range(4)]
    assert steps == pytest.approx([THROTTLED_MIN_S, 0.2, 0.4, 0.5])
    queue.set_domain_policy(DOMAIN, min_interval_s=0.0)
    assert _interval(queue) == 0.0
    queue.set_domain_policy(DOMAIN, min_interval_s=0.1, throttle=AutoThrottle(1.0, 0.3))  # its own cap wins
    assert [queue.back_off(DOMAIN, max_interval_s=60.0) for _ in range(2)] == pytest.approx([0.2, 0.3])
    assert queue.back_off("unknown.example", max_interval_s=1.0) is None
