"""The fence a worker keeps: a claim is never handed back while a handler of its head still
runs, attempts are bounded by their timeout, and a head runs one handler at a time.

A sync handler's thread cannot be stopped: a shutdown leaves it running with its claim
kept (``HandlersStillRunning``; the lease lapses as after a crash), a timeout fails its
attempt only once the thread returns, and a head claimed again while it runs waits for it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from collections.abc import Iterator

import pytest

from a2pg import A2Error, Consumer, Head, NewEvent, Target
from a2pg.ids import FakeClock
from a2pg.memory import MemoryStore
from a2pg.store import Store
from a2pg.worker import App, AttemptTimeout, HandlersStillRunning, Worker, WorkerSettings

from .helpers import TIMEOUT, RecordingStore, bounded, until, work

TTL = 30.0
QUICK = 0.05
"""A grace, or a timeout, short enough to keep these tests fast."""


class Stubborn:
    """A sync handler whose first attempt of each head blocks its thread until ``let_go``,
    whatever the worker does; later attempts return at once. Counts handlers running."""

    def __init__(self) -> None:
        self.let_go = threading.Event()
        self.started: list[int] = []
        self.most_at_once = 0
        self._running = 0
        self._lock = threading.Lock()

    def __call__(self, head: Head) -> list[NewEvent]:
        with self._lock:
            self._running += 1
            self.most_at_once = max(self.most_at_once, self._running)
            self.started.append(head.attempt)
        try:
            if head.attempt == 1:
                self.let_go.wait(TIMEOUT)
            return [NewEvent("done", {"attempt": head.attempt})]
        finally:
            with self._lock:
                self._running -= 1


@pytest.fixture
def stubborn() -> Iterator[Stubborn]:
    handler = Stubborn()
    yield handler
    handler.let_go.set()  # no thread outlives its test


async def done_by(store: Store, session_id: str) -> list[int]:
    """The attempts whose ``done`` event was appended."""
    return [e.payload["attempt"] for e in await store.read(session_id) if e.type == "done"]


# ------------------------------------------------------------------ shutdown


@pytest.mark.parametrize("force", [False, True], ids=["grace", "forced"])
async def test_a_sync_handler_running_past_the_grace_keeps_its_claim(
    store: Store, clock: FakeClock, stubborn: Stubborn, force: bool
) -> None:
    proxy = RecordingStore(store)
    worker = Worker(proxy.as_store(), App({"w": stubborn}), ttl=TTL, shutdown_grace=QUICK)
    await store.append("s", [work(1)])
    running = asyncio.create_task(worker.run())
    await until(lambda: stubborn.started == [1])
    worker.stop(force=force)
    with pytest.raises(HandlersStillRunning) as left:
        await bounded(running, within=5.0)  # the thread is not waited for
    assert left.value.attempts == ("s:w@1#1",)
    assert [h.index for h in left.value.heads] == [1]
    assert proxy.releases == [] and worker.stats.released == 0
    [cursor] = await store.cursors("s")
    assert cursor.dispatch.claim_holder == worker.holder  # held while the thread runs
    assert await store.claim_any(holder="next", ttl=TTL) == []
    stubborn.let_go.set()
    clock.advance(TTL + 1)  # the lease lapses, as after a crash: one failure counted
    [head] = await store.claim_any(holder="next", ttl=TTL)
    assert (head.attempt, head.failure_count) == (2, 1)
    assert await done_by(store, "s") == []  # what the abandoned thread returned is dropped


async def test_async_handlers_beside_it_are_released_as_before(
    memory: Store, stubborn: Stubborn
) -> None:
    gate = asyncio.Event()

    async def waits(head: Head) -> None:
        await gate.wait()

    app = App({"w": stubborn, "a": waits})
    proxy = RecordingStore(memory)
    worker = Worker(proxy.as_store(), app, shutdown_grace=QUICK)
    await memory.append("s", [work(1)])
    await memory.append("t", [NewEvent("go", targets=[Target("a")])])
    running = asyncio.create_task(worker.run())
    await until(lambda: stubborn.started == [1] and worker.in_flight == 2)
    worker.stop()
    with pytest.raises(HandlersStillRunning) as left:
        await bounded(running, within=5.0)
    assert left.value.attempts == ("s:w@1#1",)
    assert proxy.releases == [("t", 1)] and worker.stats.released == 1
    [head] = await memory.claim_any(holder="next", ttl=TTL, consumers=[Consumer("a")])
    assert (head.session_id, head.attempt, head.failure_count) == ("t", 2, 0)


async def test_a_failing_block_keeps_its_own_error(memory: Store, stubborn: Stubborn) -> None:
    worker = Worker(memory, App({"w": stubborn}), shutdown_grace=60.0)
    await memory.append("s", [work(1)])

    async def block() -> None:
        async with worker:
            await until(lambda: stubborn.started == [1])
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await bounded(block(), within=5.0)
    [cursor] = await memory.cursors("s")
    assert cursor.dispatch.claim_holder == worker.holder


async def test_the_next_run_does_not_run_a_head_beside_the_thread_left_running(
    memory: Store, clock: FakeClock, stubborn: Stubborn
) -> None:
    worker = Worker(
        memory, App({"w": stubborn}), ttl=TTL, shutdown_grace=QUICK, poll_interval=0.005
    )
    await memory.append("s", [work(1)])
    first = asyncio.create_task(worker.run())
    await until(lambda: stubborn.started == [1])
    worker.stop()
    with pytest.raises(HandlersStillRunning):
        await bounded(first, within=5.0)
    clock.advance(TTL + 1)  # its lease lapsed; the thread still runs
    second = asyncio.create_task(worker.run())
    try:
        await until(lambda: worker.stats.claimed == 2)
        await asyncio.sleep(QUICK)
        assert stubborn.started == [1]  # attempt 2 waits for attempt 1's thread
        stubborn.let_go.set()
        await until(lambda: worker.stats.completed == 1)
    finally:
        worker.stop(force=True)
        await bounded(second)
    assert stubborn.started == [1, 2] and stubborn.most_at_once == 1
    assert await done_by(memory, "s") == [2]


# ------------------------------------------------------------------ one head, one handler


async def test_a_head_claimed_again_waits_for_the_thread_of_its_earlier_attempt(
    store: Store, clock: FakeClock, stubborn: Stubborn, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="a2pg.worker")
    worker = Worker(store, App({"w": stubborn}), ttl=TTL, concurrency=2, poll_interval=0.005)
    async with worker:
        await store.append("s", [work(1)])
        await until(lambda: stubborn.started == [1])
        clock.advance(TTL + 1)  # our own lease lapsed; the next poll claims the head again
        await until(lambda: worker.stats.claimed == 2)
        await asyncio.sleep(QUICK)
        assert stubborn.started == [1]  # not beside the thread still running attempt 1
        assert "s:w@1#2 claimed while s:w@1#1 still runs here" in caplog.text
        stubborn.let_go.set()
        await until(lambda: worker.stats.completed == 1)
        await bounded(worker.wait_idle())
    assert stubborn.started == [1, 2] and stubborn.most_at_once == 1
    assert worker.stats.superseded == 1  # attempt 1's result, dropped
    assert await done_by(store, "s") == [2]


async def test_a_head_claimed_again_waits_for_an_async_handler_that_ignores_its_cancel(
    memory: Store, clock: FakeClock
) -> None:
    gate = asyncio.Event()
    started: list[int] = []
    ended: list[int] = []

    async def handler(head: Head) -> list[NewEvent]:
        started.append(head.attempt)
        if head.attempt == 1:
            try:
                await gate.wait()
            except asyncio.CancelledError:
                await gate.wait()  # ignores being cut short, and goes on
        ended.append(head.attempt)
        return [NewEvent("done", {"attempt": head.attempt})]

    worker = Worker(memory, App({"w": handler}), ttl=TTL, concurrency=2, poll_interval=0.005)
    async with worker:
        await memory.append("s", [work(1)])
        await until(lambda: started == [1])
        clock.advance(TTL + 1)
        await until(lambda: worker.stats.claimed == 2)
        await asyncio.sleep(QUICK)
        assert started == [1]
        gate.set()
        await until(lambda: worker.stats.completed == 1)
    assert (started, ended) == ([1, 2], [1, 2])
    assert await done_by(memory, "s") == [2]


async def test_a_shutdown_releases_neither_attempt_of_a_head_whose_thread_runs(
    memory: Store, clock: FakeClock, stubborn: Stubborn
) -> None:
    proxy = RecordingStore(memory)
    worker = Worker(
        proxy.as_store(), App({"w": stubborn}), ttl=TTL, concurrency=2, poll_interval=0.005
    )
    await memory.append("s", [work(1)])
    running = asyncio.create_task(worker.run())
    await until(lambda: stubborn.started == [1])
    clock.advance(TTL + 1)
    await until(lambda: worker.stats.claimed == 2)  # attempt 2 waits for attempt 1's thread
    worker.stop(force=True)
    with pytest.raises(HandlersStillRunning) as left:
        await bounded(running, within=5.0)
    assert sorted(left.value.attempts) == ["s:w@1#1", "s:w@1#2"]
    assert proxy.releases == []  # attempt 2's claim is kept too: the head is still running
    [cursor] = await memory.cursors("s")
    assert (cursor.dispatch.claim_holder, cursor.dispatch.attempt_count) == (worker.holder, 2)
    clock.advance(TTL + 1)  # both leases lapse; attempt 1's thread still runs
    again = asyncio.create_task(worker.run())
    try:
        await until(lambda: worker.stats.claimed == 3)
        await asyncio.sleep(QUICK)
        assert stubborn.started == [1]  # attempt 3 waits for the thread too
        stubborn.let_go.set()
        await until(lambda: worker.stats.completed == 1)
    finally:
        worker.stop(force=True)
        await bounded(again)
    assert stubborn.started == [1, 3] and stubborn.most_at_once == 1
    assert await done_by(memory, "s") == [3]


# ------------------------------------------------------------------ timeouts


async def test_an_async_handler_past_its_timeout_is_cancelled_and_fails(
    store: Store, clock: FakeClock
) -> None:
    cancelled: list[int] = []
    app = App()

    @app.consumer("w", timeout=QUICK)
    async def hangs(head: Head) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(head.attempt)
            raise

    proxy = RecordingStore(store)
    worker = Worker(proxy.as_store(), app, max_failures=2)
    await store.append("s", [work(1)])
    await bounded(worker.run_until_idle())
    assert cancelled == [1] and proxy.failed_attempts == [("s", 1)]
    assert (worker.stats.timed_out, worker.stats.failed) == (1, 1)
    [cursor] = await store.cursors("s")
    assert cursor.dispatch.failure_count == 1
    error = cursor.dispatch.last_error or ""
    assert "AttemptTimeout: s:w@1#1: the handler of consumer 'w' ran past its 0.05s timeout" in (
        error
    )
    assert "and was cancelled" in error
    assert "in hangs" in error  # where it was when cancelled
    clock.advance(400.0)  # past the backoff: it counts toward max_failures like any failure
    await bounded(worker.run_until_idle())
    assert (worker.stats.timed_out, worker.stats.dead_lettered) == (2, 1)
    [dead] = await store.dead_letters("s")
    assert dead.dispatch.failure_count == 2


async def test_a_handler_that_swallows_its_timeouts_cancel_still_fails(
    memory: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="a2pg.worker")
    cancels: list[int] = []

    async def stubborn(head: Head) -> list[NewEvent]:
        while len(cancels) < 2:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancels.append(head.attempt)  # ignored: it goes on
        return [NewEvent("done", {"attempt": head.attempt})]

    app = App()
    app.add("w", stubborn, timeout=QUICK)
    worker = Worker(memory, app)
    await memory.append("s", [work(1)])
    await bounded(worker.run_until_idle())
    assert cancels == [1, 1]  # cancelled at its timeout, and again one timeout later
    assert "ignores being cancelled; cancelled again" in caplog.text
    assert (worker.stats.timed_out, worker.stats.failed, worker.stats.completed) == (1, 1, 0)
    [cursor] = await memory.cursors("s")
    assert "ran past its 0.05s timeout" in (cursor.dispatch.last_error or "")
    assert await done_by(memory, "s") == []  # what it returned too late is not taken


async def test_the_workers_timeout_applies_unless_the_consumer_sets_its_own(memory: Store) -> None:
    app = App()
    ended: list[str] = []

    @app.consumer("bounded")
    async def hangs(head: Head) -> None:
        await asyncio.Event().wait()

    @app.consumer("patient", timeout=60.0)
    async def slow(head: Head) -> None:
        await asyncio.sleep(QUICK * 3)  # past the worker's timeout, within its own
        ended.append(head.consumer)

    worker = Worker(memory, app, attempt_timeout=QUICK, max_failures=1)
    assert worker.attempt_timeout == QUICK
    await memory.append("s", [NewEvent("go", targets=[Target("bounded"), Target("patient")])])
    await bounded(worker.run_until_idle())
    assert ended == ["patient"]
    assert (worker.stats.completed, worker.stats.timed_out, worker.stats.dead_lettered) == (1, 1, 1)
    [dead] = await memory.dead_letters("s")
    assert dead.consumer == "bounded"
    assert "ran past its 0.05s timeout" in (dead.dispatch.last_error or "")


async def test_a_sync_handler_past_its_timeout_fails_only_once_its_thread_returns(
    store: Store, clock: FakeClock, stubborn: Stubborn, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="a2pg.worker")
    app = App()
    app.add("w", stubborn, timeout=QUICK)
    proxy = RecordingStore(store)
    async with Worker(proxy.as_store(), app, ttl=TTL) as worker:
        await store.append("s", [work(1)])
        await until(lambda: worker.stats.timed_out == 1)
        assert "s:w@1#1 ran past its 0.05s timeout" in caplog.text
        assert "cannot be stopped: its head stays claimed" in caplog.text
        await asyncio.sleep(QUICK)
        assert proxy.failed_attempts == []  # not failed, not released: the thread runs on
        assert await store.claim_any(holder="thief", ttl=TTL) == []
        clock.advance(TTL * 0.6)
        await worker.renew_leases(force=True)  # its lease is renewed meanwhile
        clock.advance(TTL * 0.6)
        assert await store.claim_any(holder="thief", ttl=TTL) == []
        stubborn.let_go.set()
        await until(lambda: worker.stats.failed == 1)
        await bounded(worker.wait_idle())
    assert proxy.failed_attempts == [("s", 1)] and worker.stats.completed == 0
    [cursor] = await store.cursors("s")
    assert cursor.dispatch.failure_count == 1
    assert "ran past its 0.05s timeout and its thread returned late" in (
        cursor.dispatch.last_error or ""
    )
    assert await done_by(store, "s") == []  # its result is not taken


async def test_an_attempt_within_its_timeout_outlives_its_ttl() -> None:
    """A timeout may exceed the lease: the lease is renewed while the attempt runs."""
    store = MemoryStore()  # the real clock: the lease would lapse without renewals
    ran: list[int] = []

    async def slow(head: Head) -> None:
        await asyncio.sleep(0.4)
        ran.append(head.attempt)

    app = App()
    app.add("w", slow, timeout=5.0)
    await store.append("s", [work(1)])
    worker = Worker(store, app, ttl=0.15, renew_interval=0.03)
    await bounded(worker.run_until_idle())
    assert ran == [1]
    assert (worker.stats.completed, worker.stats.superseded, worker.stats.timed_out) == (1, 0, 0)


BAD_TIMEOUTS = [0, 0.0, -1, math.nan, math.inf, -math.inf, 1e300, True, "5"]


@pytest.mark.parametrize("value", BAD_TIMEOUTS, ids=repr)
def test_a_timeout_must_be_positive_and_finite(value: object) -> None:
    with pytest.raises(A2Error) as refused:
        WorkerSettings(attempt_timeout=value)  # type: ignore[arg-type]
    assert refused.value.code == "INVALID_ARGUMENT"
    assert refused.value.message.startswith("attempt_timeout must be ")
    assert repr(value) in refused.value.message
    app = App()
    with pytest.raises(A2Error) as refused:
        app.consumer("w", timeout=value)  # type: ignore[arg-type]
    assert refused.value.code == "INVALID_ARGUMENT"
    assert refused.value.message.startswith("the timeout of consumer 'w' must be ")
    with pytest.raises(A2Error, match="INVALID_ARGUMENT"):
        app.add("w", lambda head: None, timeout=value)  # type: ignore[arg-type]
    assert "w" not in app


def test_a_timeout_may_exceed_the_ttl() -> None:
    settings = WorkerSettings(ttl=1.0, attempt_timeout=3600)
    assert settings.attempt_timeout == 3600.0 and isinstance(settings.attempt_timeout, float)
    assert WorkerSettings().attempt_timeout is None  # no timeout unless one is set
    app = App()
    app.add("w", lambda head: None, timeout=86_400)
    registration = app.registration("w")
    assert registration is not None and registration.timeout == 86_400.0


def test_the_timeout_error_is_a_timeout_error() -> None:
    assert issubclass(AttemptTimeout, TimeoutError)
    assert issubclass(HandlersStillRunning, RuntimeError)
