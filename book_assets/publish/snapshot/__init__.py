"""The category-balanced snapshot: a daily sample of the stored records in which categories appear by their weights
(the books', and any site's whose definition gives a snapshot source).

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

from book_assets.publish.snapshot.files import PARQUET_NAME, site_day_folder
from book_assets.publish.snapshot.publish import SnapshotArtifacts, SnapshotFiles, write_snapshot, write_snapshot_files
from book_assets.publish.snapshot.select import BOOK_VERSIONS, FRAME_DTYPES, Snapshot, build_snapshot, day_bounds
from book_assets.publish.snapshot.summary import SUMMARY_COLUMNS, summary_markdown
from book_assets.publish.snapshot.table import TABLE

__all__ = [
    "BOOK_VERSIONS",
    "FRAME_DTYPES",
    "PARQUET_NAME",
    "SUMMARY_COLUMNS",
    "TABLE",
    "Snapshot",
    "SnapshotArtifacts",
    "SnapshotFiles",
    "build_snapshot",
    "day_bounds",
    "site_day_folder",
    "summary_markdown",
    "write_snapshot",
    "write_snapshot_files",
]
