"""A scheduled claim of many tasks (planned in memory, fetched per group in one statement) hands out exactly
what the one-pick-at-a-time reference would, in its order: groups of uneven depth, a group that runs dry
in the middle of a batch, a domain that runs out of politeness slots mid-batch, a budget spent mid-batch,
priorities inside a group, and the round-robin state carried from one claim to the next."""

from __future__ import annotations

import pytest

from book_assets.db.connection import Database
from book_assets.queue import NewTask, TaskQueue
from book_assets_tests.queue.helpers import make_queue, url

SLOW = "slow.example"
FAST = "fast.example"
#: Per group: (its tasks' domains in enqueue order, how many of its last tasks have priority 5).
DEPTHS: dict[str, tuple[list[str], int]] = {
    "A": ([FAST] * 25, 5),  # deep; its last five come first
    "B": ([FAST] * 3, 0),  # runs dry in the first claim
    "C": ([FAST] * 10, 0),
    "D": ([SLOW, FAST] * 6, 0),  # half its tasks wait behind one slot per claim
}
Task = tuple[str, str, str]  # group, url, domain


def _queues() -> dict[str, list[Task]]:
    """Each group's tasks in the order the group hands them out: priority, then age."""
    queues = {}
    for group, (domains, urgent) in DEPTHS.items():
        tasks = [(group, url(f"{group}-{i}", host=domain), domain) for i, domain in enumerate(domains)]
        queues[group] = tasks[len(tasks) - urgent :] + tasks[: len(tasks) - urgent]
    return queues


def _reference_claim(
    n: int,
    weights: dict[str, float],
    queues: dict[str, list[Task]],
    slots: dict[str, int],
    budgets: dict[str, int],
    current: dict[str, float],
    idle: set[str],
) -> list[Task]:
    """One claim, one pick at a time (TaskQueue.claim's documented algorithm): the live group with the highest
    current + weight (ties: smallest name) gives its next task outside the domains out of slots; a group
    without one leaves the rounds unserved (idle if it has no task at all), the winner's round is applied
    otherwise. Mutates the state it is given, as the database keeps it between claims."""
    live = [g for g in sorted(queues) if weights[g] > 0 and budgets.get(g, 1) > 0 and g not in idle]
    blocked = {d for d, left in slots.items() if left == 0}
    out: list[Task] = []
    while len(out) < n and live:
        group = min(live, key=lambda g: (-(current[g] + weights[g]), g))
        task = next((t for t in queues[group] if t[2] not in blocked), None)
        if task is None:
            live.remove(group)
            if not queues[group]:
                idle.add(group)
            continue
        total = sum(weights[g] for g in live)
        for g in live:
            current[g] += weights[g]
        current[group] -= total
        queues[group].remove(task)
        out.append(task)
        if group in budgets:
            budgets[group] -= 1
            if budgets[group] == 0:
                live.remove(group)
        if task[2] in slots:
            slots[task[2]] -= 1
            if slots[task[2]] == 0:
                blocked.add(task[2])
    return out


def _enqueue(queue: TaskQueue) -> None:
    for group, (domains, urgent) in DEPTHS.items():
        queue.enqueue_many(
            NewTask(
                "detail",
                {"url": url(f"{group}-{i}", host=domain)},
                group=group,
                priority=5 if i >= len(domains) - urgent else 0,
            )
            for i, domain in enumerate(domains)
        )


@pytest.mark.parametrize(
    ("weights", "budgets"),
    [
        ({"A": 3, "B": 2, "C": 1, "D": 1}, {}),  # several weights: rounds run one by one
        ({"A": 1, "B": 1, "C": 1, "D": 1}, {}),  # one weight: the plan in closed form
        ({"A": 1, "B": 1, "C": 1, "D": 1}, {"C": 3}),  # a budget that runs out mid-batch ends a plan
        ({"A": 0.3, "B": 0.2, "C": 0.1, "D": 0.1}, {"A": 7}),  # fractions: the reference's float arithmetic
    ],
    ids=["weights-3-2-1-1", "equal-weights", "budget", "fractional-weights"],
)
def test_a_batched_scheduled_claim_hands_out_the_reference_sequence(
    db: Database, weights: dict[str, float], budgets: dict[str, int]
) -> None:
    queue = make_queue(db, slot_horizon_s=1.0)
    queue.set_domain_policy(SLOW, min_interval_s=30.0)  # one slot within the horizon, then none for 30 s
    _enqueue(queue)
    queue.set_group_weights("detail", weights)
    if budgets:
        queue.set_group_budgets("detail", budgets)
    queues, current, idle, left = _queues(), dict.fromkeys(DEPTHS, 0.0), set[str](), dict(budgets)
    for slots in ({SLOW: 1}, {SLOW: 0}):  # the second claim finds the slow domain still out of slots
        expected = _reference_claim(30, weights, queues, slots, left, current, idle)
        tasks = queue.claim("w", 30, task_types=["detail"], scheduled=True).tasks
        assert [(t.group, t.payload["url"]) for t in tasks] == [(g, u) for g, u, _ in expected]
    assert "B" in idle, "a group ran dry on the way"
    assert sum(t[2] == SLOW for q in queues.values() for t in q) == 5, "one slow task per claim, the first only"
    state = {row["member"]: row["current"] for row in queue.group_state("detail")}
    assert state == current
