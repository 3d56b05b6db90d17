"""The one thread a worker process runs its blocking database calls on (its one connection is never shared
between threads), as the parts of the worker that need the database see it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class DbRunner(Protocol):
    """Runs ``fn(*args, **kwargs)`` on the worker's database thread and awaits its result."""

    def __call__(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Awaitable[T]: ...
