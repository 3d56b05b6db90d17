"""Mutation check of the critical guards: prints ONE JSON object, exits 1 if any mutant survives.

Each mutant in ``scripts/mutants.yaml`` is one small change that breaks a promise (a fencing or status
guard, budget accounting, dedup, the no-error-page validation, politeness slots, 404-is-permanent, raw HTML
as served, ...). For each, the tracked files are copied to a temporary folder, the change is applied there
(never to the working tree), and the mutant's tests run in the copy against the project's database server:
a mutant is *killed* when its tests fail. First, the same tests must pass on the unmutated copy, so a
"kill" is never a test that fails anyway.

    .venv/bin/python scripts/mutants.py            # all mutants
    .venv/bin/python scripts/mutants.py fail-status-guard http-404-retried
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from book_assets.db.connection import resolve_database_url
from book_assets.settings import load_settings

ROOT = Path(__file__).resolve().parent.parent
LIST = ROOT / "scripts" / "mutants.yaml"


def _copy_tree(target: Path) -> None:
    listed = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]  # the working tree as it is
    tracked = subprocess.run(listed, cwd=ROOT, capture_output=True, check=True).stdout
    for name in tracked.decode().split("\0"):
        if not name or not (ROOT / name).is_file():
            continue
        dest = target / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, dest)


def _check(tree: Path, mutant: dict[str, Any]) -> str:
    """The file's text, after checking that the mutant's text occurs in it as often as the list says."""
    text = Path(tree, mutant["file"]).read_text(encoding="utf-8")
    found, expected = text.count(mutant["find"]), mutant.get("count", 1)
    if found != expected:
        raise SystemExit(f"mutant {mutant['id']}: its text occurs {found} times in {mutant['file']}, not {expected}")
    return text


def _apply(tree: Path, mutant: dict[str, Any]) -> None:
    text = _check(tree, mutant)
    (tree / mutant["file"]).write_text(text.replace(mutant["find"], mutant["replace"]), encoding="utf-8")


def _pytest(tree: Path, tests: list[str], database_url: str) -> tuple[int, float, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOOK_PIPELINE_")}
    env.update({"DATABASE_URL": database_url, "PYTHONPATH": str(tree)})
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-3:])
    return proc.returncode, time.monotonic() - started, tail


def main(argv: list[str]) -> int:
    mutants: list[dict[str, Any]] = yaml.safe_load(LIST.read_text(encoding="utf-8"))
    if argv:
        mutants = [m for m in mutants if m["id"] in argv]
    database_url = resolve_database_url(load_settings())
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="book-pipeline-mutants-") as tmp:
        base = Path(tmp) / "base"
        _copy_tree(base)
        for mutant in mutants:
            _check(base, mutant)  # a mutant whose text is gone is a stale list entry: say so before running
        tests = sorted({t for m in mutants for t in m["tests"]})
        code, seconds, tail = _pytest(base, tests, database_url)
        if code != 0:
            print(json.dumps({"error": "the mutants' tests fail on the unmutated tree", "output": tail}))
            return 2
        for mutant in mutants:
            tree = Path(tmp) / mutant["id"]
            _copy_tree(tree)
            _apply(tree, mutant)
            code, seconds, tail = _pytest(tree, mutant["tests"], database_url)
            results.append({"id": mutant["id"], "killed": code == 1, "exit": code, "seconds": round(seconds, 1)})
            if code != 1:
                results[-1]["output"] = tail
            shutil.rmtree(tree, ignore_errors=True)
    survivors = [r["id"] for r in results if not r["killed"]]
    report = {"mutants": len(results), "killed": len(results) - len(survivors), "survivors": survivors}
    report["detail"] = results
    print(json.dumps(report, indent=1))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
