"""Command-line options generated from the settings: each one overrides the setting of its name for one run.

An option has no default of its own (left out, the setting's value stands: default, ``.env`` or
environment); its help is the setting's documentation and its type and bounds are the setting's, so the
CLI cannot drift from :class:`~book_assets.settings.Settings`.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

import click

from book_assets.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])


def _bounds(name: str) -> dict[str, Any]:
    # pydantic keeps ge/gt/le of a Field as metadata objects carrying that one attribute.
    bounds: dict[str, Any] = {}
    for rule in Settings.model_fields[name].metadata:
        if hasattr(rule, "ge"):
            bounds["min"] = rule.ge
        elif hasattr(rule, "gt"):
            bounds.update(min=rule.gt, min_open=True)
        elif hasattr(rule, "le"):
            bounds["max"] = rule.le
    return bounds


def _base_type(name: str) -> Any:
    annotation = Settings.model_fields[name].annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    return annotation


def click_type(name: str) -> click.ParamType:
    """The click type of setting ``name``: its choices, or its number type with the setting's bounds."""
    base = _base_type(name)
    if typing.get_origin(base) is Literal:
        return click.Choice([str(v) for v in typing.get_args(base)])
    if base is bool:
        return click.BOOL
    if base is int:
        return click.IntRange(**_bounds(name))
    if base is float:
        return click.FloatRange(**_bounds(name))
    if base is Path:
        return click.Path(dir_okay=False, path_type=Path)
    return click.STRING  # strings, and comma-separated lists the settings split


def setting_option(name: str, *flags: str) -> Callable[[F], F]:
    """A ``--name`` option (or ``flags``) that overrides setting ``name``; the function receives ``name``."""
    if name not in Settings.model_fields:
        raise KeyError(f"no setting named {name}")
    field = Settings.model_fields[name]
    declared = flags or ("--" + name.replace("_", "-"),)
    return click.option(*declared, name, type=click_type(name), default=None, help=field.description)


def setting_options(*names: str | tuple[str, str]) -> Callable[[F], F]:
    """Several :func:`setting_option` at once: a setting name, or (name, flag) for a shorter flag."""

    def decorate(fn: F) -> F:
        for entry in reversed(names):
            name, *flags = (entry,) if isinstance(entry, str) else entry
            fn = setting_option(name, *flags)(fn)
        return fn

    return decorate
