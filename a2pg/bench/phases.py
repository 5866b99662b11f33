"""The measured phases: drains (plain, chained), appends and wake latency, on worker processes.

- drain: a backlog of targeted events (event cursors) is appended first, then P
  worker processes (already connected and started) are released; events/s from the
  release until no head of the backlog's sessions is left.
- chain: the same, but each completion returns one event for a lane consumer of the
  same session (the outbox path); completions/s until the chained events are done too.
- append: single-event appends and batched appends from concurrent tasks.
- wake latency: one idle worker process; from the moment ``append()`` returned (its
  commit acknowledged) to the handler starting, with NOTIFY and polling only; and for
  delayed targets (``Target.not_before``), from the due time to the handler starting.
"""

from __future__ import annotations

import asyncio
import queue
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Protocol

from ..backends import Site
from ..models import NewEvent, Target
from ..store import Store
from .config import APPEND_TASKS, BenchConfig
from .errors import BenchFailed
from .pool import Pool
from .worker import (
    CHAIN_CONSUMER,
    DRAIN_CONSUMER,
    LANE_CONSUMER,
    PING_CONSUMER,
    WorkerSpec,
)

APPEND_SESSIONS = 64
FILL_TASKS = 4
"""Concurrent appends filling a backlog."""
DRAIN_POLL = 0.02
DRAIN_TIMEOUT = 900.0
PING_TIMEOUT = 10.0
NOTIFY_PAUSE = 0.02
"""Seconds between latency samples with NOTIFY, so each finds the worker idle."""


class Ledger(Protocol):
    """What a phase reads of its own sessions straight from the store's tables: a
    ``ledger.Ledger`` in one schema on PostgreSQL, ``a2pg.sqlite.probe.SqliteProbe``."""

    async def live_heads(self, ids: Sequence[str]) -> int: ...

    async def done(self, ids: Sequence[str], consumer: str) -> tuple[int, int]: ...

    async def lane_done(self, ids: Sequence[str], consumer: str) -> tuple[int, int]: ...

    async def events_in(self, ids: Sequence[str]) -> int: ...


@dataclass(frozen=True, slots=True)
class Where:
    """The database a phase runs in: its site (where the worker processes open their
    stores), the bench's store on it and the ledger reading its tables."""

    site: Site
    store: Store
    ledger: Ledger


@dataclass(frozen=True, slots=True)
class Check:
    """A correctness check of a phase: every head completed exactly once, and so on."""

    name: str
    ok: bool
    detail: str


@dataclass(slots=True)
class Drained:
    """What one drain measured: units (completions) per second, and its checks."""

    rate: float
    units: int
    seconds: float
    peak_rss_kb: int
    ids: list[str]
    checks: list[Check] = field(default_factory=list)


def spread(total: int, sessions: int) -> list[int]:
    """``total`` events over at most ``sessions`` sessions, as evenly as can be (sums to total)."""
    count = max(1, min(sessions, total))
    return [total // count + (1 if i < total % count else 0) for i in range(count)]


async def fill(store: Store, prefix: str, sizes: list[int], consumer: str) -> list[str]:
    """Appends ``sizes[i]`` events targeted to ``consumer`` (event cursors) to session
    ``prefix-i``; returns the session ids."""
    target = (Target(consumer),)
    gate = asyncio.Semaphore(FILL_TASKS)
    ids = [f"{prefix}-{i}" for i in range(len(sizes))]

    async def one(session_id: str, size: int) -> None:
        batch = [NewEvent("bench.job", {"n": n}, targets=target) for n in range(size)]
        async with gate:
            await store.append(session_id, batch)

    await asyncio.gather(*(one(s, size) for s, size in zip(ids, sizes, strict=True)))
    return ids


async def _until_drained(where: Where, ids: list[str], started: float) -> float:
    while await where.ledger.live_heads(ids):
        if time.perf_counter() - started > DRAIN_TIMEOUT:
            raise BenchFailed(f"a drain did not finish in {DRAIN_TIMEOUT:.0f} s")
        await asyncio.sleep(DRAIN_POLL)
    return time.perf_counter() - started


async def drain(
    where: Where,
    *,
    label: str,
    prefix: str,
    events: int,
    sessions: int,
    processes: int,
    concurrency: int,
    pool_size: int,
    chain: bool = False,
    fresh: bool = False,
) -> Drained:
    """Drains a backlog of ``events`` over ``sessions`` with ``processes`` worker processes;
    with ``chain``, each input's completion returns one lane event that must be drained too.
    ``fresh`` spawns the processes (see ``Pool``): slower to start, but their peak RSS is
    their own."""
    app, consumer = ("chain", CHAIN_CONSUMER) if chain else ("drain", DRAIN_CONSUMER)
    spec = WorkerSpec(where.site, app, concurrency, pool_size=pool_size)
    pool = Pool([spec] * processes, fresh=fresh)
    await pool.start()
    try:
        ids = await fill(where.store, prefix, spread(events, sessions), consumer)
        started = pool.release()
        elapsed = await _until_drained(where, ids, started)
    finally:
        stats = await pool.finish()
    units = 2 * events if chain else events
    completed = sum(s.get("completed", 0) for s in stats)
    done, first = await where.ledger.done(ids, consumer)
    checks = [
        Check(
            f"{label}: the workers completed each unit once",
            completed == units and len(stats) == processes,
            f"{completed:,} completions of {units:,} from {len(stats)}/{processes} processes",
        ),
        Check(
            f"{label}: every backlog head completed",
            done == events,
            f"{done:,} of {events:,}{_retried(done - first)}",
        ),
    ]
    if chain:
        lane_done, lane_first = await where.ledger.lane_done(ids, LANE_CONSUMER)
        stored = await where.ledger.events_in(ids)
        checks.append(
            Check(
                f"{label}: every chained lane event appended and completed",
                lane_done == events and stored == 2 * events,
                f"{lane_done:,} of {events:,} completed{_retried(lane_done - lane_first)}; "
                f"{stored:,} events stored",
            )
        )
    peak = max((s.get("rss_peak_kb", 0) for s in stats), default=0)
    return Drained(units / elapsed, units, elapsed, peak, ids, checks)


def _retried(count: int) -> str:
    """Heads a later attempt completed (a lease lapsed under load: not an error)."""
    return f" ({count:,} by a later attempt)" if count else ""


async def _append_rate(count: int, size: int, append: Callable[[int], Awaitable[None]]) -> float:
    """Events/s of ``count`` appends of ``size`` events from APPEND_TASKS tasks."""
    todo = iter(range(count))

    async def task() -> None:
        for i in todo:
            await append(i)

    started = time.perf_counter()
    await asyncio.gather(*(task() for _ in range(APPEND_TASKS)))
    return count * size / (time.perf_counter() - started)


async def appends(store: Store, c: BenchConfig, tag: str) -> tuple[float, float]:
    """Events/s of single-event appends, then of batched appends."""

    async def single(i: int) -> None:
        await store.append(f"bench-{tag}-single-{i % APPEND_SESSIONS}", [NewEvent("bench.one")])

    async def batched(i: int) -> None:
        events = [NewEvent("bench.many", {"n": n}) for n in range(c.batch_size)]
        await store.append(f"bench-{tag}-batch-{i % APPEND_SESSIONS}", events)

    return (
        await _append_rate(c.appends, 1, single),
        await _append_rate(c.batches, c.batch_size, batched),
    )


DELAYED_POLL = 30.0
"""The delayed phase's poll interval: far longer than its delays, so only the worker's
own due-time schedule (``Store.next_due_in``) can start the handlers on time."""


async def latency(
    where: Where, c: BenchConfig, tag: str, *, listen: bool, delay: float = 0.0
) -> list[float]:
    """Seconds from ``append()`` returning (plus ``delay``, the target's ``not_before``:
    its due time) to the handler starting, one idle worker."""
    poll = DELAYED_POLL if delay else 1.0 if listen else c.poll_interval
    spec = WorkerSpec(where.site, "ping", 1, c.pool_size, poll_interval=poll, listen=listen)
    pool = Pool([spec])
    await pool.start()
    pool.release()
    samples: list[float] = []
    rng = random.Random(tag)
    try:
        for i in range(c.latency_samples):
            # Pauses desynchronise appends from the poll cycle (polling only) and let the
            # worker go idle again (NOTIFY) so each sample measures a wake-up.
            await asyncio.sleep(rng.uniform(0, poll) if not listen else NOTIFY_PAUSE)
            later = timedelta(seconds=delay) if delay else None
            target = Target(PING_CONSUMER, not_before=later)
            event = NewEvent("bench.ping", {"i": i}, targets=(target,))
            result = await where.store.append(f"bench-{tag}-ping-{i % 8}", [event])
            committed = time.time() + delay
            while True:
                try:
                    event_id, started = await asyncio.to_thread(pool.pings.get, True, PING_TIMEOUT)
                except queue.Empty:
                    raise BenchFailed(
                        f"a ping was not handled within {PING_TIMEOUT:.0f} s"
                    ) from None
                if event_id == result.events[0].id:
                    break
            samples.append(max(0.0, started - committed))
    finally:
        await pool.finish()
    return samples
