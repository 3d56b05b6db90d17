"""Every function in ``schema.sql`` is called, by a named query, by Python or by another function, and none is
kept beside the version that replaced it."""

from __future__ import annotations

import re
from collections import defaultdict

from book_assets.settings import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "book_assets"
SCHEMA = PACKAGE / "sql" / "schema.sql"
_FUNCTION = re.compile(r"^CREATE FUNCTION public\.(\w+)\(.*?\bAS \$\$\n(.*?)^(?:END )?\$\$;$", re.MULTILINE | re.DOTALL)
_VERSIONED = re.compile(r"(\w+)_v(\d+)")


def _bodies() -> dict[str, str]:
    """Each function of schema.sql by name, with its body (its COMMENT left out: a mention is not a call)."""
    found = _FUNCTION.findall(SCHEMA.read_text(encoding="utf-8"))
    assert found, "no function found in schema.sql: has pg_dump's format changed?"
    return dict(found)


def _callers_outside_the_schema() -> str:
    """The text of everything that may call a schema function: the named queries and the package's Python."""
    queries = [p for p in (PACKAGE / "sql").glob("*.sql") if p.name != "schema.sql"]
    return "\n".join(p.read_text(encoding="utf-8") for p in [*queries, *PACKAGE.rglob("*.py")])


def _named(name: str, text: str) -> bool:
    return re.search(rf"\b{name}\b", text) is not None


def test_every_function_in_schema_sql_is_reachable_from_a_query_python_or_another_live_function() -> None:
    bodies = _bodies()
    outside = _callers_outside_the_schema()
    live = {name for name in bodies if _named(name, outside)}
    frontier = list(live)
    while frontier:
        body = bodies[frontier.pop()]
        for name in bodies.keys() - live:
            if _named(name, body):
                live.add(name)
                frontier.append(name)
    dead = sorted(bodies.keys() - live)
    assert not dead, (
        f"schema.sql holds functions nothing calls: {dead}; drop them in a migration "
        "(CREATE the new version, point the callers at it, DROP FUNCTION the old one)"
    )


def test_every_function_is_versioned_and_no_version_is_kept_beside_its_replacement() -> None:
    versions: dict[str, list[int]] = defaultdict(list)
    for name in _bodies():
        match = _VERSIONED.fullmatch(name)
        assert match, f"{name} is not named <name>_v<N>"
        versions[match.group(1)].append(int(match.group(2)))
    kept = {base: sorted(found) for base, found in versions.items() if len(found) > 1}
    assert not kept, f"replaced function versions still in schema.sql (drop them in a migration): {kept}"
