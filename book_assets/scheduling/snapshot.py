"""The category-balanced snapshot: a sample of the stored books in which categories appear by their weights.

A plain "latest N books" sample mirrors the site's skew (Default has 152 books, Crime 1); this one gives
each category :func:`~book_assets.scheduling.quotas.split_budget`'s quota of the budget, so a downstream
analysis sees every category it asked for. Within a category the most recently scraped books are taken,
then the lowest id, so the same database always yields the same snapshot.

:func:`build_snapshot` reads (one consistent view), :func:`write_snapshot` publishes: the PostgreSQL table
``category_balanced_snapshot`` (contents replaced in one transaction), a Parquet file and a PNG chart of
target vs actual shares. :func:`summary_markdown` renders the per-category summary for Dagster metadata.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import psycopg2.extras

from book_assets.db.connection import Cursor, Database
from book_assets.scheduling.quotas import split_budget
from book_assets.scheduling.weights import CategoryWeights

if TYPE_CHECKING:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
from book_assets.sql import load_queries

TABLE = "category_balanced_snapshot"
PARQUET_NAME = f"{TABLE}.parquet"
CHART_NAME = "category_shares.png"
SUMMARY_NAME = "category_summary.csv"

#: Columns of :attr:`Snapshot.frame`, in order, with their dtypes (nullable ints: a book may lack a rating).
FRAME_DTYPES: dict[str, str] = {
    "url": "string",
    "title": "string",
    "category": "string",
    "price": "float64",
    "rating": "Int64",
    "stock": "Int64",
}
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


@dataclass(frozen=True)
class Snapshot:
    """The chosen books (``frame``) and one row per category (``summary``), plus what produced them."""

    frame: pd.DataFrame
    summary: pd.DataFrame
    budget: int
    quotas: dict[str, int]


@dataclass(frozen=True)
class SnapshotArtifacts:
    """Where :func:`write_snapshot` put the snapshot."""

    table: str
    rows: int
    parquet_path: Path
    chart_path: Path
    summary_path: Path


def build_snapshot(db: Database, weights: CategoryWeights, budget: int) -> Snapshot:
    """Choose up to ``budget`` books, each category getting its weighted quota of what is stored."""
    queries = load_queries("snapshot")

    def _read(cur: Cursor) -> tuple[dict[str, int], dict[str, int], list[dict[str, Any]]]:
        cur.execute(queries["consistent_read"])
        cur.execute(queries["category_counts"])
        available = {r["category"]: int(r["available"]) for r in cur.fetchall()}
        quotas = split_budget(budget, weights, available)
        chosen = {c: q for c, q in quotas.items() if q > 0}
        cur.execute(queries["select_books"], {"categories": list(chosen), "quotas": list(chosen.values())})
        return available, quotas, [dict(r) for r in cur.fetchall()]

    available, quotas, rows = db.run(_read)
    frame = _frame(rows)
    return Snapshot(frame=frame, summary=_summary(frame, weights, available, quotas), budget=budget, quotas=quotas)


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=[*FRAME_DTYPES, "scraped_at"])
    frame = frame.astype(FRAME_DTYPES)
    frame["scraped_at"] = pd.to_datetime(frame["scraped_at"], utc=True)
    return frame


def _summary(
    frame: pd.DataFrame, weights: CategoryWeights, available: dict[str, int], quotas: dict[str, int]
) -> pd.DataFrame:
    """One row per stored category; target share is the weight share among categories that have books."""
    weight = {c: float(weights.weight(c)) for c in available}
    total_weight = sum(w for c, w in weight.items() if available[c] > 0)
    grouped = frame.groupby("category", observed=True)
    counts = grouped.size()
    mean_price = grouped["price"].mean()
    mean_rating = grouped["rating"].mean()
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


def write_snapshot(db: Database, snapshot: Snapshot, data_dir: Path) -> SnapshotArtifacts:
    """Publish ``snapshot``: replace the table's contents atomically, then write the files beside the data.

    Readers of the table see the old snapshot or the new one, never a mix or an empty table (DELETE and
    INSERT in one transaction). Files are written to a temporary name and renamed, so a reader never opens
    a half-written Parquet file.
    """
    queries = load_queries("snapshot")
    frame = snapshot.frame
    values = [
        (
            r.url,
            r.title,
            r.category,
            None if pd.isna(r.price) else float(r.price),
            None if pd.isna(r.rating) else int(r.rating),
            None if pd.isna(r.stock) else int(r.stock),
            r.scraped_at.to_pydatetime(),
        )
        for r in frame.itertuples(index=False)
    ]

    def _replace(cur: Cursor) -> None:
        cur.execute(queries["clear_snapshot"])
        if values:
            psycopg2.extras.execute_values(cur, queries["insert_snapshot"], values, page_size=500)

    db.run(_replace)
    folder = Path(data_dir) / "snapshots"
    folder.mkdir(parents=True, exist_ok=True)
    parquet_path = folder / PARQUET_NAME
    chart_path = folder / CHART_NAME
    summary_path = folder / SUMMARY_NAME
    _atomic_write(parquet_path, lambda p: frame.to_parquet(p, engine="pyarrow", index=False))
    _atomic_write(chart_path, lambda p: share_chart(snapshot.summary).print_png(str(p)))
    _atomic_write(summary_path, lambda p: snapshot.summary.to_csv(p, index=False))
    return SnapshotArtifacts(TABLE, len(frame), parquet_path, chart_path, summary_path)


def _atomic_write(path: Path, write: Callable[[Path], object]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def share_chart(summary: pd.DataFrame) -> FigureCanvasAgg:
    """Horizontal bars of target vs actual share per category, largest target on top.

    Built on a bare ``Figure`` with the Agg canvas (no pyplot global state, no display needed); the height
    grows with the number of categories so that 50 labels stay readable. matplotlib costs ~2 s to import,
    so only the code that draws pays for it.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = summary.sort_values(["target_share", "category"], ascending=[True, False])  # barh draws bottom-up
    n = max(len(rows), 1)
    fig = Figure(figsize=(9, 1.5 + 0.28 * n), layout="constrained")
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    positions = range(len(rows))
    ax.barh([p + 0.2 for p in positions], rows["target_share"], height=0.4, label="target share", color="#9ecae1")
    ax.barh([p - 0.2 for p in positions], rows["actual_share"], height=0.4, label="actual share", color="#3182bd")
    ax.set_yticks(list(positions), list(rows["category"]), fontsize=8)
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_xlabel("share of the snapshot")
    ax.xaxis.set_major_formatter(lambda x, _pos: f"{x:.0%}")
    ax.set_title("Category-balanced snapshot: target vs actual share")
    ax.legend(loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    return canvas


def summary_markdown(summary: pd.DataFrame) -> str:
    """The summary as a Markdown table (for ``dg.MetadataValue.md``); shares in percent, means rounded."""
    header = "| category | weight | available | quota | count | target | actual | mean price | mean rating |"
    lines = [header, "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in summary.itertuples(index=False):
        price = "" if pd.isna(r.mean_price) else f"{r.mean_price:.2f}"
        rating = "" if pd.isna(r.mean_rating) else f"{r.mean_rating:.2f}"
        lines.append(
            f"| {r.category} | {r.weight:g} | {r.available} | {r.quota} | {r.count} | "
            f"{r.target_share:.1%} | {r.actual_share:.1%} | {price} | {rating} |"
        )
    return "\n".join(lines)
