"""Fair scheduling: smooth weighted round-robin over groups and task types, budgets, shared state."""

from __future__ import annotations

import pytest

from book_assets.db.connection import Database
from book_assets.queue import NewTask, TaskQueue
from book_assets_tests.queue.helpers import make_queue, swrr, url


def _fill(queue: TaskQueue, counts: dict[str, int], task_type: str = "detail") -> None:
    queue.enqueue_many(
        NewTask(task_type, {"url": url(f"{task_type}-{group}-{i}")}, group=group)
        for group, n in counts.items()
        for i in range(n)
    )


def _groups(queue: TaskQueue, picks: int, batch: int = 1) -> list[str]:
    out: list[str] = []
    while len(out) < picks:
        tasks = queue.claim("w", min(batch, picks - len(out)), task_types=["detail"], scheduled=True).tasks
        if not tasks:
            break
        out.extend(t.group or "" for t in tasks)
    return out


def test_reference_swrr_gives_the_classic_sequence() -> None:
    assert swrr({"A": 3, "B": 2, "C": 1}, 6) == ["A", "B", "A", "C", "B", "A"]


@pytest.mark.parametrize("batch", [1, 4])
def test_scheduled_claims_follow_smooth_weighted_round_robin_3_2_1(queue: TaskQueue, batch: int) -> None:
    _fill(queue, {"A": 40, "B": 40, "C": 40})
    queue.set_group_weights("detail", {"A": 3, "B": 2, "C": 1})
    assert _groups(queue, 36, batch) == swrr({"A": 3, "B": 2, "C": 1}, 36)


def test_fair_state_is_shared_by_workers_on_different_connections(db: Database, database_url: str) -> None:
    first = make_queue(db)
    second = make_queue(Database(database_url))
    try:
        _fill(first, {"A": 20, "B": 20, "C": 20})
        first.set_group_weights("detail", {"A": 3, "B": 2, "C": 1})
        sequence = []
        for i in range(24):
            claimer = first if i % 3 else second
            sequence.append(claimer.claim(f"w{i % 3}", task_types=["detail"], scheduled=True).tasks[0].group)
        assert sequence == swrr({"A": 3, "B": 2, "C": 1}, 24)
    finally:
        second.db.close()


def test_weight_one_group_among_weight_100_groups_is_served_once_per_cycle(queue: TaskQueue) -> None:
    _fill(queue, {"big1": 210, "big2": 210, "small": 5})
    weights: dict[str, float] = {"big1": 100, "big2": 100, "small": 1}
    queue.set_group_weights("detail", weights)
    picks = _groups(queue, 402, batch=50)
    assert picks == swrr(weights, 402)
    assert picks[:201].count("small") == 1 and picks[201:402].count("small") == 1


def test_groups_without_work_are_skipped_and_a_returning_group_is_served_promptly(queue: TaskQueue) -> None:
    _fill(queue, {"A": 10, "B": 10})
    queue.set_group_weights("detail", {"A": 1, "B": 1, "C": 1})
    assert sorted(_groups(queue, 4)) == ["A", "A", "B", "B"]
    _fill(queue, {"C": 5})
    assert "C" in _groups(queue, 3), "a group that gets work again waits at most one cycle"
    state = {row["member"]: row for row in queue.group_state("detail")}
    assert all(-3 <= row["current"] <= 3 for row in state.values()), "no burst: currents stay within ±W"


def test_weight_zero_group_is_never_served(queue: TaskQueue) -> None:
    _fill(queue, {"A": 5, "Z": 5})
    queue.set_group_weights("detail", {"Z": 0})
    assert _groups(queue, 10, batch=10) == ["A"] * 5


def test_default_weight_applies_to_unlisted_groups(queue: TaskQueue) -> None:
    _fill(queue, {"A": 30, "B": 30})
    queue.set_group_weights("detail", {"A": 1, "*": 2})
    assert _groups(queue, 12) == swrr({"A": 1, "B": 2}, 12)


def test_budget_stops_a_group_and_clearing_it_resumes(queue: TaskQueue) -> None:
    _fill(queue, {"A": 10, "B": 10})
    queue.set_group_budgets("detail", {"A": 2})
    assert _groups(queue, 8, batch=8) == ["A", "B", "A", "B", "B", "B", "B", "B"]
    assert _groups(queue, 6) == ["B"] * 4, "A is out of budget: only B is served, then nothing"
    queue.clear_group_budgets("detail")
    assert _groups(queue, 3) == ["A", "A", "A"]


def test_priority_orders_tasks_inside_a_group(queue: TaskQueue) -> None:
    queue.enqueue_many(
        [
            NewTask("detail", {"url": url("a-low")}, group="A", priority=0),
            NewTask("detail", {"url": url("a-high")}, group="A", priority=5),
        ]
    )
    tasks = queue.claim("w", 2, task_types=["detail"], scheduled=True).tasks
    assert [t.url for t in tasks] == [url("a-high"), url("a-low")]


def test_interleave_hands_out_k_details_after_each_listing(queue: TaskQueue) -> None:
    _fill(queue, {"": 4}, task_type="listing")
    _fill(queue, {"": 30}, task_type="detail")
    sequence = []
    for _ in range(34):
        (task,) = queue.claim("w", type_weights={"listing": 1, "detail": 3}).tasks
        sequence.append(task.task_type[0])
    text = "".join(sequence)
    assert text[:16] == "".join(swrr({"listing": 1, "detail": 3}, 16)[i][0] for i in range(16))
    assert text.count("l") == 4
    between = text[text.index("l") + 1 : text.rindex("l")].split("l")
    assert between == ["ddd"] * 3
    assert text.endswith("d" * 18), "details keep flowing once listings run out"


def test_interleave_serves_listings_when_details_run_out(queue: TaskQueue) -> None:
    _fill(queue, {"": 5}, task_type="listing")
    _fill(queue, {"": 1}, task_type="detail")
    tasks = queue.claim("w", 10, type_weights={"listing": 1, "detail": 20}).tasks
    assert sorted(t.task_type for t in tasks) == ["detail"] + ["listing"] * 5


def test_interleave_with_scheduled_groups_inside_a_type(queue: TaskQueue) -> None:
    _fill(queue, {"": 2}, task_type="listing")
    _fill(queue, {"A": 10, "B": 10})
    queue.set_group_weights("detail", {"A": 2, "B": 1})
    tasks = queue.claim("w", 8, type_weights={"listing": 1, "detail": 3}, scheduled=True).tasks
    details = [t.group for t in tasks if t.task_type == "detail"]
    assert [t.task_type for t in tasks].count("listing") == 2
    assert details == swrr({"A": 2, "B": 1}, len(details))


def test_bad_fairness_arguments_are_rejected(queue: TaskQueue) -> None:
    with pytest.raises(ValueError, match="weight of group 'A' must be >= 0"):
        queue.set_group_weights("detail", {"A": -1})
    with pytest.raises(ValueError, match="budget of group 'A'"):
        queue.set_group_budgets("detail", {"A": -3})
    with pytest.raises(ValueError, match="unknown task type"):
        queue.set_group_weights("reviews", {"A": 1})
    with pytest.raises(ValueError, match="exactly one task type"):
        queue.claim("w", scheduled=True)
    with pytest.raises(ValueError, match="unknown task type"):
        queue.claim("w", type_weights={"reviews": 1})
