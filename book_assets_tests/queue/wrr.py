"""Reference smooth weighted round-robin (nginx's SWRR), in pure Python.

This is the executable specification the queue's database-side scheduler (``queue_claim_v3``, see
``sql/schema.sql``) is tested against: with the same weights and the same pending work the
queue must hand out groups in the order :func:`sequence` returns. It is deliberately small and unoptimised
so that it reads as the definition.

One pick among the *eligible* groups (pending work and a positive weight), as in nginx's
``ngx_http_upstream_get_peer`` and as ``TaskQueue.claim`` documents it:

1. every eligible group ``g`` does ``current[g] += weight[g]``;
2. the highest ``current`` wins; ties go to the smallest name (nginx takes the first peer of its list;
   ``ORDER BY current DESC, name`` in SQL);
3. the winner does ``current[winner] -= total``, ``total`` being the sum of the eligible weights.

**Skipping and re-entry.** A group without pending work is not eligible; its ``current`` is left as it is,
so it keeps its place. When it comes back, ``reentry`` decides what happens to that ``current``:

* ``"reset"`` (default, what the queue implements): it restarts at 0 — no burst of saved credit, no old
  debt to pay;
* ``"clamp"``: it is clamped into ``[-total, total]`` of the groups eligible at that pick — the place is
  kept, but never more than one round ahead or behind.

**Discovery.** :func:`sequence` can model two ways of learning that a group ran dry. ``"eager"``: the group
leaves the rotation as soon as its last task is handed out (the textbook model, and what :meth:`SmoothWRR.pick`
with an exact ``eligible`` set does). ``"lazy"``: the queue only finds out when the group *wins* a pick and
has nothing to give; until then it still adds its weight and counts in ``total``. The database does the
latter, so it is the mode to compare its sequences with (for one claim that drains everything).

**The fairness bound** (verified by the property tests in ``test_wrr_reference.py``). While the eligible set
is fixed (every group backlogged), the counters sum to 0 after each pick, and from a zero start
``current[g] = n·w_g − W·count_g`` after ``n`` picks. So the deviation of a group from its exact share is
``count_g − n·w_g/W = −current[g]/W`` and, for every prefix and every group::

    −(k − 1) < count_g − n·w_g/W ≤ 1 − 1/k        (k groups, total weight W)

The upper side is proved: a counter only falls when its group wins, and a winner's counter is the largest of
``k`` numbers summing to ``W``, so it is ``≥ W/k`` before and ``≥ W/k − W`` after losing ``W``. The lower side
follows because the other ``k − 1`` counters are each ``≥ −W(1 − 1/k)`` and they all sum to 0. A group is
therefore never a whole pick ahead of its share. In practice the lag is much smaller than ``k − 1``: over
tens of thousands of random cases with 2..12 groups and weights 1..20 the largest lag observed was
13/12 ≈ 1.08 picks (so the folklore "within ±1" is *almost* but not exactly true for nginx's SWRR). Every
cycle of ``W`` picks serves each group exactly ``w_g`` times, so a weight-1 group among weight-100 groups is
served once in every cycle.

Once groups run dry mid-way no constant bound against the fluid (GPS) ideal holds: the groups left behind
keep counters sized for the old, larger ``total``, so a light group that was just served can wait many picks
while another light group catches up (measured up to ~8 picks with weights ≤ 20). :func:`max_deviation`
measures that fluid deviation; use it to compare implementations, not as a guarantee.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Literal, Protocol


class _Weighted(Protocol):
    def weight(self, category: str) -> float: ...


#: A mapping (absent groups weigh 0) or a ``CategoryWeights`` (absent groups get its default).
Weights = Mapping[str, float] | _Weighted
Reentry = Literal["reset", "clamp"]
Discovery = Literal["eager", "lazy"]


def _weight_of(weights: Weights, group: str) -> float:
    if isinstance(weights, Mapping):
        return weights.get(group, 0)
    return weights.weight(group)


class SmoothWRR:
    """Stateful smooth weighted round-robin over named groups.

    Args:
        weights: group name -> weight (see :data:`Weights`).
        reentry: what a group that sat out finds in its counter when it comes back (module docs).
    """

    def __init__(self, weights: Weights, *, reentry: Reentry = "reset") -> None:
        self._weights = weights
        self.reentry: Reentry = reentry
        self.current: dict[str, float] = {}
        self._eligible_last: frozenset[str] = frozenset()

    def weight(self, group: str) -> float:
        return _weight_of(self._weights, group)

    def pick(self, eligible: Iterable[str]) -> str:
        """The next group to serve among ``eligible`` (the groups that have pending work).

        Groups of weight 0 are never picked. Raises ``LookupError`` when no eligible group has a positive
        weight, i.e. nothing may be served.
        """
        candidates = sorted(g for g in set(eligible) if self.weight(g) > 0)
        if not candidates:
            raise LookupError("no eligible group has a positive weight")
        total = sum(self.weight(g) for g in candidates)
        for g in candidates:
            if g in self.current and g not in self._eligible_last:
                self.current[g] = self._reenter(self.current[g], total)
        winner = self._round(candidates, total)
        self._eligible_last = frozenset(candidates)
        return winner

    def _reenter(self, current: float, total: float) -> float:
        return 0 if self.reentry == "reset" else max(-total, min(total, current))

    def _round(self, live: list[str], total: float) -> str:
        best: str | None = None
        for g in live:  # sorted by name, so the first maximum wins a tie
            self.current[g] = self.current.get(g, 0) + self.weight(g)
            if best is None or self.current[g] > self.current[best]:
                best = g
        assert best is not None
        self.current[best] -= total
        return best


def sequence(
    weights: Weights,
    pending_counts: Mapping[str, int],
    *,
    reentry: Reentry = "reset",
    discovery: Discovery = "eager",
) -> list[str]:
    """The order in which SWRR drains ``pending_counts`` (group -> tasks), all enqueued up front.

    Groups of weight 0 are never served, so the result has ``sum(n for groups of weight > 0)`` entries.
    With ``discovery="lazy"`` every listed group (even with 0 tasks) starts in the rotation and leaves it only
    when it wins a pick with nothing left — the database's single-claim behaviour (module docs).
    """
    wrr = SmoothWRR(weights, reentry=reentry)
    left = {g: n for g, n in pending_counts.items() if wrr.weight(g) > 0}
    order: list[str] = []
    if discovery == "eager":
        while any(left.values()):
            g = wrr.pick(g for g, n in left.items() if n > 0)
            order.append(g)
            left[g] -= 1
        return order
    live = sorted(left)
    while live:
        total = sum(wrr.weight(g) for g in live)
        # the winner of this round, found without applying it: highest current + weight, then name
        g = min(live, key=lambda h: (-(wrr.current.get(h, 0) + wrr.weight(h)), h))
        if not left[g]:
            live.remove(g)  # found dry: out of the rotation, its counter kept as it is
            continue
        wrr._round(live, total)
        order.append(g)
        left[g] -= 1
    return order


def fluid_shares(sequence: list[str], weights: Weights) -> list[dict[str, Fraction]]:
    """Per prefix, each group's exact (fluid) share of the picks so far, for a drain.

    In a drain with everything enqueued up front a group has work until its last task is handed out, so the
    groups eligible at pick ``i`` are those served at ``i`` or later, and each earns ``w_g / W_eligible`` of
    that pick. Entry ``i`` holds the cumulative shares after ``i + 1`` picks. With every group backlogged
    throughout, a group's share after ``n`` picks is exactly ``n·w_g/W``.
    """
    last = {g: i for i, g in enumerate(sequence)}
    expected: dict[str, Fraction] = dict.fromkeys(last, Fraction(0))
    out: list[dict[str, Fraction]] = []
    for i in range(len(sequence)):
        eligible = [g for g, end in last.items() if end >= i]
        total = sum(Fraction(_weight_of(weights, g)) for g in eligible)
        for g in eligible:
            expected[g] += Fraction(_weight_of(weights, g)) / total
        out.append(dict(expected))
    return out


def deviations(sequence: list[str], weights: Weights) -> list[dict[str, Fraction]]:
    """Per prefix, ``count_g − share_g`` for every group (positive: ahead of its share), exactly."""
    counts: dict[str, int] = {}
    out: list[dict[str, Fraction]] = []
    for i, shares in enumerate(fluid_shares(sequence, weights)):
        counts[sequence[i]] = counts.get(sequence[i], 0) + 1
        out.append({g: counts.get(g, 0) - share for g, share in shares.items()})
    return out


def max_deviation(sequence: list[str], weights: Weights) -> Fraction:
    """The largest ``|count_g − share_g|`` over every prefix of ``sequence`` and every group (exact)."""
    return max((abs(d) for prefix in deviations(sequence, weights) for d in prefix.values()), default=Fraction(0))
