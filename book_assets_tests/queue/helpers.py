"""Helpers shared by the queue tests and their worker processes (importable under 'spawn')."""

from __future__ import annotations

from book_assets.db.connection import Database
from book_assets.queue import Backoff, TaskQueue

TYPES = ("detail", "listing")


def make_queue(db: Database, **kwargs: object) -> TaskQueue:
    """A queue without politeness (interval 0) and with immediate, deterministic retries."""
    options: dict[str, object] = {
        "task_types": TYPES,
        "lease_s": 30.0,
        "backoff": Backoff(base_s=0.0, max_s=0.0, jitter="none"),
        "default_interval_s": 0.0,
    }
    options.update(kwargs)
    return TaskQueue(db, **options)  # type: ignore[arg-type]


def url(i: int | str, host: str = "books.example") -> str:
    return f"http://{host}/page/{i}"


def swrr(weights: dict[str, float], picks: int) -> list[str]:
    """Reference smooth weighted round-robin (nginx), all members always backlogged."""
    current = dict.fromkeys(weights, 0.0)
    total = sum(weights.values())
    out = []
    for _ in range(picks):
        for name, weight in weights.items():
            current[name] += weight
        best = min(current, key=lambda name: (-current[name], name))
        current[best] -= total
        out.append(best)
    return out
