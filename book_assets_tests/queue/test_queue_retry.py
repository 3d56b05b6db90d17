"""Backoff schedule: pure functions, no database."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from book_assets.queue import Backoff

pytestmark = pytest.mark.unit


def test_ceiling_doubles_from_base_and_is_capped() -> None:
    backoff = Backoff(base_s=1.0, max_s=10.0, jitter="none")
    assert [backoff.delay(a) for a in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


@given(attempt=st.integers(1, 10_000), seed=st.integers(0, 2**32))
def test_full_jitter_stays_between_zero_and_the_ceiling(attempt: int, seed: int) -> None:
    backoff = Backoff(base_s=0.5, max_s=300.0)
    delay = backoff.delay(attempt, rng=random.Random(seed))
    assert 0.0 <= delay <= backoff.ceiling(attempt) <= 300.0


@given(previous=st.floats(0.0, 1000.0), seed=st.integers(0, 2**32))
def test_decorrelated_jitter_grows_from_the_previous_delay_and_is_capped(previous: float, seed: int) -> None:
    backoff = Backoff(base_s=1.0, max_s=60.0, jitter="decorrelated")
    delay = backoff.delay(3, previous_s=previous, rng=random.Random(seed))
    assert 1.0 <= delay <= min(60.0, max(1.0, previous * 3))


def test_full_jitter_spreads_retries_of_one_attempt() -> None:
    rng = random.Random(1)
    delays = {round(Backoff(base_s=1.0, max_s=300.0).delay(5, rng=rng), 3) for _ in range(50)}
    assert len(delays) > 40


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"base_s": -1.0}, ">= 0"), ({"max_s": -1.0}, ">= 0"), ({"jitter": "wild"}, "unknown jitter")],
)
def test_bad_backoff_settings_are_rejected(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Backoff(**kwargs)  # type: ignore[arg-type]


def test_attempt_numbers_start_at_one() -> None:
    with pytest.raises(ValueError, match="attempt must be >= 1"):
        Backoff().delay(0)
