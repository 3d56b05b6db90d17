"""DatabaseClock: a slot is never due on this host before the database's clock has reached it.

The database here is a stand-in whose clock is this host's ``time.monotonic()`` plus a constant, reached
over a link that is slow one way only, as a busy host's is: the offset's midpoint estimate is then off by
half the round trip, and only the error bound keeps a start from coming early.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest

from book_assets.queue.clock import DatabaseClock

EPOCH_OFFSET = 1_700_000_000.0


class _LopsidedDatabase:
    """Answers the clock statement with ``monotonic() + EPOCH_OFFSET``, read ``request_s`` after it was
    sent and returned ``response_s`` after it was read."""

    def __init__(self, request_s: float, response_s: float) -> None:
        self.request_s, self.response_s = request_s, response_s

    def statement(self, _sql: str) -> list[dict[str, Any]]:
        time.sleep(self.request_s)
        epoch = time.monotonic() + EPOCH_OFFSET
        time.sleep(self.response_s)
        return [{"epoch": epoch}]


@pytest.mark.parametrize(("request_s", "response_s"), [(0.05, 0.0), (0.0, 0.05), (0.0, 0.0)])
def test_a_slot_is_never_due_before_the_database_clock_reads_it(request_s: float, response_s: float) -> None:
    clock = DatabaseClock(_LopsidedDatabase(request_s, response_s), samples=1)  # type: ignore[arg-type]
    at = datetime.fromtimestamp(time.monotonic() + EPOCH_OFFSET + 10.0, tz=UTC)
    reached = at.timestamp() - EPOCH_OFFSET  # when the stand-in's clock reads ``at``, on this host
    due = clock.due(at)
    assert due >= reached, f"due {reached - due:.3f}s before the database's clock reads the slot"
    assert clock.round_trip_s is not None and due - reached <= clock.round_trip_s + 0.001
