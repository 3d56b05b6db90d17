"""All of the project's SQL lives in this folder.

``migrations/NNNN_<name>.sql`` are the schema, applied in order by :mod:`book_assets.db.migrations`.
``<topic>.sql`` files hold named queries, procrastinate-style::

    -- claim_tasks --
    -- One line saying what the query does.
    SELECT ...;

Python loads them by name with :func:`load_queries`; no SQL strings are scattered through the code.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_HEADER = re.compile(r"^-- ([a-z0-9_]+) --$", re.MULTILINE)


@cache
def load_queries(topic: str) -> dict[str, str]:
    """The named queries of ``<topic>.sql``, by name."""
    text = resources.files(__package__).joinpath(f"{topic}.sql").read_text(encoding="utf-8")
    parts = _HEADER.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        statement = "\n".join(line for line in body.strip().splitlines() if not line.startswith("--")).strip()
        if name in queries:
            raise ValueError(f"{topic}.sql defines {name} twice")
        queries[name] = statement
    return queries


def migration_files() -> list[tuple[int, str, str]]:
    """``(version, name, sql)`` of every migration, in order."""
    folder = resources.files(__package__).joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        match = re.fullmatch(r"(\d{4})_([a-z0-9_]+)\.sql", entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [v for v, _, _ in found]
    if len(set(versions)) != len(versions):
        raise ValueError(f"duplicate migration versions: {versions}")
    return found
