"""Errors raised by the task queue."""

from __future__ import annotations


class QueueError(Exception):
    """Base class of the queue's errors."""


class LeaseLost(QueueError):
    """The caller's lease on a task is gone: it expired and another worker reclaimed the task, or the task
    was already finished. The caller must drop its result; the current lease holder owns the task.

    The one signal of a lost lease: every operation on a single leased task (``heartbeat``,
    ``complete_with``, ``fail``, the politeness waits) raises it and changes nothing. Batch operations
    (``complete_many``, ``release``) return how many tasks were still held.
    """
