"""Every setting's default is declared once, in ``book_assets/settings.py``; everything else overrides it.

The scan reads the package's source: a function parameter, a dataclass or model field, a pydantic ``Field`` or a
click option named like a setting may not carry a default of its own (``None``, meaning "not given", and a
value read from the settings, ``default("name")``, are fine). The CLI options and Dagster resource fields
are also checked for what they show the user: the setting's own documentation.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import click
import dagster as dg
import pytest

from book_assets.cli import crawl_cmd, demo_cmd, work_cmd
from book_assets.defs.resources import CrawlRunConfig, FetcherResource, SchedulingResource, SiteResource
from book_assets.settings import Settings, describe

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[2] / "book_assets"
SETTINGS = set(Settings.model_fields)
#: Names a view of the settings uses for a setting of another name.
ALIASES = {"mode": "fetch_mode", "rate": "min_interval_s", "fetch": "fetch_mode"}
#: Parameters that share a setting's name but are not that setting (a queue library's own knob, say).
NOT_SETTINGS = {
    ("queue/context.py", "lease_s"),
    ("queue/context.py", "max_attempts"),
    ("queue/context.py", "timeout_s"),
    ("queue/retry.py", "max_attempts"),
    ("sandbox", "workers"),
    ("sandbox", "concurrency"),
    ("sandbox", "max_concurrency"),
    ("sandbox", "categories"),  # how many categories a sized catalogue has
    ("sandbox", "timeout_s"),
    ("crawl/discovery.py", "categories"),  # a count of categories followed
    ("crawl/stats.py", "concurrency"),  # the values the autoscaler moved through
    ("scheduling/weights.py", "weights"),  # the entries of a weights value
}
#: Run config fields that are what one run does, not settings.
RUN_ONLY = {"requeue_failed", "include_permanent"}
#: What reads a setting's declared default instead of declaring one.
READS = {"default", "describe", "LIVE_SITE_URL"}


def _setting(name: str | None) -> str | None:
    if name is None:
        return None
    name = ALIASES.get(name, name).lstrip("-").replace("-", "_")
    return name if name in SETTINGS else None


def _own_default(node: ast.expr | None) -> bool:
    """Whether ``node`` is a default of its own: not None, not a read of the settings."""
    if node is None or (isinstance(node, ast.Constant) and node.value is None):
        return False
    if any(isinstance(n, ast.Name) and n.id in READS for n in ast.walk(node)):
        return False
    return not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Field" and not _field_default(node))


def _field_default(call: ast.Call) -> bool:
    for kw in call.keywords:
        if kw.arg == "default" and _own_default(kw.value):
            return True
        if kw.arg == "default_factory":
            return True
    return False


def _declarations(tree: ast.AST) -> Iterator[tuple[str, int, ast.expr | None]]:
    """(name, line, default) of every parameter, annotated field and click option in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            positional = args.posonlyargs + args.args
            for arg, value in zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True):
                yield arg.arg, arg.lineno, value
            for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
                yield arg.arg, arg.lineno, kw_default
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    yield item.target.id, item.lineno, item.value
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "option":
            flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            option_default = next((kw.value for kw in node.keywords if kw.arg == "default"), None)
            for flag in flags:
                yield flag, node.lineno, option_default


def _exempt(relative: str, setting: str) -> bool:
    return any(relative.startswith(where) and setting == name for where, name in NOT_SETTINGS)


def test_no_setting_has_a_default_declared_outside_the_settings_module() -> None:
    twice: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative == "settings.py":
            continue
        for name, line, value in _declarations(ast.parse(path.read_text(encoding="utf-8"))):
            setting = _setting(name)
            if setting and not _exempt(relative, setting) and _own_default(value):
                twice.append(f"book_assets/{relative}:{line}: {name} declares a default for setting {setting}")
    assert twice == []


def test_the_scan_finds_a_second_default_when_there_is_one() -> None:
    planted = "def run(workers: int = 2, *, timeout_s=None) -> None: ...\nclass C:\n    lease_s: float = 60.0\n"
    found = [(n, _setting(n)) for n, _line, v in _declarations(ast.parse(planted)) if _setting(n) and _own_default(v)]
    assert found == [("workers", "workers"), ("lease_s", "lease_s")]


def test_crawl_options_are_the_settings_with_their_documentation_and_no_default() -> None:
    for command in (crawl_cmd, work_cmd, demo_cmd):
        for param in command.params:
            setting = _setting(param.name)
            if setting is None:
                continue
            assert param.default is None, f"{command.name} {param.opts}: a default of its own"
            assert isinstance(param, click.Option), f"{command.name} {param.opts}: a setting as an argument"
            assert param.help == describe(setting), f"{command.name} {param.opts}: help differs from the setting"


def test_dagster_resource_and_run_config_fields_are_settings_documented_by_them() -> None:
    for resource in (FetcherResource, SiteResource, SchedulingResource, CrawlRunConfig):
        for name, field in resource.model_fields.items():
            if name in RUN_ONLY:
                continue
            assert name in SETTINGS, f"{resource.__name__}.{name} is not a setting"
            assert field.default is None, f"{resource.__name__}.{name}: a default of its own"
            assert field.description == describe(name), f"{resource.__name__}.{name}: description differs"
    assert issubclass(FetcherResource, dg.ConfigurableResource) and issubclass(CrawlRunConfig, dg.Config)
