"""The change feed of a day: each book that was new, changed (with its fields), removed or returned that day.

A day is a UTC calendar day. The feed compares the day's start with its end (``book_changes_v1`` in migration
0012): versions recorded that day (``book_versions``) and presence events (``book_presence``, written when a
crawl ends, see :mod:`book_assets.store.removals`). Rebuilding a past day gives the same rows again.

Another site's feed (a :class:`~book_assets.publish.publishing.Feed` its definition gives, with its own columns)
is written the same way (:func:`export_feed`, :func:`write_changes`).

Written as JSON Lines (``fields`` a list) or CSV (``fields`` joined by ``;``, text cells made spreadsheet-safe
as :mod:`book_assets.publish.export` does), to a file or a stream; the chart of changes per day is a PNG
drawn on a bare matplotlib ``Figure`` (imported only when drawing, as the snapshot's chart is).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import IO, Any, Literal

from book_assets.db.connection import Database
from book_assets.publish.export import plain, spreadsheet_safe
from book_assets.publish.files import atomic_write
from book_assets.publish.publishing import Feed
from book_assets.sql import load_queries

Format = Literal["jsonl", "csv"]
#: The kinds of change, in feed order.
CHANGES = ("new", "changed", "returned", "removed")
COLUMNS = ("day", "change", "book_id", "url", "title", "category", "price", "version", "fields", "changed_at")
#: Days shown in the chart of changes per day (ending with the feed's day).
CHART_DAYS = 30

Q = load_queries("changes")


def changes_of_day(db: Database, day: date) -> list[dict[str, Any]]:
    """The day's feed, one row per book (see the module docstring), new first, then changed, returned, removed."""
    return db.query(Q["changes_of_day"], {"day": day})


def changes_per_day(db: Database, last: date, days: int = CHART_DAYS) -> dict[date, dict[str, int]]:
    """Books per kind of change for each of ``days`` days ending with ``last``; every day and kind present."""
    first = last - timedelta(days=days - 1)
    counts = {first + timedelta(days=i): dict.fromkeys(CHANGES, 0) for i in range(days)}
    for row in db.query(Q["changes_per_day"], {"first": first, "last": last}):
        counts[row["day"]][row["change"]] = row["books"]
    return counts


def _cell(value: Any, *, csv_cell: bool) -> Any:
    if isinstance(value, list):
        return ";".join(value) if csv_cell else value
    return plain(spreadsheet_safe(value) if csv_cell else value)


def write_changes(rows: Iterable[dict[str, Any]], fmt: Format, out: IO[str], columns: tuple[str, ...] = COLUMNS) -> int:
    """Write the feed's rows to ``out`` as JSON Lines or CSV (with a header), each with ``columns`` (the books'
    by default; a site's feed names its own); returns the number of rows."""
    n = 0
    if fmt == "jsonl":
        for row in rows:
            out.write(json.dumps({k: _cell(row[k], csv_cell=False) for k in columns}, ensure_ascii=False) + "\n")
            n += 1
        return n
    writer = csv.DictWriter(out, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(row[k], csv_cell=True) for k in columns})
        n += 1
    return n


def books_feed(db: Database, day: date) -> Feed:
    """The books' feed of ``day`` as a :class:`~book_assets.publish.publishing.Feed` (exact: every change of a
    past day is a version or a presence event)."""
    return Feed(COLUMNS, changes_of_day(db, day))


def export_feed(feed: Feed, fmt: Format, output: Path) -> int:
    """Write ``feed`` to ``output`` whole or not at all; returns the number of rows."""
    output.parent.mkdir(parents=True, exist_ok=True)
    _write_file(feed.rows, fmt, output, feed.columns)
    return len(feed.rows)


def _write_file(rows: list[dict[str, Any]], fmt: Format, output: Path, columns: tuple[str, ...] = COLUMNS) -> None:
    """``rows`` written to a temporary file beside ``output``, then renamed to it (never half-written)."""

    def _write(path: Path) -> None:
        with path.open("w", encoding="utf-8", newline="") as fh:
            write_changes(rows, fmt, fh, columns)

    atomic_write(output, _write)


def write_chart(counts: dict[date, dict[str, int]], path: Path) -> Path:
    """Stacked bars of the books per kind of change for each day, as a PNG at ``path``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    days = sorted(counts)
    fig = Figure(figsize=(9, 3.5), layout="constrained")
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    colours = {"new": "#31a354", "changed": "#3182bd", "returned": "#9e9ac8", "removed": "#de2d26"}
    bottom = [0] * len(days)
    positions = list(range(len(days)))
    for change in CHANGES:
        heights = [counts[d][change] for d in days]
        ax.bar(positions, heights, bottom=bottom, label=change, color=colours[change])
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    step = max(1, len(days) // 10)
    ax.set_xticks(positions[::step], [d.isoformat() for d in days][::step], rotation=30, fontsize=8)
    ax.set_ylabel("books")
    ax.set_yscale("symlog")  # a first crawl's thousand new books beside a day's handful of changes
    ax.set_title("Book changes per day")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda p: canvas.print_png(str(p)))  # type: ignore[no-untyped-call]  # matplotlib: unannotated
    return path


@dataclass(frozen=True)
class PublishedChanges:
    """Where :func:`publish_changes` put a day's feed, and what it held."""

    day: date
    rows: int
    by_change: dict[str, int]
    per_day: dict[date, dict[str, int]]
    jsonl_path: Path
    csv_path: Path
    chart_path: Path


def publish_changes(db: Database, day: date, data_dir: Path) -> PublishedChanges:
    """Write the feed of ``day`` under ``<data_dir>/changes/<day>/`` as JSON Lines and CSV, with the chart of
    changes per day for the :data:`CHART_DAYS` days ending with ``day``."""
    rows = changes_of_day(db, day)
    folder = Path(data_dir) / "changes" / day.isoformat()
    folder.mkdir(parents=True, exist_ok=True)
    formats: tuple[Format, ...] = ("jsonl", "csv")
    paths = {fmt: folder / f"book_changes.{fmt}" for fmt in formats}
    for fmt, path in paths.items():
        _write_file(rows, fmt, path)
    per_day = changes_per_day(db, day)
    by_change = dict.fromkeys(CHANGES, 0)
    for row in rows:
        by_change[row["change"]] += 1
    return PublishedChanges(
        day=day,
        rows=len(rows),
        by_change=by_change,
        per_day=per_day,
        jsonl_path=paths["jsonl"],
        csv_path=paths["csv"],
        chart_path=write_chart(per_day, folder / "changes_per_day.png"),
    )
