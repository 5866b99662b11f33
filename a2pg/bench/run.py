"""``a2pg bench``: end-to-end drain rate, append rates and wake latency, as medians of several runs.

- drain: a backlog of targeted events is appended first, then P worker processes
  (already connected and started) are released; events/s until no head is left.
- append: single-event appends and batched appends from concurrent tasks.
- wake latency: one idle worker process; from the moment ``append()`` returned
  (its commit acknowledged) to the handler starting, with NOTIFY and polling only.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import queue
import random
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from ..models import NewEvent, Target
from ..postgres.connect import open_store
from ..postgres.probe import Probe
from ..store import Store
from .config import BenchConfig
from .worker import DRAIN_CONSUMER, PING_CONSUMER, WorkerSpec, worker_process

APPEND_TASKS = 4
"""Concurrent appenders for the append measurements (each on its own sessions)."""
APPEND_SESSIONS = 64
DRAIN_POLL = 0.02
STARTUP_TIMEOUT = 60.0
DRAIN_TIMEOUT = 600.0
PING_TIMEOUT = 10.0
NOTIFY_PAUSE = 0.02
"""Seconds between latency samples with NOTIFY, so each finds the worker idle."""


class BenchFailed(RuntimeError):
    """A measurement could not finish (workers did not start, the drain stalled)."""


@dataclass(slots=True)
class Series:
    """One measurement's value per run; reported as the median."""

    name: str
    unit: str
    runs: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.runs) if self.runs else 0.0


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ranked = sorted(values)
    rank = max(1, min(len(ranked), math.ceil(q / 100 * len(ranked))))
    return ranked[rank - 1]


class Pool:
    """Bench worker processes (spawned, so nothing of the parent's event loop leaks in)."""

    def __init__(self, specs: list[WorkerSpec]) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.ready = [ctx.Event() for _ in specs]
        self.go = ctx.Event()
        self.stop = ctx.Event()
        self.results: Any = ctx.Queue()
        self.pings: Any = ctx.Queue()
        self.procs = [
            ctx.Process(
                target=worker_process,
                args=(spec, ready, self.go, self.stop, self.results, self.pings),
                name=f"a2pg-bench-{n}",
                daemon=True,
            )
            for n, (spec, ready) in enumerate(zip(specs, self.ready, strict=True))
        ]

    async def start(self) -> None:
        for proc in self.procs:
            proc.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not all(event.is_set() for event in self.ready):
            if any(not p.is_alive() for p in self.procs) or time.monotonic() > deadline:
                raise BenchFailed("bench worker processes did not start (see their errors above)")
            await asyncio.sleep(0.02)

    async def finish(self) -> list[dict[str, int]]:
        """Stops the workers and collects their stats."""
        self.go.set()
        self.stop.set()
        stats: list[dict[str, int]] = []
        for _ in self.procs:
            try:
                stats.append(await asyncio.to_thread(self.results.get, True, 30.0))
            except queue.Empty:
                break
        for proc in self.procs:
            await asyncio.to_thread(proc.join, 10.0)
            if proc.is_alive():
                proc.kill()
        return stats


async def measure_drain(
    store: Store, probe: Probe, dsn: str, schema: str | None, c: BenchConfig, tag: str
) -> tuple[float, int]:
    """Events/s for P processes draining a backlog of ``events`` event-cursor heads."""
    per_session = max(1, c.events // c.sessions)
    total = per_session * c.sessions
    spec = WorkerSpec(dsn, schema, "drain", c.concurrency)
    pool = Pool([spec] * c.workers)
    await pool.start()
    try:
        target = (Target(DRAIN_CONSUMER),)
        gate = asyncio.Semaphore(APPEND_TASKS)

        async def fill(i: int) -> None:
            batch = [NewEvent("bench.job", {"n": n}, targets=target) for n in range(per_session)]
            async with gate:
                await store.append(f"bench-{tag}-drain-{i}", batch)

        await asyncio.gather(*(fill(i) for i in range(c.sessions)))
        started = time.perf_counter()
        pool.go.set()
        while (await probe.counts()).live:
            if time.perf_counter() - started > DRAIN_TIMEOUT:
                raise BenchFailed(f"the drain did not finish in {DRAIN_TIMEOUT:.0f} s")
            await asyncio.sleep(DRAIN_POLL)
        elapsed = time.perf_counter() - started
    finally:
        stats = await pool.finish()
    completed = sum(s.get("completed", 0) for s in stats)
    return total / elapsed, completed - total


async def _append_rate(count: int, size: int, append: Callable[[int], Awaitable[None]]) -> float:
    """Events/s of ``count`` appends of ``size`` events from APPEND_TASKS tasks."""
    todo = iter(range(count))

    async def task() -> None:
        for i in todo:
            await append(i)

    started = time.perf_counter()
    await asyncio.gather(*(task() for _ in range(APPEND_TASKS)))
    return count * size / (time.perf_counter() - started)


async def measure_appends(store: Store, c: BenchConfig, tag: str) -> tuple[float, float]:
    async def single(i: int) -> None:
        await store.append(f"bench-{tag}-single-{i % APPEND_SESSIONS}", [NewEvent("bench.one")])

    async def batched(i: int) -> None:
        events = [NewEvent("bench.many", {"n": n}) for n in range(c.batch_size)]
        await store.append(f"bench-{tag}-batch-{i % APPEND_SESSIONS}", events)

    return (
        await _append_rate(c.appends, 1, single),
        await _append_rate(c.batches, c.batch_size, batched),
    )


async def measure_latency(
    store: Store, dsn: str, schema: str | None, c: BenchConfig, tag: str, *, listen: bool
) -> list[float]:
    """Seconds from ``append()`` returning to the handler starting, one idle worker."""
    poll = 1.0 if listen else c.poll_interval
    pool = Pool([WorkerSpec(dsn, schema, "ping", 1, poll_interval=poll, listen=listen)])
    await pool.start()
    pool.go.set()
    samples: list[float] = []
    rng = random.Random(tag)
    try:
        for i in range(c.latency_samples):
            # Pauses desynchronise appends from the poll cycle (polling only) and let the
            # worker go idle again (NOTIFY) so each sample measures a wake-up.
            await asyncio.sleep(rng.uniform(0, poll) if not listen else NOTIFY_PAUSE)
            event = NewEvent("bench.ping", {"i": i}, targets=(Target(PING_CONSUMER),))
            result = await store.append(f"bench-{tag}-ping-{i % 8}", [event])
            committed = time.time()
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


async def run_bench(dsn: str, schema: str | None, c: BenchConfig, log: TextIO) -> dict[str, Any]:
    from ..postgres.layout import DEFAULT_SCHEMA
    from ..postgres.migrate import upgrade

    await asyncio.to_thread(upgrade, dsn, schema or DEFAULT_SCHEMA)
    series = {
        "drain": Series(f"end-to-end drain, {c.workers} worker processes", "events/s"),
        "append_single": Series(f"append, single events ({APPEND_TASKS} tasks)", "events/s"),
        "append_batched": Series(f"append, batches of {c.batch_size}", "events/s"),
        "wake_notify_p50": Series("wake latency with NOTIFY, p50", "ms"),
        "wake_notify_p99": Series("wake latency with NOTIFY, p99", "ms"),
        "wake_poll_p50": Series(f"wake latency polling every {c.poll_interval}s, p50", "ms"),
        "wake_poll_p99": Series(f"wake latency polling every {c.poll_interval}s, p99", "ms"),
    }
    extra_completions = 0
    async with open_store(dsn, schema) as store:
        probe = await Probe.connect(dsn, schema or DEFAULT_SCHEMA)
        server = await probe.server_version()
        try:
            for run in range(1, c.runs + 1):
                tag = f"{uuid.uuid4().hex[:6]}-{run}"
                log.write(f"run {run}/{c.runs}: drain...")
                log.flush()
                rate, extra = await measure_drain(store, probe, dsn, schema, c, tag)
                series["drain"].runs.append(rate)
                extra_completions += extra
                log.write(" appends...")
                log.flush()
                single, batched = await measure_appends(store, c, tag)
                series["append_single"].runs.append(single)
                series["append_batched"].runs.append(batched)
                for listen, key in ((True, "notify"), (False, "poll")):
                    log.write(f" latency ({key})...")
                    log.flush()
                    lat = await measure_latency(store, dsn, schema, c, tag, listen=listen)
                    series[f"wake_{key}_p50"].runs.append(percentile(lat, 50) * 1000)
                    series[f"wake_{key}_p99"].runs.append(percentile(lat, 99) * 1000)
                log.write(" done\n")
        finally:
            await probe.close()
    return {
        "server": server,
        "config": asdict(c),
        "extra_completions": extra_completions,
        "results": {
            key: {"name": s.name, "unit": s.unit, "median": s.median, "runs": s.runs}
            for key, s in series.items()
        },
    }
