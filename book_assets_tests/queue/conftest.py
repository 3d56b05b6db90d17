"""Queue test fixtures: a queue over the per-test ``db``."""

from __future__ import annotations

import pytest

from book_assets.db.connection import Database
from book_assets.queue import TaskQueue
from book_assets_tests.queue.helpers import make_queue


@pytest.fixture
def queue(db: Database) -> TaskQueue:
    """A queue without politeness (interval 0) and with immediate retries."""
    return make_queue(db)
