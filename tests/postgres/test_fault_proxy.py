"""Network faults between real worker processes and PostgreSQL, through ``FaultProxy``.

Connection resets (once, and for a while: a server away), a 10 s blackhole, +200 ms
per chunk, half-open connections and a COMMIT whose reply is lost. Each test asserts
that every head is completed exactly once (result events counted by the head that
caused them), that attempts whose lease outlives the outage count no failure, that a
completion whose commit reply was lost is re-sent and replays, that the worker logs
at least once per poll interval during the fault, and that the workers resume within
two poll intervals of the fault's end (plus ``SLACK`` for a loaded 2-core machine).

The module takes about a minute. ``A2PG_SOAK=1`` adds a long variant: rounds of every
fault under a steady stream of work, for ``A2PG_SOAK_SECONDS`` (default 120) seconds.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import signal
import time
from collections.abc import AsyncIterator
from datetime import datetime

import pytest
from psycopg.conninfo import conninfo_to_dict

from a2pg.postgres import PostgresStore
from tests.postgres.fault_app import GATE_SIGNAL
from tests.postgres.fault_proxy import Direction, FaultProxy
from tests.postgres.test_faults import (
    WorkerProcess,
    Workers,
    add,
    done,
    has_done,
    opened,
    serving,
    wait_until,
    workers,
)

__all__ = ["workers"]  # the fixture, shared with test_faults

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SOAK_SECONDS = float(os.environ.get("A2PG_SOAK_SECONDS", "120"))
POLL = 0.5
TTL = 20.0
"""Longer than every outage here: a lease that outlives the outage must cost nothing."""
BLACKHOLE = 10.0
OUTAGE = 4.0
SLACK = 1.0
"""Seconds a loaded 2-core machine may add to any bound on how soon workers resume."""
RESUME = 2 * POLL + SLACK
STORE = {"poll_interval": POLL}
WORKER = {"ttl": TTL, "poll_interval": POLL, "shutdown_grace": 5.0, "cleanup_timeout": 5.0}


@pytest.fixture
async def proxy(postgres_dsn: str) -> AsyncIterator[FaultProxy]:
    parts = conninfo_to_dict(postgres_dsn)
    started = await FaultProxy(
        str(parts.get("host") or "127.0.0.1"), int(parts.get("port") or 5432)
    ).start()
    try:
        yield started
    finally:
        await started.close()


def start(
    workers: Workers, proxy: FaultProxy, dsn: str, name: str, **worker: float
) -> WorkerProcess:
    return workers.start(proxy.dsn(dsn), name, store=STORE, worker={**WORKER, **worker})


async def exactly_once(store: PostgresStore, session_id: str, indexes: list[int]) -> None:
    """Every head of ``indexes`` has one result event, and nothing else has any."""
    by_head = done(await store.read(session_id))
    counts = {index: len(events) for index, events in by_head.items()}
    assert counts == dict.fromkeys(indexes, 1)


async def resumed_within(
    store: PostgresStore, session_id: str, workers: Workers, indexes: list[int]
) -> float:
    """Seconds from now until a head appended now (added to ``indexes``) is completed."""
    started = time.monotonic()
    index = await add(store, session_id)
    indexes.append(index)
    await wait_until(
        lambda: has_done(store, session_id, index), "work after the fault", context=workers.logs
    )
    return time.monotonic() - started


async def stop_all(*procs: WorkerProcess) -> None:
    for proc in procs:
        proc.send(signal.SIGTERM)
    for proc in procs:
        assert await proc.exit_code() == 0, proc.log()


def first_attempts_only(workers: Workers) -> None:
    """No handler ran twice and none saw a failure: no lease lapsed, nothing was failed."""
    starts = workers.of("start")
    assert {(e["attempt"], e["failure_count"]) for e in starts} == {(1, 0)}, starts
    assert len({(e["session"], e["index"]) for e in starts}) == len(starts)


def longest_silence(proc: WorkerProcess, start: datetime, end: datetime) -> float:
    """The longest stretch, in seconds, with no log line from the worker's a2pg loggers
    between ``start`` and ``end`` (``fault_app`` logs ``%(asctime)s %(name)s ...``)."""
    times = [start]
    for line in proc.err.read_text(errors="replace").splitlines():
        stamp, _, rest = line.partition(" a2pg.")
        try:
            when = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f")
        except ValueError:
            continue
        if rest and start <= when <= end:
            times.append(when)
    times.append(end)
    return max((b - a).total_seconds() for a, b in itertools.pairwise(times))


async def test_connection_resets_lose_and_repeat_no_completion(
    postgres_dsn: str, proxy: FaultProxy, workers: Workers
) -> None:
    # A claim whose reply a reset loses leaves its heads claimed until the lease lapses
    # (then retried, a failure counted): a short lease keeps that wait short.
    procs = [start(workers, proxy, postgres_dsn, f"reset{n}", ttl=3.0) for n in range(2)]
    async with opened(postgres_dsn) as store:
        await wait_until(lambda: serving(store, "reset0", "reset1"), "both workers")
        indexes = [await add(store, "r")]
        await wait_until(lambda: has_done(store, "r", *indexes), "warm-up", context=workers.logs)
        for _ in range(3):
            indexes += [await add(store, "r") for _ in range(10)]
            await asyncio.sleep(0.05)  # some claimed, running or completing
            assert proxy.reset() > 0
            await asyncio.sleep(0.3)
        took = await resumed_within(store, "r", workers, indexes)
        await wait_until(lambda: has_done(store, "r", *indexes), "every head", context=workers.logs)
        await stop_all(*procs)
        await exactly_once(store, "r", indexes)
    assert took < RESUME, workers.logs()


async def test_completions_and_renewals_outlast_an_outage(
    postgres_dsn: str, proxy: FaultProxy, workers: Workers
) -> None:
    """Handlers finish while the server is away (every connection reset) for longer than
    the store's own retries: their completions are re-sent until it is back, not given up
    (a given-up completion leaves its lease to lapse: a failure and a second run)."""
    worker = start(workers, proxy, postgres_dsn, "outage", renew_interval=0.5)
    async with opened(postgres_dsn) as store:
        indexes = [await add(store, "o", gated=True) for _ in range(3)]
        await wait_until(lambda: len(workers.of("start")) == 3, "the gated handlers")
        began = datetime.now()
        proxy.refuse(OUTAGE)
        worker.send(GATE_SIGNAL)
        await wait_until(lambda: not proxy.refusing, "the end of the outage")
        ended = datetime.now()
        took = await resumed_within(store, "o", workers, indexes)
        await wait_until(lambda: has_done(store, "o", *indexes), "every head", context=workers.logs)
        await stop_all(worker)
        await exactly_once(store, "o", indexes)
    first_attempts_only(workers)
    assert longest_silence(worker, began, ended) < POLL + SLACK, worker.log()
    assert took < RESUME, worker.log()


async def test_a_blackhole_shorter_than_the_lease_costs_no_failure(
    postgres_dsn: str, proxy: FaultProxy, workers: Workers
) -> None:
    worker = start(workers, proxy, postgres_dsn, "blackholed")
    async with opened(postgres_dsn) as store:
        gated = await add(store, "b", gated=True)
        await wait_until(lambda: bool(workers.of("start")), "the gated handler")
        began = datetime.now()
        proxy.blackhole(BLACKHOLE)
        during = await add(store, "b")  # its NOTIFY is held with everything else
        await asyncio.sleep(BLACKHOLE / 2)
        worker.send(GATE_SIGNAL)  # finishes mid-outage: its completion must wait, not fail
        await wait_until(lambda: not proxy.blackholed, "the end of the blackhole")
        ended, end_clock = datetime.now(), time.monotonic()
        await wait_until(
            lambda: has_done(store, "b", gated, during), "the held work", context=workers.logs
        )
        took = time.monotonic() - end_clock
        indexes = [gated, during]
        later = await resumed_within(store, "b", workers, indexes)
        await stop_all(worker)
        await exactly_once(store, "b", indexes)
    first_attempts_only(workers)
    assert took < RESUME and later < RESUME, worker.log()
    assert longest_silence(worker, began, ended) < POLL + SLACK, worker.log()


async def test_200ms_per_chunk_slows_but_loses_nothing(
    postgres_dsn: str, proxy: FaultProxy, workers: Workers
) -> None:
    proxy.latency = 0.2
    worker = start(workers, proxy, postgres_dsn, "slowed")
    async with opened(postgres_dsn) as store:
        indexes = [await add(store, "l") for _ in range(12)]
        await wait_until(
            lambda: has_done(store, "l", *indexes), "every head", within=60.0,
            context=workers.logs,
        )  # fmt: skip
        proxy.latency = 0.0
        took = await resumed_within(store, "l", workers, indexes)
        await stop_all(worker)
        await exactly_once(store, "l", indexes)
    first_attempts_only(workers)
    assert took < RESUME, worker.log()


@pytest.mark.parametrize("direction", ["s2c", "c2s"])
async def test_half_open_connections_are_given_up_and_nothing_is_lost(
    postgres_dsn: str, proxy: FaultProxy, workers: Workers, direction: Direction
) -> None:
    """Handlers finish while every connection silently drops one direction: their
    completions (and renewals) wait, the worker says so every poll interval, and once the
    dead connections are closed everything is completed once, with no failure."""
    worker = start(workers, proxy, postgres_dsn, f"half-{direction}")
    async with opened(postgres_dsn) as store:
        indexes = [await add(store, "h", gated=True) for _ in range(3)]
        await wait_until(lambda: len(workers.of("start")) == 3, "the gated handlers")
        began = datetime.now()
        assert proxy.half_open(direction) > 0
        worker.send(GATE_SIGNAL)
        await asyncio.sleep(3.0)
        ended = datetime.now()
        proxy.heal()
        took = await resumed_within(store, "h", workers, indexes)
        await wait_until(lambda: has_done(store, "h", *indexes), "every head", context=workers.logs)
        await stop_all(worker)
        await exactly_once(store, "h", indexes)
    first_attempts_only(workers)
    assert longest_silence(worker, began, ended) < POLL + SLACK, worker.log()
    assert took < RESUME, worker.log()


async def test_a_completion_whose_commit_reply_is_lost_replays(
    postgres_dsn: str, proxy: FaultProxy, workers: Workers
) -> None:
    worker = start(workers, proxy, postgres_dsn, "cut")
    async with opened(postgres_dsn) as store:
        warm = await add(store, "c")
        await wait_until(lambda: has_done(store, "c", warm), "warm-up", context=workers.logs)
        proxy.cut_after_commit()
        index = await add(store, "c")
        await wait_until(lambda: proxy.cuts == 1, "the cut commit", context=workers.logs)
        await wait_until(lambda: has_done(store, "c", index), "the head", context=workers.logs)
        indexes = [warm, index]
        took = await resumed_within(store, "c", workers, indexes)
        await stop_all(worker)
        await exactly_once(store, "c", indexes)
    first_attempts_only(workers)  # the completion was re-sent: the handler did not run again
    assert [e["index"] for e in workers.of("finish")] == indexes
    assert worker.stats()["completed"] == 3
    assert took < RESUME, worker.log()


@pytest.mark.soak
async def test_soak_every_fault_under_a_stream_of_work(
    postgres_dsn: str, proxy: FaultProxy, workers: Workers
) -> None:
    procs = [start(workers, proxy, postgres_dsn, f"soak{n}") for n in range(3)]
    rng = random.Random(7)
    async with opened(postgres_dsn) as store:
        await wait_until(lambda: serving(store, "soak0", "soak1", "soak2"), "every worker")
        indexes: list[int] = []
        deadline = time.monotonic() + SOAK_SECONDS
        while time.monotonic() < deadline:
            indexes += [await add(store, "s") for _ in range(rng.randint(5, 30))]
            fault = rng.choice(["reset", "refuse", "blackhole", "latency", "half", "cut", "none"])
            direction: Direction = rng.choice(["s2c", "c2s"])
            if fault == "reset":
                proxy.reset()
            elif fault == "refuse":
                proxy.refuse(rng.uniform(0.5, OUTAGE))
            elif fault == "blackhole":
                proxy.blackhole(rng.uniform(1.0, BLACKHOLE))
            elif fault == "latency":
                proxy.latency = rng.choice([0.0, 0.05, 0.2])
            elif fault == "half":
                proxy.half_open(direction)
                await asyncio.sleep(rng.uniform(0.5, 3.0))
                proxy.heal()
            elif fault == "cut":
                proxy.cut_after_commit()
            await asyncio.sleep(rng.uniform(0.2, 2.0))
        proxy.latency = 0.0
        await wait_until(lambda: not proxy.blackholed, "the blackhole's end", within=BLACKHOLE + 1)
        await wait_until(
            lambda: has_done(store, "s", *indexes), "every head", within=120.0,
            context=workers.logs,
        )  # fmt: skip
        await stop_all(*procs)
        await exactly_once(store, "s", indexes)
