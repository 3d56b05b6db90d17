"""The target-vs-actual chart of a snapshot: horizontal bars per category, as a PNG.

matplotlib costs ~2 s to import, so only this module imports it, and only when it draws.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from book_assets.publish.files import atomic_write

if TYPE_CHECKING:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

CHART_NAME = "category_shares.png"


def share_chart(summary: pd.DataFrame) -> FigureCanvasAgg:
    """Horizontal bars of target vs actual share per category, largest target on top.

    Built on a bare ``Figure`` with the Agg canvas (no pyplot global state, no display needed); the height
    grows with the number of categories so that 50 labels stay readable.
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


def write_chart(summary: pd.DataFrame, path: Path) -> Path:
    atomic_write(path, lambda p: share_chart(summary).print_png(str(p)))  # type: ignore[no-untyped-call]  # matplotlib: unannotated
    return path
