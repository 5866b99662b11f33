"""Leases: renewal keeps them; a superseded attempt is cancelled and its result discarded."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

from a2pg import Completed, Head, NewEvent
from a2pg.ids import FakeClock
from a2pg.store import Store
from a2pg.worker import App, Worker

from .helpers import RecordingStore, bounded, until, work

TTL = 30.0


class Blocking:
    """A handler that waits for ``gate`` and remembers whether it was cancelled."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.started: list[Head] = []
        self.cancelled: list[int] = []

    async def __call__(self, head: Head) -> list[NewEvent]:
        self.started.append(head)
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled.append(head.index)
            raise
        return [NewEvent("late")]


async def test_renewal_extends_the_lease(store: Store, clock: FakeClock) -> None:
    handler = Blocking()
    async with Worker(store, App({"w": handler}), ttl=TTL) as worker:
        await store.append("s", [work(1)])
        await until(lambda: len(handler.started) == 1)
        clock.advance(TTL * 0.6)
        await worker.renew_leases(force=True)
        [cursor] = await store.cursors("s")
        assert cursor.dispatch.claim_expires_at == clock() + timedelta(seconds=TTL)
        clock.advance(TTL * 0.6)  # past the first lease: still ours
        assert await store.claim_any(holder="thief", ttl=TTL) == []
        handler.gate.set()
        await bounded(worker.wait_idle())
    assert worker.stats.completed == 1 and handler.cancelled == []


async def test_clearing_the_session_supersedes_the_attempt(store: Store) -> None:
    handler = Blocking()
    async with Worker(store, App({"w": handler})) as worker:
        await store.append("s", [work(1)])
        await until(lambda: len(handler.started) == 1)
        await store.clear("s")
        await worker.renew_leases(force=True)
        await until(lambda: worker.stats.superseded == 1)
    assert handler.cancelled == [1]
    assert "late" not in [e.type for e in await store.read("s")]
    assert worker.stats.completed == 0


async def test_a_lease_taken_over_after_lapsing_cancels_the_handler(
    store: Store, clock: FakeClock
) -> None:
    handler = Blocking()
    # One slot, held by the blocked handler: the worker cannot re-claim the lapsed head
    # itself while the thief's claim waits for a backend's thread (SQLite's writer).
    async with Worker(store, App({"w": handler}), ttl=TTL, concurrency=1) as worker:
        await store.append("s", [work(1)])
        await until(lambda: len(handler.started) == 1)
        clock.advance(TTL + 1)
        [stolen] = await store.claim_any(holder="thief", ttl=TTL)
        assert stolen.attempt == 2
        await worker.renew_leases(force=True)
        await until(lambda: worker.stats.superseded == 1)
        assert handler.cancelled == [1]
        done = await store.complete_attempt(
            "s", consumer="w", lane=None, index=1, attempt=2, events=[NewEvent("thief", id="t")]
        )
        assert isinstance(done, Completed)
    assert [e.type for e in await store.read("s")] == ["job", "thief"]


async def test_a_result_that_arrives_after_a_takeover_is_discarded(
    store: Store, clock: FakeClock
) -> None:
    handler = Blocking()
    # One slot, held by the blocked handler: the worker cannot re-claim the lapsed head
    # itself (a second wakeup of the append, from LISTEN, may come after the advance)
    # before the thief does; it did once in CI, and then completed attempt 2 with 'late'.
    async with Worker(store, App({"w": handler}), ttl=TTL, concurrency=1) as worker:
        await store.append("s", [work(1)])
        await until(lambda: len(handler.started) == 1)
        clock.advance(TTL + 1)
        [stolen] = await store.claim_any(holder="thief", ttl=TTL)
        assert stolen.attempt == 2
        handler.gate.set()  # finishes before any renewal noticed
        await until(lambda: worker.stats.superseded == 1)
    assert [e.type for e in await store.read("s")] == ["job"]
    assert worker.stats.completed == 0


async def test_the_renewer_runs_in_the_background(memory: Store) -> None:
    proxy = RecordingStore(memory)
    handler = Blocking()
    worker = Worker(proxy.as_store(), App({"w": handler}), ttl=TTL, renew_interval=0.005)
    async with worker:
        await memory.append("s", [work(1)])
        await until(lambda: len(handler.started) == 1)
        await until(lambda: len(proxy.renewals) >= 2)
        handler.gate.set()
        await bounded(worker.wait_idle())
    assert set(proxy.renewals) == {("s", 1)}


async def test_own_stale_attempt_is_superseded_by_its_reclaim(
    memory: Store, clock: FakeClock
) -> None:
    handler = Blocking()
    worker = Worker(memory, App({"w": handler}), ttl=TTL, concurrency=2, poll_interval=0.005)
    async with worker:
        await memory.append("s", [work(1)])
        await until(lambda: len(handler.started) == 1)
        clock.advance(TTL + 1)  # our own lease lapsed; the next poll claims the head again
        await until(lambda: len(handler.started) == 2)
        assert handler.started[1].attempt == 2
        # The re-claim superseded attempt 1 at once, and started once its handler ended:
        # never both at once (no renewal pass was needed to notice).
        assert handler.cancelled == [1]
        handler.gate.set()
        await until(lambda: worker.stats.completed == 1)
    assert worker.stats.superseded == 1
    assert [e.type for e in await memory.read("s")] == ["job", "late"]


async def test_a_superseded_sync_handler_has_its_result_discarded(memory: Store) -> None:
    release = threading.Event()
    started = threading.Event()

    def slow(head: Head) -> list[NewEvent]:
        started.set()
        release.wait(5)
        return [NewEvent("late")]

    async with Worker(memory, App({"w": slow})) as worker:
        await memory.append("s", [work(1)])
        await until(started.is_set)
        await memory.clear("s")
        await worker.renew_leases(force=True)
        await asyncio.sleep(0.05)
        # The thread cannot be interrupted: its attempt holds its slot until it returns.
        assert (worker.in_flight, worker.stats.superseded) == (1, 0)
        release.set()  # what it returns is dropped
        await until(lambda: worker.stats.superseded == 1)
        await bounded(worker.wait_idle())
    assert "late" not in [e.type for e in await memory.read("s")]
    assert worker.stats.completed == 0
