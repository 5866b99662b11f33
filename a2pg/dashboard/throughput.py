"""Throughput from the workers' heartbeats, sampled by the dashboard process.

Each heartbeat carries the worker's cumulative ``completed`` count
(``WorkerBeat.completed``). The dashboard reads ``Store.workers()`` every
``interval`` seconds and keeps, for the last ``window`` seconds, how many
completions appeared between samples: the sum over workers of each count's growth
(a worker seen for the first time counts what it completed since it started, if it
started after the previous sample; a count that went down is a restarted worker and
counts from zero). Completions are not split by consumer: a heartbeat does not say
which consumer did the work. The history lives in this process only: it starts
empty when the dashboard starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from ..models import WorkerInfo
from ..store import Store

log = logging.getLogger("a2pg.dashboard")

SAMPLE_SECONDS = 5.0
WINDOW_SECONDS = 600.0
BUCKET_SECONDS = 30.0
"""The rate chart's resolution: one bar per this many seconds."""


@dataclass(frozen=True, slots=True)
class Sample:
    at: float
    """``time.monotonic()`` of the sample."""
    completed: int
    """Completions since the previous sample."""


@dataclass(frozen=True, slots=True)
class Rate:
    """Completions per second over the last ``seconds``; ``span`` is what the samples
    cover (less than ``seconds`` while the dashboard has not run that long)."""

    seconds: float
    per_second: float | None
    """``None`` before the first two samples."""
    span: float = 0.0


class Throughput:
    """Samples of completion counts; fed by ``observe`` (the sampler task calls it)."""

    def __init__(self, window: float = WINDOW_SECONDS) -> None:
        self.window = window
        self.samples: deque[Sample] = deque()
        self._counts: dict[str, int] = {}
        self._last_at: float | None = None
        self._last_seen: datetime | None = None
        self.started_at: float | None = None

    def observe(self, workers: Sequence[WorkerInfo], at: float) -> None:
        """One sample: the growth of every worker's ``completed`` count since the last."""
        grown = 0
        counts: dict[str, int] = {}
        for info in workers:
            beat = info.beat
            counts[beat.holder] = beat.completed
            before = self._counts.get(beat.holder)
            if before is None:
                new = self._last_seen is None or beat.started_at > self._last_seen
                if self._last_at is not None and new:
                    grown += beat.completed
            else:
                grown += beat.completed - before if beat.completed >= before else beat.completed
        if self._last_at is None:
            self.started_at = at
        else:
            self.samples.append(Sample(at, grown))
        self._counts = counts
        self._last_at = at
        self._last_seen = max((w.last_seen for w in workers), default=self._last_seen)
        while self.samples and self.samples[0].at < at - self.window:
            self.samples.popleft()

    def rate(self, seconds: float, now: float) -> Rate:
        if self.started_at is None or not self.samples:
            return Rate(seconds, None)
        since = now - seconds
        done = sum(s.completed for s in self.samples if s.at > since)
        span = min(seconds, self.samples[-1].at - self.started_at)
        return Rate(seconds, done / span if span > 0 else None, span)

    def buckets(self, now: float, size: float = BUCKET_SECONDS) -> list[float]:
        """Completions per second in each ``size`` bucket of the window, oldest first."""
        count = int(self.window // size)
        totals = [0] * count
        for sample in self.samples:
            slot = int((now - sample.at) // size)
            if 0 <= slot < count:
                totals[count - 1 - slot] += sample.completed
        return [total / size for total in totals]


@contextlib.asynccontextmanager
async def sampling(
    store: Store, throughput: Throughput, every: float = SAMPLE_SECONDS
) -> AsyncIterator[None]:
    """Samples ``store.workers()`` into ``throughput`` every ``every`` seconds meanwhile."""

    async def loop() -> None:
        while True:
            try:
                throughput.observe(await store.workers(), time.monotonic())
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a database blip: the next sample tries again
                log.warning("dashboard: reading worker heartbeats failed: %s", exc)
            await asyncio.sleep(every)

    task = asyncio.create_task(loop(), name="a2pg-dashboard-throughput")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
