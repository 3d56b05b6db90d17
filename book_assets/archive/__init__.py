"""The WARC archive: every fetched page as served, per day, indexed, and readable back into books.

The books table keeps each book's raw HTML (the pipeline's working copy); the archive is the portable copy
of every fetch in the format web archives share (WARC, ISO 28500), with a CDXJ index per day that replay
tools (pywb) read. One module per job:

- :mod:`.writer` appends a fetch's request and response records to this process's file of the day;
- :mod:`.journal` keeps each file's index lines as its writer writes its records;
- :mod:`.reader` reads records back, one gzip member at a time, and reports a file cut short;
- :mod:`.index` writes a day's ``index.cdxj`` and summarizes the day (files, records, bytes);
- :mod:`.rebuild` parses the archived pages into books and compares or stores them.
"""

from book_assets.archive.index import ArchiveSummary, index_day, index_days, summarize_day
from book_assets.archive.reader import ArchiveDamage, archive_files
from book_assets.archive.writer import ArchiveWriter, day_folder

__all__ = [
    "ArchiveDamage",
    "ArchiveSummary",
    "ArchiveWriter",
    "archive_files",
    "day_folder",
    "index_day",
    "index_days",
    "summarize_day",
]
