"""Splitting a budget of books over categories in proportion to their weights.

Used for ``--deep-budget N`` (how many detail pages each category may fetch in a run, handed to the queue as
group budgets) and for the category-balanced snapshot (how many books of each category it holds).

The split is *water-filling* with largest-remainder rounding:

1. every category of positive weight that has books starts uncapped; the budget to share is
   ``min(budget, books available in them)``;
2. each uncapped category's exact share is ``remaining × w / W_uncapped``; a category whose share reaches
   what it has is capped at that, leaves the pool, and its unused share goes to the others by weight —
   repeated until no share exceeds availability;
3. the remaining budget is rounded by largest remainder: everyone gets the floor of its share, and the
   leftover units go to the largest fractional parts, ties broken by higher weight, then by name.

Exact rational arithmetic (``Fraction``) makes the result deterministic and independent of float rounding.
Because shares stay strictly below availability in step 3, rounding up never exceeds what a category has,
and the quotas always add up to exactly ``min(budget, available)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from book_assets.scheduling.weights import CategoryWeights


def split_budget(budget: int, weights: CategoryWeights, available: Mapping[str, int]) -> dict[str, int]:
    """Quota of each category in ``available`` (category -> books it has); see the module docs.

    Weight-0 categories get 0. The quotas sum to ``min(budget, sum of available over weight > 0)``.
    """
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    if any(n < 0 for n in available.values()):
        raise ValueError("available counts must be >= 0")
    quotas = dict.fromkeys(available, 0)
    pool = {c: Fraction(weights.weight(c)) for c, n in available.items() if n > 0 and weights.weight(c) > 0}
    remaining = min(budget, sum(available[c] for c in pool))
    while pool and remaining:
        total = sum(pool.values())
        capped = [c for c, w in pool.items() if remaining * w / total >= available[c]]
        if not capped:
            break
        for c in capped:
            quotas[c] = available[c]
            remaining -= available[c]
            del pool[c]
    if not pool or not remaining:
        return quotas
    total = sum(pool.values())
    shares = {c: remaining * w / total for c, w in pool.items()}
    for c, share in shares.items():
        quotas[c] = int(share)  # floor: shares are positive
    leftover = remaining - sum(quotas[c] for c in pool)
    by_remainder = sorted(pool, key=lambda c: (-(shares[c] - int(shares[c])), -pool[c], c))
    for c in by_remainder[:leftover]:
        quotas[c] += 1
    return quotas
