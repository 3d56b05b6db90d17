"""The packages of book_assets import one another in one direction: no cycle between them.

A package is a folder of ``book_assets`` (``crawl``, ``store``, ``archive``, ...) or a top-level module
(``settings``, ``cli``, ...). Every import counts, at module level or inside a function: a lazy import still
ties the two packages together.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2] / "book_assets"


def package_of(module: str) -> str | None:
    """``book_assets.crawl.worker`` -> ``crawl``; None outside book_assets."""
    parts = module.split(".")
    return parts[1] if parts[0] == "book_assets" and len(parts) > 1 else None


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for path in ROOT.rglob("*.py"):
        source = path.relative_to(ROOT).parts[0].removesuffix(".py")
        for module in imports_of(path):
            target = package_of(module)
            if (
                target is not None
                and target != source
                and ((ROOT / target).exists() or (ROOT / f"{target}.py").exists())
            ):
                graph[source].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as the packages along it, or None."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for following in sorted(graph.get(node, ())):
            if state.get(following) == "open":
                return [*path[path.index(following) :], following]
            if following not in state and (cycle := visit(following)):
                return cycle
        state[node] = "done"
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_find_cycle_reports_a_cycle_and_accepts_a_chain() -> None:
    assert find_cycle({"crawl": {"store"}, "store": {"archive"}, "archive": {"crawl"}}) == [
        "archive",
        "crawl",
        "store",
        "archive",
    ]
    assert find_cycle({"crawl": {"store", "archive"}, "archive": {"store"}, "store": set()}) is None


def test_no_import_cycle_between_packages_of_book_assets() -> None:
    graph = package_graph()
    assert graph["crawl"] >= {"store", "scraper", "queue"}  # the graph is read at all
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle between packages: " + " -> ".join(cycle or [])
