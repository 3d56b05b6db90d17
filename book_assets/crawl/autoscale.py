"""Pages in flight per worker that fit the machine: scaled between a minimum and a maximum on load.

Modelled on Crawlee's ``AutoscaledPool`` (``crawlee/_autoscaling``): the pool samples CPU, memory and
event-loop lag, and every adjustment interval scales up by a step (5% of the current concurrency, at
least one) when no resource was overloaded and the pool was using at least 90% of its concurrency, and
scales down by a step when any resource was overloaded in too many of the samples. The thresholds are
Crawlee's: a CPU sample is overloaded above 95% busy, a memory sample above 90% used, a loop sample with
more than 50 ms lag; a resource is overloaded when more than 40% (CPU), 20% (memory) or 60% (loop) of its
samples since the last adjustment were.

The decision logic (:class:`Autoscaler`) is pure; :class:`LoadMonitor` takes the samples in the worker's
event loop. ``--concurrency N`` pins the concurrency (minimum = maximum = N) and nothing is sampled.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil

CPU_MAX = 0.95
MEMORY_MAX = 0.90
LOOP_LAG_MAX_S = 0.05
OVERLOADED_SHARE = {"cpu": 0.4, "memory": 0.2, "loop": 0.6}
STEP_RATIO = 0.05
BUSY_RATIO = 0.9
SAMPLE_EVERY_S = 0.5
ADJUST_EVERY_S = 5.0


@dataclass(frozen=True)
class LoadSample:
    """One look at the machine: CPU busy share (all cores), memory used share, event-loop lag."""

    cpu: float
    memory: float
    loop_lag_s: float

    def overloaded(self) -> dict[str, bool]:
        return {"cpu": self.cpu > CPU_MAX, "memory": self.memory > MEMORY_MAX, "loop": self.loop_lag_s > LOOP_LAG_MAX_S}


@dataclass
class Autoscaler:
    """The desired concurrency, moved one step at a time from the samples since the last adjustment."""

    minimum: int
    maximum: int
    desired: int = 0
    samples: list[LoadSample] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 1 <= self.minimum <= self.maximum:
            raise ValueError(f"min_concurrency {self.minimum} must be between 1 and max_concurrency {self.maximum}")
        self.desired = min(max(self.desired or self.minimum, self.minimum), self.maximum)

    @property
    def pinned(self) -> bool:
        return self.minimum == self.maximum

    def observe(self, sample: LoadSample) -> None:
        self.samples.append(sample)

    def overloaded(self) -> list[str]:
        """The resources overloaded in more than their share of the samples."""
        if not self.samples:
            return []
        flags = [s.overloaded() for s in self.samples]
        return [name for name, share in OVERLOADED_SHARE.items() if sum(f[name] for f in flags) / len(flags) > share]

    def adjust(self, busy: int) -> int:
        """Scale after an interval in which up to ``busy`` pages were in flight; returns the new concurrency."""
        step = max(1, math.ceil(self.desired * STEP_RATIO))
        if self.overloaded():
            self.desired = max(self.minimum, self.desired - step)
        elif self.samples and busy >= BUSY_RATIO * self.desired:
            self.desired = min(self.maximum, self.desired + step)
        self.samples.clear()
        return self.desired


class LoadMonitor:
    """Samples the machine in the running event loop and adjusts an :class:`Autoscaler` periodically."""

    def __init__(self, scaler: Autoscaler, busy: Callable[[], int]) -> None:
        self.scaler = scaler
        self._busy = busy
        self._peak_busy = 0
        self._task: asyncio.Task[None] | None = None
        self.history: list[int] = [scaler.desired]

    def start(self) -> None:
        if not self.scaler.pinned:
            psutil.cpu_percent(None)  # the first call only starts the measurement
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        last_adjust = time.monotonic()
        while True:
            before = time.monotonic()
            await asyncio.sleep(SAMPLE_EVERY_S)
            lag = max(0.0, time.monotonic() - before - SAMPLE_EVERY_S)
            self._peak_busy = max(self._peak_busy, self._busy())
            memory = psutil.virtual_memory()
            self.scaler.observe(LoadSample(psutil.cpu_percent(None) / 100, 1 - memory.available / memory.total, lag))
            if time.monotonic() - last_adjust >= ADJUST_EVERY_S:
                desired = self.scaler.adjust(self._peak_busy)
                if desired != self.history[-1]:
                    self.history.append(desired)
                self._peak_busy, last_adjust = 0, time.monotonic()
