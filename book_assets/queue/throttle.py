"""AutoThrottle: a domain's interval between request starts follows the latency it observes.

This is Scrapy's AutoThrottle (docs: "AutoThrottle extension") moved into the queue, so that the interval is
one number in the domain's row that every worker on every host follows, instead of one per process:

* The interval aims at ``latency / target_concurrency``: with requests started that far apart, about
  ``target_concurrency`` of them are in flight at the server at once.
* Each observation moves it half way there, ``new = max(target, (old + target) / 2)``: it rises to the
  target at once and comes down by halving the gap, so one fast response cannot undo a slow spell.
* An observation that is not ok (an error response) may raise the interval but never lower it: an error
  page is often served fast and says nothing about the server's health.
* A throttled observation (the server said "too many requests") at least doubles it, and never leaves it
  under ``THROTTLED_MIN_S`` (an interval of 0 cannot double). A burst of them backs off exponentially.
* It never goes below the floor (the configured interval, or a robots.txt Crawl-delay) and never above
  ``max(floor, max_interval_s)``: a Crawl-delay above the cap still wins.

:func:`next_interval` is the rule in Python, for reading and for the tests; the database applies the same
rule in ``queue_throttle_interval_v1`` (``sql/schema.sql``), which a test compares with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

#: The interval a throttled observation sets at least (seconds).
THROTTLED_MIN_S: Final = 0.1


@dataclass(frozen=True)
class AutoThrottle:
    """How a domain's interval follows its latency (:meth:`TaskQueue.set_domain_policy`).

    Attributes:
        target_concurrency: requests the server should have in flight at once from all workers together.
        max_interval_s: the interval never rises above this (unless the floor is higher).
    """

    target_concurrency: float
    max_interval_s: float

    def __post_init__(self) -> None:
        if not self.target_concurrency > 0:
            raise ValueError(f"target_concurrency must be > 0, got {self.target_concurrency!r}")
        if not self.max_interval_s >= 0:
            raise ValueError(f"max_interval_s must be >= 0, got {self.max_interval_s!r}")


def next_interval(
    interval_s: float,
    latency_s: float,
    *,
    throttled: bool,
    ok: bool,
    floor_s: float,
    max_s: float,
    target_concurrency: float,
) -> float:
    """The interval after one observation of ``latency_s`` (pure; see the module's docstring)."""
    target = latency_s / target_concurrency
    if throttled:
        new = max(2 * interval_s, target, THROTTLED_MIN_S)
    elif ok:
        new = max(target, (interval_s + target) / 2)
    else:
        new = max(interval_s, target)
    return min(max(max_s, floor_s), max(floor_s, new))
