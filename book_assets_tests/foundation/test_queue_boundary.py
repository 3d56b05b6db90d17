"""The queue is a library: it imports nothing from scraping, the sandbox or Dagster, and nothing outside it
names its tables (everything else asks the queue)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from book_assets.settings import PROJECT_ROOT

pytestmark = pytest.mark.unit

PACKAGE = PROJECT_ROOT / "book_assets"
QUEUE_TABLES = r"(tasks|domains|queue_members|queue_scopes|queue_epochs|queue_seen)"
USES_TABLE = re.compile(rf"\b(FROM|JOIN|UPDATE|INTO|TABLE)\s+{QUEUE_TABLES}\b", re.IGNORECASE)
OWNED_BY_QUEUE = {PACKAGE / "sql" / "queue.sql", PACKAGE / "sql" / "schema.sql"}


def _outside_the_queue() -> list[Path]:
    files = [*PACKAGE.rglob("*.py"), *PACKAGE.glob("sql/*.sql")]
    return [f for f in files if f not in OWNED_BY_QUEUE and PACKAGE / "queue" not in f.parents]


def test_nothing_outside_the_queue_names_its_tables() -> None:
    offenders = [
        f"{path.relative_to(PROJECT_ROOT)}:{n}: {line.strip()}"
        for path in _outside_the_queue()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if USES_TABLE.search(line) and not line.lstrip().startswith(("#", "--", '"""'))
    ]
    assert offenders == []


def test_the_queue_imports_nothing_from_scraping_the_sandbox_or_dagster() -> None:
    forbidden = re.compile(r"^\s*(from|import)\s+(book_assets\.(scraper|sandbox|crawl|defs|scheduling)|dagster)\b")
    offenders = [
        f"{path.name}: {line.strip()}"
        for path in (PACKAGE / "queue").glob("*.py")
        for line in path.read_text(encoding="utf-8").splitlines()
        if forbidden.match(line)
    ]
    assert offenders == []


def test_the_queue_is_built_one_way() -> None:
    """``crawl.config.make_queue`` is the one place outside the queue that builds a ``TaskQueue``: the crawl's
    task types, lease and retry policy cannot differ between the CLI, the workers and Dagster."""
    builds = re.compile(r"\bTaskQueue\(")
    maker = PACKAGE / "crawl" / "config.py"
    offenders = [
        f"{path.relative_to(PROJECT_ROOT)}:{n}: {line.strip()}"
        for path in _outside_the_queue()
        if path != maker
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if builds.search(line)
    ]
    assert offenders == []
