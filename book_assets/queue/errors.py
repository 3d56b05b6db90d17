"""Errors raised by the task queue."""

from __future__ import annotations


class QueueError(Exception):
    """Base class of the queue's errors."""


class LeaseLost(QueueError):
    """The caller's lease on a task is gone: it expired and another worker reclaimed the task, or the task
    was already finished. The caller must drop its result; the current lease holder owns the task.

    ``complete`` and ``fail`` return ``False`` / ``'lost'`` instead of raising; :meth:`TaskQueue.complete`
    raises this only when called with ``strict=True``.
    """
