"""The worker's health signal: a file whose modification time is the last turn of its claim loop.

A worker's loop turns at least every half second while pages are in flight and every ``idle_timeout_s`` (5 s)
while it waits for work; each turn that reaches the database (a claim, a lease heartbeat, the idle wait's
query) blocks it while the database does not answer. So an old file means the worker is not claiming: frozen
(SIGSTOP, a hung event loop), or cut off from PostgreSQL. The metrics endpoint cannot say that: it is served
by another thread, and answers as long as the process lives. The Kubernetes probes of
``deploy/k8s/worker-deployment.yaml`` compare the file's age with a bound in a shell one-liner (no
interpreter started per probe).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Final

from book_assets.crawl.events import Events, Tick

log = logging.getLogger(__name__)

#: The file is touched at most this often (a loop turns many times a second under load).
TOUCH_EVERY_S: Final = 1.0


class HealthFile:
    """Touches ``path`` on the worker's loop turns (:class:`~book_assets.crawl.events.Tick`), at most every
    :data:`TOUCH_EVERY_S`; a file that cannot be written is warned about once, never a reason to stop."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._next = 0.0
        self._warned = False

    def subscribe(self, events: Events) -> None:
        events.connect(Tick, self.tick)

    def tick(self, _event: Tick) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + TOUCH_EVERY_S
        try:
            try:
                os.utime(self.path)
            except FileNotFoundError:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.path.touch()
        except OSError as exc:
            if not self._warned:
                self._warned = True
                log.warning("health_file %s cannot be written: %s", self.path, exc.strerror or exc)
