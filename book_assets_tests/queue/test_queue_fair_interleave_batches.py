"""An interleaved scheduled claim of many tasks (type rounds, then group rounds inside the chosen type, planned
in memory and fetched per (type, group) in one statement) hands out exactly what the one-pick-at-a-time
reference would, in its order, and leaves the same round-robin state at both levels: type weights, groups
of uneven depth in each type, a type that runs dry in the middle of a batch and comes back, a domain that
runs out of politeness slots mid-batch, budgets spent mid-batch and priorities inside a group."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

import pytest

from book_assets.db.connection import Cursor, Database
from book_assets.queue import NewTask, TaskQueue
from book_assets.queue.context import named_queries
from book_assets_tests.queue.helpers import make_queue, url

SLOW = "slow.example"
FAST = "fast.example"
#: Per type and group: (its tasks' domains in enqueue order, how many of its last tasks have priority 5).
DEPTHS: dict[str, dict[str, tuple[list[str], int]]] = {
    "detail": {
        "A": ([FAST] * 25, 5),  # deep; its last five come first
        "B": ([FAST] * 3, 0),  # runs dry in the first claim
        "C": ([FAST] * 10, 0),
        "D": ([SLOW, FAST] * 6, 0),  # half its tasks wait behind one slot per claim
    },
    "listing": {
        "A": ([FAST] * 4, 1),
        "B": ([SLOW, FAST], 0),  # its slow task may be left behind the slot: the type has work, none to give
    },
}
#: Listing tasks enqueued before the last claim: the type, dry until then, comes back into the rounds.
MORE_LISTINGS = 3
Task = tuple[str, str, str, str]  # type, group, url, domain


def _tasks(task_type: str, group: str, domains: list[str], urgent: int, start: int = 0) -> list[NewTask]:
    return [
        NewTask(
            task_type,
            {"url": url(f"{task_type}-{group}-{start + i}", host=domain)},
            group=group,
            priority=5 if i >= len(domains) - urgent else 0,
        )
        for i, domain in enumerate(domains)
    ]


def _order(tasks: list[NewTask]) -> list[Task]:
    """A group's tasks in the order it hands them out: priority, then age."""
    ranked = sorted(enumerate(tasks), key=lambda it: (-it[1].priority, it[0]))
    return [(t.task_type, t.group or "", t.payload["url"], t.payload["url"].split("/")[2]) for _, t in ranked]


@dataclass
class Reference:
    """The queue's state as the one-pick-at-a-time claim (queue_claim_pick_fair_v2) keeps it."""

    type_weights: dict[str, float]
    group_weights: dict[str, dict[str, float]]
    budgets: dict[str, dict[str, int]]
    queues: dict[str, dict[str, list[Task]]] = field(default_factory=dict)
    type_cur: dict[str, float] = field(default_factory=dict)
    type_idle: set[str] = field(default_factory=set)
    group_cur: dict[str, dict[str, float]] = field(default_factory=dict)
    group_idle: dict[str, set[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.type_cur = dict.fromkeys(self.type_weights, 0.0)
        self.group_cur = {t: dict.fromkeys(g, 0.0) for t, g in self.group_weights.items()}
        self.group_idle = {t: set() for t in self.group_weights}

    def claim(self, n: int, slots: dict[str, int]) -> list[Task]:
        """One claim: idle members with work come back at current 0; then, pick by pick, the live type with
        the highest current + weight (ties: smallest name), the live group of that type likewise, and the
        group's next task outside the domains out of slots. A group without one leaves the rounds unserved
        (idle if it has no task at all); a type without a group that gives one likewise. The winners' rounds
        are applied otherwise, at both levels, and the group's budget spent."""
        for t in list(self.type_idle):
            if any(self.queues[t].values()):
                self.type_idle.discard(t)
                self.type_cur[t] = 0.0
        for t, idle in self.group_idle.items():
            for g in list(idle):
                if self.queues[t][g]:
                    idle.discard(g)
                    self.group_cur[t][g] = 0.0
        live_t = [t for t in sorted(self.type_weights) if self.type_weights[t] > 0 and t not in self.type_idle]
        live_g = {
            t: [g for g in sorted(gw) if gw[g] > 0 and self.budgets[t].get(g, 1) > 0 and g not in self.group_idle[t]]
            for t, gw in self.group_weights.items()
        }
        blocked = {d for d, left in slots.items() if left == 0}
        out: list[Task] = []
        while len(out) < n and live_t:
            t = _winner(live_t, self.type_weights, self.type_cur)
            task, g = None, ""
            while live_g[t] and task is None:
                g = _winner(live_g[t], self.group_weights[t], self.group_cur[t])
                task = next((x for x in self.queues[t][g] if x[3] not in blocked), None)
                if task is None:
                    live_g[t].remove(g)
                    if not self.queues[t][g]:
                        self.group_idle[t].add(g)
            if task is None:
                live_t.remove(t)
                if not any(self.queues[t].values()):
                    self.type_idle.add(t)
                continue
            _round(live_t, self.type_weights, self.type_cur, t)
            _round(live_g[t], self.group_weights[t], self.group_cur[t], g)
            self.queues[t][g].remove(task)
            out.append(task)
            if g in self.budgets[t]:
                self.budgets[t][g] -= 1
                if self.budgets[t][g] == 0:
                    live_g[t].remove(g)
            if task[3] in slots:
                slots[task[3]] -= 1
                if slots[task[3]] == 0:
                    blocked.add(task[3])
        return out


def _winner(live: list[str], weights: dict[str, float], current: dict[str, float]) -> str:
    return min(live, key=lambda m: (-(current[m] + weights[m]), m))


def _round(live: list[str], weights: dict[str, float], current: dict[str, float], winner: str) -> None:
    total = sum(weights[m] for m in live)
    for m in live:
        current[m] += weights[m]
    current[winner] -= total


def _state(rows: list[dict[str, object]]) -> dict[str, tuple[object, object, object]]:
    return {str(r["member"]): (r["current"], r["budget"], r["idle"]) for r in rows}


@pytest.mark.parametrize(
    ("type_weights", "group_weights", "budgets"),
    [
        ({"listing": 1, "detail": 3}, {"detail": {"A": 3, "B": 2, "C": 1, "D": 1}, "listing": {"A": 2, "B": 1}}, {}),
        ({"listing": 1, "detail": 1}, {"detail": dict.fromkeys("ABCD", 1.0), "listing": dict.fromkeys("AB", 1.0)}, {}),
        (
            {"listing": 1, "detail": 3},
            {"detail": dict.fromkeys("ABCD", 1.0), "listing": dict.fromkeys("AB", 1.0)},
            {"detail": {"C": 2}, "listing": {"A": 1}},
        ),
        (
            {"listing": 0.5, "detail": 1.5},
            {"detail": {"A": 0.3, "B": 0.2, "C": 0.1, "D": 0.1}, "listing": {"A": 0.5, "B": 0.25}},
            {"detail": {"A": 7}},
        ),
    ],
    ids=["types-1-3", "equal-weights", "budgets", "fractional-weights"],
)
def test_a_batched_interleaved_claim_hands_out_the_reference_sequence(
    db: Database,
    type_weights: dict[str, float],
    group_weights: dict[str, dict[str, float]],
    budgets: dict[str, dict[str, int]],
) -> None:
    queue: TaskQueue = make_queue(db, slot_horizon_s=1.0)
    queue.set_domain_policy(SLOW, min_interval_s=30.0)  # one slot within the horizon, then none for 30 s
    ref = Reference(type_weights, group_weights, {t: dict(budgets.get(t, {})) for t in group_weights})
    for task_type, groups in DEPTHS.items():
        ref.queues[task_type] = {}
        for group, (domains, urgent) in groups.items():
            tasks = _tasks(task_type, group, domains, urgent)
            queue.enqueue_many(tasks)
            ref.queues[task_type][group] = _order(tasks)
        queue.set_group_weights(task_type, group_weights[task_type])
        if budgets.get(task_type):
            queue.set_group_budgets(task_type, budgets[task_type])

    def claim(n: int, slots: int) -> list[str]:
        expected = ref.claim(n, {SLOW: slots})
        tasks = queue.claim("w", n, type_weights=type_weights, scheduled=True).tasks
        got = [(t.task_type, t.group, t.payload["url"]) for t in tasks]
        assert got == [(tt, g, u) for tt, g, u, _ in expected]
        return [t.task_type for t in tasks]

    claim(20, 1)
    second = claim(20, 0)  # this claim and the next find the slow domain still out of slots
    assert second.count("listing") < len(second) / 4, "listings ran short in the middle of the batch"
    more = _tasks("listing", "A", [FAST] * MORE_LISTINGS, 0, start=100)
    queue.enqueue_many(more)
    ref.queues["listing"]["A"].extend(_order(more))
    third = claim(20, 0)
    assert len(third) < 20, "details ran dry in the last claim"
    assert "listing" in third or "A" in budgets.get("listing", {}), "the listings enqueued came back"

    assert _state(queue.type_state()) == {t: (c, None, t in ref.type_idle) for t, c in ref.type_cur.items()}
    for task_type, current in ref.group_cur.items():
        left = ref.budgets[task_type]
        want = {g: (c, left.get(g), g in ref.group_idle[task_type]) for g, c in current.items()}
        assert _state(queue.group_state(task_type)) == want, task_type


def test_a_backlogged_interleaved_claim_is_one_plan_without_per_pick_queries(db: Database) -> None:
    """With every type and group backlogged the claim plans once and walks: no reference pick at all. The
    claim's own SQL runs in a transaction that counts the plpgsql function calls."""
    queue = make_queue(db)
    for task_type in ("listing", "detail"):
        queue.enqueue_many(
            NewTask(task_type, {"url": url(f"{task_type}-{g}-{i}")}, group=g) for g in "ABCD" for i in range(20)
        )
    queue.set_group_weights("detail", {"A": 3, "B": 2, "C": 1, "D": 1})
    params = {
        "request": str(uuid.uuid4()),
        "worker": "w",
        "n": 50,
        "types": ["detail", "listing"],
        "lease_s": 30.0,
        "horizon_s": 1.0,
        "scheduled": True,
        "interleave": json.dumps({"listing": 1.0, "detail": 3.0}),
    }

    def claim(cur: Cursor) -> tuple[int, dict[str, int]]:
        cur.execute("SET LOCAL track_functions = 'pl'")
        cur.execute(named_queries()["claim"], params)
        claimed = len(cur.fetchall())
        cur.execute("SELECT funcname, calls FROM pg_stat_xact_user_functions")
        return claimed, {r["funcname"]: int(r["calls"]) for r in cur.fetchall()}

    claimed, calls = db.run(claim)
    assert claimed == 50
    assert calls.get("queue_fair_plan_interleaved_v2") == 1
    assert "queue_claim_pick_fair_v2" not in calls
