"""The snapshot's per-category summary: weight, records available, quota, count, shares and means (of price and
rating, where the records have them).

Pure pandas on the chosen frame: no database, no files. :func:`summary_markdown` renders it for a
Dagster Markdown value.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

from book_assets.scheduling.weights import CategoryWeights

SUMMARY_COLUMNS = [
    "category",
    "weight",
    "available",
    "quota",
    "count",
    "weight_share",
    "target_share",
    "actual_share",
    "mean_price",
    "mean_rating",
]


def category_summary(
    frame: pd.DataFrame, weights: CategoryWeights, available: dict[str, int], quotas: dict[str, int]
) -> pd.DataFrame:
    """One row per stored category; target share is the weight share among categories that have books."""
    weight = {c: float(weights.weight(c)) for c in available}
    total_weight = sum(w for c, w in weight.items() if available[c] > 0)
    grouped = frame.groupby("category", observed=True)
    counts = grouped.size()
    # A site's records may have no price or rating (quotes): their means are NaN.
    nothing = pd.Series(dtype="float64")
    mean_price = grouped["price"].mean() if "price" in frame else nothing
    mean_rating = grouped["rating"].mean() if "rating" in frame else nothing
    total = len(frame)
    total_quota = sum(quotas.values())
    records = [
        {
            "category": c,
            "weight": weight[c],
            "available": available[c],
            "quota": quotas.get(c, 0),
            "count": int(counts.get(c, 0)),
            # The weight's share before capping; the target is the quota's share (capped, redistributed).
            "weight_share": weight[c] / total_weight if total_weight else 0.0,
            "target_share": quotas.get(c, 0) / total_quota if total_quota else 0.0,
            "actual_share": int(counts.get(c, 0)) / total if total else 0.0,
            "mean_price": float(mean_price.get(c, float("nan"))),
            "mean_rating": float(mean_rating.get(c, float("nan"))),
        }
        for c in available
    ]
    summary = pd.DataFrame.from_records(records, columns=SUMMARY_COLUMNS)
    summary = summary.astype({"category": "string", "available": "int64", "quota": "int64", "count": "int64"})
    return summary.sort_values(["target_share", "category"], ascending=[False, True], ignore_index=True)


def summary_markdown(summary: pd.DataFrame) -> str:
    """The summary as a Markdown table (for ``dg.MetadataValue.md``); shares in percent, means rounded."""
    header = "| category | weight | available | quota | count | target | actual | mean price | mean rating |"
    lines = [header, "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    # Each row's fields are the summary's columns (SUMMARY_COLUMNS), which pandas types only as "any scalar".
    rows: Iterable[Any] = summary.itertuples(index=False)
    for r in rows:
        price = "" if pd.isna(r.mean_price) else f"{r.mean_price:.2f}"
        rating = "" if pd.isna(r.mean_rating) else f"{r.mean_rating:.2f}"
        lines.append(
            f"| {r.category} | {r.weight:g} | {r.available} | {r.quota} | {r.count} | "
            f"{r.target_share:.1%} | {r.actual_share:.1%} | {price} | {rating} |"
        )
    return "\n".join(lines)
