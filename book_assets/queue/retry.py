"""Retry delays: capped exponential backoff with jitter.

Why jitter: a domain that fails (a 503 storm, a restart) fails many tasks at once; without jitter they all
come back at the same instant and fail together again. "Full jitter" (a uniform draw in [0, cap]) spreads
them best for the least total wait; "decorrelated jitter" grows from the previous delay instead of the
attempt number. Both are from the AWS Architecture Blog, "Exponential Backoff And Jitter" (2015).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

Jitter = Literal["full", "decorrelated", "none"]


@dataclass(frozen=True)
class Backoff:
    """Delay before retry number ``attempt`` (1 = the retry after the first failure).

    Args:
        base_s: the first delay's ceiling; each later attempt doubles it.
        max_s: cap on any delay.
        jitter: ``full`` (uniform in [0, ceiling]), ``decorrelated`` (uniform in [base, 3 × previous],
            capped) or ``none`` (the ceiling itself: deterministic, for tests and debugging).
    """

    base_s: float = 1.0
    max_s: float = 300.0
    jitter: Jitter = "full"

    def __post_init__(self) -> None:
        if self.base_s < 0 or self.max_s < 0:
            raise ValueError(f"backoff delays must be >= 0 (base_s={self.base_s}, max_s={self.max_s})")
        if self.jitter not in ("full", "decorrelated", "none"):
            raise ValueError(f"unknown jitter {self.jitter!r}: use full, decorrelated or none")

    def ceiling(self, attempt: int) -> float:
        """The un-jittered delay: ``min(max_s, base_s * 2 ** (attempt - 1))``."""
        if attempt < 1:
            raise ValueError(f"attempt must be >= 1, got {attempt}")
        # 2 ** 1000 is fine for floats; cap the exponent anyway so huge attempt counts cannot overflow.
        return min(self.max_s, self.base_s * 2.0 ** min(attempt - 1, 1000))

    def delay(self, attempt: int, *, previous_s: float | None = None, rng: random.Random | None = None) -> float:
        """Seconds to wait before the next try after failed attempt number ``attempt``."""
        draw = (rng or random).uniform
        ceiling = self.ceiling(attempt)
        if self.jitter == "none":
            return ceiling
        if self.jitter == "full":
            return draw(0.0, ceiling)
        previous = self.base_s if previous_s is None else previous_s
        return min(self.max_s, draw(self.base_s, max(self.base_s, previous * 3.0)))
