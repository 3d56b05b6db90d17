"""Check of ``category_balanced_snapshot``: every category's share of a day is where its weight puts it.

The check does not trust the asset's own numbers: it counts the day's published rows per category and
recomputes each category's target from the books as they stood at the end of that day and the weights (the
same ``split_budget``, which caps a category at the books it has and hands the rest to the others by weight).
The day is the run's partition; a run without one checks the newest day in the table. A category is within
tolerance when its count is within ``max(1 book, 2 % of the snapshot)`` of its target. A miss is a WARN: the
data is sound, only less balanced than asked.
"""

from datetime import date

import dagster as dg

from book_assets.defs.resources import DatabaseResource, SchedulingResource, run_settings
from book_assets.defs.retries import TRANSIENT_RETRY, transient_only
from book_assets.defs.snapshot.assets import category_balanced_snapshot
from book_assets.publish.snapshot import day_bounds
from book_assets.scheduling.quotas import split_budget
from book_assets.scheduling.weights import resolve_weights
from book_assets.sql import load_queries

Q = load_queries("snapshot")
#: Share of the snapshot a category may be off by (with at least one book of slack for rounding).
SHARE_TOLERANCE = 0.02


def share_deviations(targets: dict[str, int], actual: dict[str, int]) -> list[tuple[str, int, int, float]]:
    """``(category, target, actual, deviation in share points)`` for every category, worst first."""
    total = sum(actual.values()) or 1
    rows = [
        (c, targets.get(c, 0), actual.get(c, 0), abs(actual.get(c, 0) - targets.get(c, 0)) / total)
        for c in sorted(set(targets) | set(actual))
    ]
    return sorted(rows, key=lambda r: (-r[3], r[0]))


def checked_day(context: dg.AssetCheckExecutionContext, database: DatabaseResource) -> date | None:
    """The run's partition, else the newest day the table holds (None: the table is empty)."""
    op_context = context.op_execution_context
    if op_context.has_partition_key:
        return date.fromisoformat(op_context.partition_key)
    with transient_only(context.op_execution_context), database.open(application_name="book-pipeline checks") as db:
        days = db.query(Q["days"])
    return days[-1]["day"] if days else None


@dg.asset_check(
    asset=category_balanced_snapshot,
    retry_policy=TRANSIENT_RETRY,
    description="Each category's share of the day's snapshot is within max(1 book, 2%) of its weighted target.",
)
def shares_within_tolerance(
    context: dg.AssetCheckExecutionContext, database: DatabaseResource, scheduling: SchedulingResource
) -> dg.AssetCheckResult:
    settings = run_settings(scheduling)
    weights = resolve_weights(settings)
    day = checked_day(context, database)
    if day is None:
        return dg.AssetCheckResult(
            passed=False, severity=dg.AssetCheckSeverity.WARN, description="the snapshot table holds no day yet"
        )
    with transient_only(context.op_execution_context), database.open(application_name="book-pipeline checks") as db:
        counts = db.query(Q["category_counts"], {"until": day_bounds(day)[1]})
        available = {r["category"]: r["available"] for r in counts}
        actual = {r["category"]: r["books"] for r in db.query(Q["day_by_category"], {"day": day})}
    targets = split_budget(settings.snapshot_budget, weights, available)
    return shares_result(day, targets, actual)


def shares_result(
    day: date, targets: dict[str, int], actual: dict[str, int], unit: str = "books"
) -> dg.AssetCheckResult:
    """The share check's verdict on a day's snapshot of ``unit`` (every catalogue's, :mod:`.catalogues`): passed
    when every category's count is within ``max(1, 2 %)`` of its target and the snapshot holds as many rows as
    the targets add up to; a WARN otherwise."""
    rows = share_deviations(targets, actual)
    size = sum(actual.values())
    slack = max(1.0, SHARE_TOLERANCE * size)
    outside = [r for r in rows if abs(r[2] - r[1]) > slack]
    worst = rows[0][3] if rows else 0.0
    table = ["| category | target | actual | off by |", "|---|---:|---:|---:|"]
    table += [f"| {c} | {t} | {a} | {d:.1%} |" for c, t, a, d in rows[:10]]
    return dg.AssetCheckResult(
        passed=not outside and size == sum(targets.values()),
        severity=dg.AssetCheckSeverity.WARN,
        description=(
            f"{day}: {len(outside)} of {len(rows)} categories off their target by more than {slack:g} {unit}"
            if outside
            else f"{day}: all {len(rows)} categories within {slack:g} {unit} of their target ({size} rows)"
        ),
        metadata={
            "snapshot_day": day.isoformat(),
            "snapshot_rows": size,
            "target_rows": sum(targets.values()),
            f"tolerance_{unit}": slack,
            "max_share_deviation": round(worst, 4),
            "categories_outside": len(outside),
            "worst_categories": dg.MetadataValue.md("\n".join(table)),
        },
    )


SNAPSHOT_CHECKS = [shares_within_tolerance]
