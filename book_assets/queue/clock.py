"""The database server's clock, read on this host: what politeness slots are timed by.

Slots (``tasks.slot_at``, ``domains.next_slot_at``) are times on the database's clock, which every worker
shares. A worker must not compare them with its own wall clock: a host whose clock runs 0.5 s ahead would
start every request half a second early. Instead it measures, like an NTP client, the offset between the
database's clock and its own ``time.monotonic()``: one read-only statement, ``clock_timestamp()`` bracketed
by two monotonic readings, whose midpoint is off by at most half the round trip; the best of a few samples
is kept and measured again after :data:`REFRESH_S`. A slot then comes at ``slot_at - offset`` on the
monotonic clock, which no wall-clock step, skew or libfaketime moves, and a worker waits half the round
trip beyond it (:meth:`DatabaseClock.due`): the latest moment the slot can be, so no request starts before
its slot however slow the measurement was (a busy host's round trips reach tens of milliseconds).

The claim's own round trip would not do: it commits a write first (a WAL flush of several milliseconds on a
loaded host), so "seconds until the slot" computed inside it reach the worker late by a varying amount, and
every late start shortens the gap to the next request.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Final

from book_assets.db.connection import Database
from book_assets.sql import load_queries

#: How long an offset measurement is trusted (clocks drift by parts per million; NTP steps are rare).
REFRESH_S: Final = 30.0
#: Samples per measurement: the one with the shortest round trip is kept.
SAMPLES: Final = 3


class DatabaseClock:
    """The offset of the database server's clock from this host's ``time.monotonic()``."""

    def __init__(self, db: Database, *, refresh_s: float = REFRESH_S, samples: int = SAMPLES) -> None:
        self.db = db
        self.refresh_s = refresh_s
        self.samples = samples
        self._offset: float | None = None
        self._measured_at = 0.0
        self.round_trip_s: float | None = None

    def offset_s(self) -> float:
        """Database epoch seconds minus ``time.monotonic()``, measured again when older than ``refresh_s``."""
        if self._offset is None or time.monotonic() - self._measured_at > self.refresh_s:
            self._measure()
        assert self._offset is not None
        return self._offset

    def due(self, at: datetime) -> float:
        """The ``time.monotonic()`` reading by which the database's clock reads ``at``, for certain: the
        offset's estimate plus its error bound, half the measuring round trip."""
        offset = self.offset_s()
        assert self.round_trip_s is not None
        return at.timestamp() - offset + self.round_trip_s / 2

    def seconds_until(self, at: datetime) -> float:
        """How long from now until the database's clock surely reads ``at`` (negative: it has passed)."""
        return self.due(at) - time.monotonic()

    def _measure(self) -> None:
        sql = load_queries("queue")["clock_now"]
        best: tuple[float, float] | None = None
        for _ in range(self.samples):
            sent = time.monotonic()
            epoch = float(self.db.statement(sql)[0]["epoch"])
            received = time.monotonic()
            sample = (received - sent, epoch - (sent + received) / 2)
            if best is None or sample[0] < best[0]:
                best = sample
        assert best is not None
        self.round_trip_s, self._offset = best
        self._measured_at = time.monotonic()
