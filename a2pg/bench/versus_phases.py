"""The measured phases of ``a2pg bench --versus``, written once for every system.

Each system is a ``Side`` (``versus_a2pg``, ``versus_pgqueuer``): it enqueues jobs
numbered ``n``, starts workers whose no-op handler reports each ``n`` to a ``Tally``,
and says from its own tables how many jobs are left and done. The timing, pacing and
checks live here, so both systems are measured the same way:

- append_single / append_batch: ``PRODUCERS`` tasks enqueue 1 / ``BATCH`` jobs per call;
  jobs/s from the first call to the last return.
- drain: a backlog is enqueued first; then ``WORKERS`` workers are launched in this
  process (the clock starts as they are, so each system's worker start-up is in its
  figure) and jobs/s runs until the system's tables hold no job left to do.
- mixed: the workers and one producer of ``MIXED_BATCH``-job calls start together; jobs
  recorded done after ``mixed_seconds``, per second; then the producer stops and the
  rest is drained, so the checks cover every job.
- wake: one idle worker; one job at a time at ``WAKE_RATE`` per second, each waited
  for; from the enqueue call's return (its commit acknowledged) to the handler's start.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .errors import BenchFailed
from .phases import Check
from .versus_config import BATCH, MIXED_BATCH, PRODUCERS, WAKE_RATE, WORKERS, VersusConfig

DRAIN_POLL = 0.02
DRAIN_TIMEOUT = 600.0
WAKE_TIMEOUT = 10.0


class Tally:
    """What the handlers saw: every job number, how often, and when it first started."""

    def __init__(self) -> None:
        self.calls = 0
        self.duplicates = 0
        self.started: dict[int, float] = {}
        self._waiting: dict[int, asyncio.Future[float]] = {}

    def record(self, n: int) -> None:
        """Called by a handler as it starts (``time.perf_counter()`` is the start)."""
        now = time.perf_counter()
        self.calls += 1
        if n in self.started:
            self.duplicates += 1
            return
        self.started[n] = now
        waiter = self._waiting.pop(n, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(now)

    async def started_at(self, n: int, within: float) -> float:
        """When job ``n``'s handler started, waiting up to ``within`` seconds for it."""
        if n in self.started:
            return self.started[n]
        waiter = asyncio.get_running_loop().create_future()
        self._waiting[n] = waiter
        try:
            return await asyncio.wait_for(waiter, within)
        except TimeoutError:
            raise BenchFailed(f"job {n} was not handled within {within:.0f} s") from None
        finally:
            self._waiting.pop(n, None)

    def exactly_once(self, jobs: int) -> bool:
        return self.calls == jobs and len(self.started) == jobs and not self.duplicates


class Workers(Protocol):
    """Workers a side launched; ``stop()`` waits until they have stopped cleanly."""

    def failure(self) -> BaseException | None:
        """The error a worker stopped with, if any did."""
        ...

    async def stop(self) -> None: ...


def first_failure(tasks: Sequence[asyncio.Task[Any]]) -> BaseException | None:
    """The error the first of ``tasks`` to have failed stopped with (``Workers.failure``)."""
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            return task.exception()
    return None


class Side(Protocol):
    """One system under test, its connections open, its tables empty."""

    name: str

    def phase(self, label: str) -> None:
        """A new phase begins (a2pg takes fresh session ids for it)."""
        ...

    async def enqueue(self, first: int, count: int) -> None:
        """Jobs ``first`` .. ``first + count - 1`` in one call (one transaction)."""
        ...

    async def fill(self, count: int) -> None:
        """A backlog of jobs ``0 .. count - 1``, untimed."""
        ...

    async def start_workers(self, count: int, tally: Tally) -> Workers: ...

    async def left(self) -> int:
        """Jobs stored and not yet done."""
        ...

    async def done(self) -> tuple[int, int]:
        """Jobs recorded done, and how many distinct jobs those are."""
        ...

    async def clean(self) -> None:
        """Empties the side's tables."""
        ...


@dataclass(slots=True)
class Measured:
    """A phase's figure (or latency samples) and its checks."""

    value: float
    checks: list[Check] = field(default_factory=list)
    samples: list[float] = field(default_factory=list)


async def _produce(calls: int, size: int, enqueue: Callable[[int], Awaitable[None]]) -> float:
    """Jobs/s of ``calls`` enqueue calls of ``size`` jobs from ``PRODUCERS`` tasks."""
    todo = iter(range(calls))

    async def producer() -> None:
        for call in todo:
            await enqueue(call * size)

    started = time.perf_counter()
    await asyncio.gather(*(producer() for _ in range(PRODUCERS)))
    return calls * size / (time.perf_counter() - started)


async def append(side: Side, label: str, calls: int, size: int) -> Measured:
    """``append_single`` (size 1) or ``append_batch``; checks every job was stored."""
    side.phase(label)
    rate = await _produce(calls, size, lambda first: side.enqueue(first, size))
    jobs = calls * size
    stored = await side.left()
    await side.clean()
    check = Check(f"{label}: every job stored", stored == jobs, f"{stored:,} of {jobs:,}")
    return Measured(rate, [check])


async def _until_done(side: Side, workers: Workers, started: float) -> float:
    while await side.left():
        failed = workers.failure()
        if failed is not None:
            raise BenchFailed(f"a {side.name} worker failed: {failed!r}")
        if time.perf_counter() - started > DRAIN_TIMEOUT:
            raise BenchFailed(f"a {side.name} drain did not finish in {DRAIN_TIMEOUT:.0f} s")
        await asyncio.sleep(DRAIN_POLL)
    return time.perf_counter() - started


async def _exactly_once(side: Side, label: str, tally: Tally, jobs: int) -> list[Check]:
    done, distinct = await side.done()
    left = await side.left()
    return [
        Check(
            f"{label}: the handlers ran each job once",
            tally.exactly_once(jobs),
            f"{tally.calls:,} calls for {len(tally.started):,} of {jobs:,} jobs",
        ),
        Check(
            f"{label}: every job recorded done once, none left",
            done == distinct == jobs and left == 0,
            f"{done:,} done ({distinct:,} distinct) of {jobs:,}, {left:,} left",
        ),
    ]


class Meter(Protocol):
    """What a drain's caller measures beside it (``a2pg bench --citus``: servers' CPU)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


async def drain(side: Side, label: str, jobs: int, meter: Meter | None = None) -> Measured:
    """Jobs/s of ``WORKERS`` workers draining a backlog of ``jobs``; ``meter`` runs from
    the workers' launch to the last job done (the backlog is enqueued before)."""
    side.phase(label)
    await side.fill(jobs)
    tally = Tally()
    if meter is not None:
        meter.start()
    started = time.perf_counter()
    workers = await side.start_workers(WORKERS, tally)
    try:
        elapsed = await _until_done(side, workers, started)
        if meter is not None:
            meter.stop()
    finally:
        await workers.stop()
    checks = await _exactly_once(side, label, tally, jobs)
    await side.clean()
    return Measured(jobs / elapsed, checks)


async def mixed(side: Side, label: str, seconds: float) -> Measured:
    side.phase(label)
    tally = Tally()
    stop = asyncio.Event()
    produced = 0

    async def producer() -> None:
        nonlocal produced
        while not stop.is_set():
            await side.enqueue(produced, MIXED_BATCH)
            produced += MIXED_BATCH

    started = time.perf_counter()
    workers = await side.start_workers(WORKERS, tally)
    try:
        task = asyncio.create_task(producer(), name="a2pg-bench-vs-producer")
        try:
            await asyncio.sleep(seconds)
            elapsed = time.perf_counter() - started
            done, _ = await side.done()
        finally:
            stop.set()
            await task
        await _until_done(side, workers, time.perf_counter())
    finally:
        await workers.stop()
    checks = await _exactly_once(side, label, tally, produced)
    await side.clean()
    return Measured(done / elapsed, checks)


async def wake(side: Side, label: str, samples: int) -> Measured:
    """Seconds from each enqueue's return to its handler's start, one idle worker."""
    side.phase(label)
    tally = Tally()
    workers = await side.start_workers(1, tally)
    latencies: list[float] = []
    try:
        await side.enqueue(0, 1)  # the worker is up and listening once this one ran
        await tally.started_at(0, WAKE_TIMEOUT)
        began = time.perf_counter()
        for n in range(1, samples + 1):
            pause = began + n / WAKE_RATE - time.perf_counter()
            if pause > 0:
                await asyncio.sleep(pause)
            await side.enqueue(n, 1)
            returned = time.perf_counter()
            latencies.append(max(0.0, await tally.started_at(n, WAKE_TIMEOUT) - returned))
        await _until_done(side, workers, time.perf_counter())
    finally:
        await workers.stop()
    checks = await _exactly_once(side, label, tally, samples + 1)
    await side.clean()
    return Measured(0.0, checks, latencies)


async def one_round(side: Side, c: VersusConfig, label: str) -> dict[str, Measured]:
    """Every phase of one round on one side, by figure key (wake's samples under "wake")."""
    await side.clean()
    return {
        "append_single": await append(side, f"{label} append_single", c.vs_appends, 1),
        "append_batch": await append(side, f"{label} append_batch", c.vs_batches, BATCH),
        "drain": await drain(side, f"{label} drain", c.vs_events),
        "mixed": await mixed(side, f"{label} mixed", c.mixed_seconds),
        "wake": await wake(side, f"{label} wake", c.wake_samples),
    }
