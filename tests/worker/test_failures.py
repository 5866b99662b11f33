"""Handler exceptions: fail with backoff, retry, succeed; max_failures dead-letters; bad returns."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from a2pg import Head, NewEvent, Target
from a2pg.backoff import Backoff
from a2pg.ids import FakeClock
from a2pg.store import Store
from a2pg.worker import App, Worker

from .helpers import bounded, work

EXACT = Backoff(base=10.0, cap=100.0, jitter=0.0)


async def test_a_failure_backs_off_then_retries_until_success(
    store: Store, clock: FakeClock
) -> None:
    app = App()
    calls: list[tuple[int, int]] = []

    @app.consumer("w")
    def flaky(head: Head) -> list[NewEvent]:
        calls.append((head.attempt, head.failure_count))
        if head.failure_count < 2:
            raise RuntimeError(f"boom {head.attempt}")
        return [NewEvent("ok")]

    await store.append("s", [work(1)])
    worker = Worker(store, app, max_failures=5, backoff=EXACT)
    await bounded(worker.run_until_idle())
    [cursor] = await store.cursors("s")
    assert cursor.dispatch.failure_count == 1
    assert "RuntimeError: boom 1" in (cursor.dispatch.last_error or "")
    assert cursor.dispatch.claim_expires_at == clock() + timedelta(seconds=10)

    clock.advance(9.0)  # still backing off
    await bounded(worker.run_until_idle())
    assert len(calls) == 1

    clock.advance(1.0)
    await bounded(worker.run_until_idle())  # second failure: 20 s this time
    [cursor] = await store.cursors("s")
    assert cursor.dispatch.claim_expires_at == clock() + timedelta(seconds=20)

    clock.advance(20.0)
    await bounded(worker.run_until_idle())
    assert calls == [(1, 0), (2, 1), (3, 2)]
    assert (worker.stats.failed, worker.stats.completed) == (2, 1)
    assert [e.type for e in await store.read("s")] == ["job", "ok"]


async def test_max_failures_dead_letters_the_head(store: Store, clock: FakeClock) -> None:
    app = App()

    @app.consumer("w")
    async def broken(head: Head) -> None:
        raise ValueError("never works")

    await store.append("s", [work(1)])
    worker = Worker(store, app, max_failures=3, backoff=EXACT)
    for _ in range(4):
        await bounded(worker.run_until_idle())
        clock.advance(100.0)
    assert (worker.stats.failed, worker.stats.dead_lettered) == (2, 1)
    [dead] = await store.dead_letters("s")
    assert dead.index == 1 and dead.failure_count == 3
    assert "ValueError: never works" in (dead.dispatch.last_error or "")
    assert worker.stats.claimed == 3


async def test_a_lapsed_lease_counts_toward_max_failures(memory: Store, clock: FakeClock) -> None:
    await memory.append("s", [work(1)])
    await memory.claim_any(holder="crashed", ttl=5.0, limit=10)
    clock.advance(6.0)
    worker = Worker(memory, App({"w": lambda head: None}), max_failures=1)
    await bounded(worker.run_until_idle())
    assert worker.stats.dead_lettered == 1 and worker.stats.claimed == 0
    assert len(await memory.dead_letters("s")) == 1


async def test_a_handler_returning_garbage_fails_its_attempt(memory: Store) -> None:
    app = App()

    @app.consumer("w")  # type: ignore[arg-type]
    async def wrong(head: Head) -> object:
        return {"type": "not an event"}

    await memory.append("s", [work(1)])
    worker = Worker(memory, app, backoff=EXACT)
    await bounded(worker.run_until_idle())
    [cursor] = await memory.cursors("s")
    assert "TypeError" in (cursor.dispatch.last_error or "")
    assert worker.stats.failed == 1


async def test_an_invalid_returned_event_fails_only_its_attempt(memory: Store) -> None:
    app = App()

    @app.consumer("w")
    async def handle(head: Head) -> list[NewEvent]:
        if head.event.payload["n"] == 2:
            return [NewEvent("bad", {"nul": "\x00"})]
        return [NewEvent("good")]

    await memory.append("s", [work(n) for n in range(4)])
    worker = Worker(memory, app, backoff=EXACT)
    await bounded(worker.run_until_idle())
    assert (worker.stats.completed, worker.stats.failed) == (3, 1)
    assert [e.type for e in await memory.read("s", after=4)] == ["good"] * 3
    [failed] = [c for c in await memory.cursors("s") if c.dispatch.failure_count]
    assert failed.head == 3
    assert "completion refused: INVALID_ARGUMENT" in (failed.dispatch.last_error or "")


async def test_a_completion_the_store_refuses_fails_only_its_attempt(store: Store) -> None:
    app = App()

    @app.consumer("w")
    async def handle(head: Head) -> list[NewEvent]:
        if head.event.payload["n"] == 3:
            return [NewEvent("clash", id="taken")]  # already used in this session
        return [NewEvent("done")]

    await store.append("s", [NewEvent("seed", id="taken")])
    await store.append("s", [work(n) for n in range(8)])
    worker = Worker(store, app, concurrency=8, backoff=EXACT)
    await bounded(worker.run_until_idle())
    assert (worker.stats.completed, worker.stats.failed) == (7, 1)
    failed = [c for c in await store.cursors("s") if c.dispatch.failure_count]
    assert [c.head for c in failed] == [5]
    assert "PARTIAL_DUPLICATE_BATCH" in (failed[0].dispatch.last_error or "")


async def test_events_targeting_a_registered_log_consumer_are_refused(memory: Store) -> None:
    from a2pg import Consumer, LogSpec

    await memory.register_consumers([Consumer("audit", LogSpec())])
    app = App()

    @app.consumer("w")
    async def handle(head: Head) -> list[NewEvent]:
        return [NewEvent("x", targets=[Target("audit")])]

    await memory.append("s", [work(1)])
    worker = Worker(memory, app, backoff=EXACT)
    await bounded(worker.run_until_idle())
    [cursor] = [c for c in await memory.cursors("s") if c.consumer == "w"]
    assert "INVALID_ARGUMENT" in (cursor.dispatch.last_error or "")


async def test_a_handler_raising_cancelled_error_itself_fails(store: Store) -> None:
    app = App()

    @app.consumer("w")
    async def gives_up(head: Head) -> None:
        raise asyncio.CancelledError()

    await store.append("s", [work(1)])
    worker = Worker(store, app, backoff=EXACT)
    await bounded(worker.run_until_idle())
    assert (worker.stats.failed, worker.stats.released) == (1, 0)
    [cursor] = await store.cursors("s")
    assert cursor.dispatch.failure_count == 1
    assert "CancelledError" in (cursor.dispatch.last_error or "")
