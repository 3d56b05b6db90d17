"""What the parts of the queue share: the process's database, the queue's settings, the database's clock and
the named queries (``book_assets/sql/queue.sql``), with the checks every part applies to its arguments."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Awaitable, Callable, Collection
from typing import Final, Protocol, TypeVar
from urllib.parse import urlsplit

from book_assets.db.connection import Database
from book_assets.queue.clock import DatabaseClock
from book_assets.queue.retry import Backoff
from book_assets.sql import load_queries

T = TypeVar("T")


class Runner(Protocol):
    """How async code runs one of the queue's blocking calls (e.g. on the thread that owns the connection)."""

    def __call__(self, fn: Callable[[], T], /) -> Awaitable[T]: ...


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset()


def named_queries() -> dict[str, str]:
    """The queue's named queries."""
    return load_queries("queue")


class QueueContext:
    """The queue's settings over one :class:`~book_assets.db.connection.Database` (one connection per process).

    Args:
        db: the process's database.
        task_types: the task types this queue accepts; anything else is rejected with ``ValueError``.
        lease_s: how long a claim holds a task without a heartbeat.
        max_attempts: default attempts before a task is dead-lettered (per task: ``enqueue(max_attempts=)``).
        backoff: retry delays of retryable failures.
        default_interval_s: politeness interval given to a domain the first time a task names it.
        slot_horizon_s: how far ahead one claim reserves politeness slots (capped at half the lease, so a
            task's lease never runs out while its worker waits for the slot).
        idle_timeout_s: the longest an idle worker sleeps without a notification (``Waiting.idle_wait_s``).
        epoch_scope: whose epochs this queue begins and enqueues in (``queue_epochs.scope``): the queues of one
            scope share them, and an epoch of another scope is none of theirs (empty: the scope of a queue
            given none).
    """

    def __init__(
        self,
        db: Database,
        *,
        task_types: Collection[str],
        lease_s: float = 60.0,
        max_attempts: int = 5,
        backoff: Backoff | None = None,
        default_interval_s: float = 1.0,
        slot_horizon_s: float = 2.0,
        idle_timeout_s: float = 5.0,
        epoch_scope: str = "",
    ) -> None:
        if not task_types or any(not isinstance(t, str) or not t for t in task_types):
            raise ValueError(f"task_types must be non-empty strings, got {task_types!r}")
        self.db = db
        self.task_types: tuple[str, ...] = tuple(sorted(set(task_types)))
        self.lease_s = check_number("lease_s", lease_s, allow_zero=False)
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ValueError(f"max_attempts must be an integer >= 1, got {max_attempts!r}")
        self.max_attempts = max_attempts
        self.backoff = backoff or Backoff()
        self.default_interval_s = check_number("default_interval_s", default_interval_s)
        self.slot_horizon_s = min(check_number("slot_horizon_s", slot_horizon_s), self.lease_s / 2)
        self.idle_timeout_s = check_number("idle_timeout_s", idle_timeout_s, allow_zero=False)
        self.epoch_scope = epoch_scope
        #: The database's clock as seen from this host: what politeness slots are timed by.
        self.clock = DatabaseClock(db)

    def check_type(self, task_type: str) -> str:
        """``task_type``, if this queue accepts it; ``ValueError`` otherwise."""
        if task_type not in self.task_types:
            raise ValueError(f"unknown task type {task_type!r}; this queue accepts {list(self.task_types)}")
        return task_type


_ORIGIN = re.compile(r"\s*([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)")


def domain_of(url: object) -> str:
    """The politeness domain of a task URL: its host (and port, when one is given), lower-cased.

    Raises:
        ValueError: the URL is missing, empty, not http(s) or has no host.
    """
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"task payload needs a non-empty 'url' string, got {url!r}")
    match = _ORIGIN.match(url)
    try:
        # Everything that can be wrong with a host lives in the scheme and netloc, which a crawl repeats for
        # thousands of URLs: parse each distinct origin once.
        return _domain_of_origin(match.group(1).lower(), match.group(2)) if match else _domain_of_origin("", "")
    except ValueError as exc:
        raise ValueError(f"malformed task URL {url!r}: {exc}") from None


@functools.lru_cache(maxsize=4096)
def _domain_of_origin(scheme: str, netloc: str) -> str:
    parts = urlsplit(f"{scheme}://{netloc}/")
    port = parts.port
    if scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("expected http(s)://host/...")
    return parts.hostname.lower() + (f":{port}" if port is not None else "")


def check_number(name: str, value: float, *, allow_zero: bool = True) -> float:
    """``value`` as a float, if it is a finite number >= 0 (> 0 without ``allow_zero``); ``ValueError`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return float(value)
