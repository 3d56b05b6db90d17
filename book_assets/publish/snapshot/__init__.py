"""The category-balanced snapshot: a daily sample of the stored books in which categories appear by their weights.

A plain "latest N books" sample mirrors the site's skew (Default has 152 books, Crime 1); this one gives
each category :func:`~book_assets.scheduling.quotas.split_budget`'s quota of the budget, so a downstream
analysis sees every category it asked for. A snapshot belongs to one day and is built from ``book_versions``
as the books stood at the end of that day, so rebuilding a past day gives that day's snapshot again.

One module per job:

- :mod:`.select` reads the books as of a day (one consistent view) and chooses them;
- :mod:`.summary` is the per-category summary (pure pandas) and its Markdown rendering;
- :mod:`.table` replaces one day's rows of the PostgreSQL table;
- :mod:`.files` writes the day's Parquet and CSV files;
- :mod:`.chart` draws the target-vs-actual PNG (matplotlib);
- :mod:`.publish` writes all three for a day.
"""

from book_assets.publish.snapshot.publish import SnapshotArtifacts, write_snapshot
from book_assets.publish.snapshot.select import FRAME_DTYPES, Snapshot, build_snapshot, day_bounds
from book_assets.publish.snapshot.summary import SUMMARY_COLUMNS, summary_markdown
from book_assets.publish.snapshot.table import TABLE

__all__ = [
    "FRAME_DTYPES",
    "SUMMARY_COLUMNS",
    "TABLE",
    "Snapshot",
    "SnapshotArtifacts",
    "build_snapshot",
    "day_bounds",
    "summary_markdown",
    "write_snapshot",
]
