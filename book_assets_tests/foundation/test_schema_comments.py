"""Every function, table, column, file and module that a comment of the SQL names exists: a design note naming
what is gone (a dropped function, a moved file) sends its reader looking for it. The comments are schema.sql's
(each object's ``COMMENT``), the migrations' and the named queries' (``--`` lines, in and out of bodies)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import psycopg2.extras

from book_assets.db.connection import Database
from book_assets.scraper.errors import ErrorKind
from book_assets.settings import PROJECT_ROOT, Settings
from book_assets.sql import load_queries

SQL = PROJECT_ROOT / "book_assets" / "sql"
_TOPICS = sorted(p.stem for p in SQL.glob("*.sql") if p.name != "schema.sql")
#: The SQL files, but migrate.sql: it moves databases the squashed migrations made, so it names what they had.
SOURCES = [
    *sorted(p for p in SQL.glob("*.sql") if p.name != "migrate.sql"),
    *sorted((SQL / "migrations").glob("*.sql")),
]

_LINE_COMMENT = re.compile(r"--(.*)$", re.MULTILINE)
_QUERY_HEADER = re.compile(r"^-- [a-z0-9_]+ --$", re.MULTILINE)
_PARAMETER = re.compile(r"%\((\w+)\)s")
_COMMENT_ON = re.compile(r"^COMMENT ON [^']*? IS '((?:[^']|'')*)';$", re.MULTILINE)
#: What a comment may name: a schema function (every one is <name>_v<N>), a file of the repository (by its path
#: from the root, or a SQL file of book_assets/sql/ by its name), a module by its dotted name, and any other
#: identifier with an underscore (a table, column, index, type, parameter, query, setting or PostgreSQL name).
_FUNCTION = re.compile(r"\b([a-z][a-z0-9_]*_v\d+)\b")
_PATH = re.compile(r"\b((?:book_assets|book_assets_tests|docs|scripts|benchmarks)/[\w./-]*?\.(?:py|sql|md|yaml))\b")
_SQL_FILE = re.compile(r"(?<![\w/.<>-])([a-z0-9_]+\.sql)\b")
_MODULE = re.compile(r"\b(book_assets(?:_tests)?(?:\.[a-z_][a-z0-9_]*)+)")
#: A function or class the code defines, or the value of a constant it declares (``LEASE_EXPIRED = "..."``).
_DEFINED = re.compile(
    r"^\s*(?:(?:async def|def|class) (\w+)|[A-Z][A-Z0-9_]*(?:: \w+)? = \"([a-z0-9_]+)\"$)", re.MULTILINE
)
#: Programs a comment names: schema.sql's header says which made it.
_PROGRAMS = {"pg_dump"}
_IDENTIFIER = re.compile(r"(?<![\w./<-])([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?![\w(/<.-])")


_DROP_FUNCTION = re.compile(r"^DROP FUNCTION (?:IF EXISTS )?(?:public\.)?(\w+)\(", re.MULTILINE)


def _dropped_after(source: str) -> set[str]:
    """The functions a migration after ``source`` drops: a migration is never edited once applied, so its comments
    name what the schema had then (none for the other SQL files, which describe the schema as it is)."""
    migrations = sorted((SQL / "migrations").glob("*.sql"))
    later = [p for p in migrations if p.name > source] if source in {p.name for p in migrations} else []
    return {name for p in later for name in _DROP_FUNCTION.findall(p.read_text(encoding="utf-8"))}


def _comments(path: Path) -> str:
    """The comments of a SQL file: its ``--`` comments and the texts of its ``COMMENT ON`` statements (but those
    of the functions a later migration drops)."""
    text = _QUERY_HEADER.sub("", path.read_text(encoding="utf-8"))
    for name in _dropped_after(path.name):
        text = re.sub(rf"^COMMENT ON FUNCTION (?:public\.)?{name}\b[^']*? IS '(?:[^']|'')*';$", "", text, flags=re.M)
    return "\n".join([*_LINE_COMMENT.findall(text), *_COMMENT_ON.findall(text)])


def _named(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    """Each ``(file, name)`` that a comment of the SQL files names by ``pattern``."""
    return sorted({(p.name, m) for p in SOURCES for m in pattern.findall(_comments(p))})


def _module_exists(dotted: str) -> bool:
    """Whether ``dotted`` is a module or package of the repository, or a name in one (``module.function``)."""
    module, _, name = dotted.rpartition(".")
    base = PROJECT_ROOT.joinpath(*dotted.split("."))
    if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
        return True
    return bool(module) and _module_exists(module) and hasattr(importlib.import_module(module), name)


def _python_names() -> set[str]:
    """The functions, classes and constants' values of the repository's Python (a comment may name them)."""
    sources = [*(PROJECT_ROOT / "book_assets").rglob("*.py"), *(PROJECT_ROOT / "book_assets_tests").rglob("*.py")]
    found = (match for path in sources for match in _DEFINED.findall(path.read_text(encoding="utf-8")))
    return {name for pair in found for name in pair if name}


def test_every_function_a_sql_comment_names_is_in_the_migrated_database(db: Database) -> None:
    rows = db.query("SELECT proname FROM pg_proc WHERE pronamespace = current_schema()::regnamespace")
    functions = {r["proname"] for r in rows}
    named = _named(_FUNCTION)
    assert named, "no comment names a function: has the pattern or the files' format changed?"
    missing = [(source, name) for source, name in named if name not in functions and name not in _dropped_after(source)]
    assert not missing, f"comments name functions the schema does not have: {missing}"


def test_every_file_and_module_a_sql_comment_names_exists() -> None:
    assert _named(_PATH), "no comment names a file: has the pattern or the files' format changed?"
    missing = [(source, path) for source, path in _named(_PATH) if not (PROJECT_ROOT / path).is_file()]
    missing += [(source, name) for source, name in _named(_SQL_FILE) if not (SQL / name).is_file()]
    missing += [(source, name) for source, name in _named(_MODULE) if not _module_exists(name)]
    assert not missing, f"comments name files or modules that do not exist: {missing}"


def test_every_other_name_a_sql_comment_gives_is_one_the_schema_the_queries_or_the_code_has(db: Database) -> None:
    known = {
        r["name"]
        for r in db.query(
            "SELECT relname AS name FROM pg_class UNION SELECT attname FROM pg_attribute"
            " UNION SELECT proname FROM pg_proc UNION SELECT unnest(proargnames) FROM pg_proc"
            " UNION SELECT typname FROM pg_type UNION SELECT name FROM pg_settings"
        )
    }
    known |= set(Settings.model_fields) | {kind.value for kind in ErrorKind} | _python_names() | _PROGRAMS
    known |= {name for topic in _TOPICS for name in load_queries(topic)} | set(dir(psycopg2.extras))
    known |= {name for path in SOURCES for name in _PARAMETER.findall(path.read_text(encoding="utf-8"))}
    missing = [(source, name) for source, name in _named(_IDENTIFIER) if name not in known | _dropped_after(source)]
    assert not missing, f"comments name what neither the schema, the queries, the settings nor the code has: {missing}"
