"""Security: masked passwords, a loopback-only sandbox, parameterized SQL only."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from book_assets.sandbox.server import SandboxServer
from book_assets_tests.reliability.conftest import worker_env

pytestmark = pytest.mark.chaos

SOURCE = Path(__file__).resolve().parents[2] / "book_assets"


def test_sandbox_binds_loopback_by_default() -> None:
    with SandboxServer() as server:
        assert server.host == "127.0.0.1"


@pytest.mark.parametrize("command", [["status"], ["work", "--fetch", "http"], ["db", "status"]])
def test_password_never_printed_when_the_database_is_unreachable(command: list[str], tmp_path: Path) -> None:
    secret = "s3cr3t-Pa55word"
    url = f"postgresql://alice:{secret}@127.0.0.1:1/nowhere"
    env = worker_env(url, "http://127.0.0.1:9/")
    proc = subprocess.run(
        [sys.executable, "-m", "book_assets.cli", *command],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert secret not in output, output
    assert "Traceback" not in output, output
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def _sql_calls(tree: ast.AST) -> list[tuple[int, str]]:
    """``execute``/``query``/``mogrify`` calls whose first argument formats values into the SQL text."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
            continue
        if node.func.attr not in ("execute", "executemany", "query", "mogrify", "run_sql"):
            continue
        sql = node.args[0]
        if (
            isinstance(sql, ast.JoinedStr)
            or (isinstance(sql, ast.BinOp) and isinstance(sql.op, ast.Mod))
            or (isinstance(sql, ast.Call) and isinstance(sql.func, ast.Attribute) and sql.func.attr == "format")
        ):
            found.append((node.lineno, ast.unparse(sql)[:120]))
    return found


#: f-strings that only interpolate identifiers, quoted on the way in (reviewed: not values).
IDENTIFIER_ONLY = re.compile(r'"\{[a-z_]+\}"|quote_ident|sql\.Identifier')


def test_sql_is_always_parameterized() -> None:
    offenders = []
    for path in sorted(SOURCE.rglob("*.py")):
        for line, text in _sql_calls(ast.parse(path.read_text(), str(path))):
            if not IDENTIFIER_ONLY.search(text):
                offenders.append(f"{path.relative_to(SOURCE.parent)}:{line}: {text}")
    assert offenders == []
