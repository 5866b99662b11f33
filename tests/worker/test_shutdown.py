"""Graceful shutdown: stop claiming, drain in-flight attempts, release what the grace cut short.

Released claims go back with ``release_claims`` (one call per session): claimable at once by
another worker, with no failure counted.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

import pytest

from a2pg import Head, NewEvent, Target
from a2pg.ids import FakeClock
from a2pg.store import Store
from a2pg.worker import App, Worker, serve

from .helpers import RecordingStore, bounded, until, work


class Gate:
    """Handlers wait here; ``started`` says how many got in."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.started = 0

    async def __call__(self, head: Head) -> list[NewEvent]:
        self.started += 1
        await self.event.wait()
        return [NewEvent("done")]


def draining(caplog: pytest.LogCaptureFixture) -> Callable[[], bool]:
    """True once the worker has logged that it waits for its in-flight attempts: the event
    that shows a drain began, where a few idle turns would only show it had not ended yet."""
    caplog.set_level(logging.INFO, logger="a2pg.worker")
    return lambda: any(r.getMessage().startswith("draining") for r in caplog.records)


async def test_stop_drains_in_flight_attempts_and_claims_no_more(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    gate = Gate()
    proxy = RecordingStore(store)
    worker = Worker(proxy.as_store(), App({"w": gate}), concurrency=2, claim_batch=2)
    drain_began = draining(caplog)
    await store.append("s", [work(n) for n in range(4)])
    running = asyncio.create_task(worker.run())
    await until(lambda: gate.started == 2)
    worker.stop()
    claims = len(proxy.claim_limits)
    await until(drain_began)
    assert not running.done()  # waiting for its attempts
    gate.event.set()
    await bounded(running)
    assert len(proxy.claim_limits) == claims
    assert worker.stats.completed == 2 and worker.stats.released == 0
    types = [e.type for e in await store.read("s")]
    assert types.count("done") == 2
    assert (await store.append("s", [])).has_pending  # the other two wait for the next worker


async def test_a_forced_stop_releases_attempts_for_other_workers(store: Store) -> None:
    gate = Gate()
    proxy = RecordingStore(store)
    worker = Worker(proxy.as_store(), App({"w": gate}))
    await store.append("s", [work(1)])
    running = asyncio.create_task(worker.run())
    await until(lambda: gate.started == 1)
    worker.stop()
    worker.stop(force=True)
    await bounded(running)
    assert worker.stats.released == 1 and worker.stats.completed == 0
    assert (proxy.releases, proxy.failed_attempts) == ([("s", 1)], [])
    [head] = await store.claim_any(holder="next", ttl=30.0)  # at once: not a lapsed lease
    assert (head.attempt, head.failure_count) == (2, 0)  # a shutdown is not a failure
    assert head.dispatch.last_error is None


async def test_claims_are_released_with_one_call_per_session(store: Store) -> None:
    gate = Gate()
    proxy = RecordingStore(store)
    worker = Worker(proxy.as_store(), App({"w": gate}), concurrency=3)
    await store.append("s-a", [work(1), work(2)])
    await store.append("s-b", [work(3)])
    running = asyncio.create_task(worker.run())
    await until(lambda: gate.started == 3)
    worker.stop(force=True)
    await bounded(running)
    assert worker.stats.released == 3
    assert sorted(proxy.releases) == [("s-a", 2), ("s-b", 1)]
    heads = await store.claim_any(holder="next", ttl=30.0)
    assert sorted((h.session_id, h.index, h.attempt, h.failure_count) for h in heads) == [
        ("s-a", 1, 2, 0),
        ("s-a", 2, 2, 0),
        ("s-b", 1, 2, 0),
    ]


async def test_the_grace_period_bounds_the_drain(memory: Store) -> None:
    gate = Gate()
    worker = Worker(memory, App({"w": gate}), shutdown_grace=0.02)
    await memory.append("s", [work(1)])
    running = asyncio.create_task(worker.run())
    await until(lambda: gate.started == 1)
    worker.stop()
    await bounded(running)
    assert worker.stats.released == 1
    [cursor] = await memory.cursors("s")
    assert (cursor.dispatch.claim_holder, cursor.dispatch.failure_count) == (None, 0)


class SlowToStop:
    """A handler whose clean-up after a cancel never ends: only the worker giving up stops it."""

    def __init__(self) -> None:
        self.started = 0

    async def __call__(self, head: Head) -> list[NewEvent]:
        self.started += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.Event().wait()
        return [NewEvent("never")]


async def test_an_attempt_given_up_on_is_released_too(memory: Store) -> None:
    handler = SlowToStop()
    worker = Worker(memory, App({"w": handler}), cleanup_timeout=0.02)
    await memory.append("s", [work(1)])
    running = asyncio.create_task(worker.run())
    await until(lambda: handler.started == 1)
    worker.stop(force=True)
    await bounded(running)
    assert worker.stats.released == 1
    [head] = await memory.claim_any(holder="next", ttl=30.0)
    assert (head.attempt, head.failure_count) == (2, 0)


class StopWhenClaimed(RecordingStore):
    """Forces the worker's stop as its claim returns, so shutdown meets unstarted attempts."""

    worker: Worker | None = None

    async def claim_any(self, **options: Any) -> list[Head]:
        heads = await super().claim_any(**options)
        if heads and self.worker is not None:
            self.worker.stop(force=True)
        return heads


async def test_an_attempt_cut_short_before_its_handler_ran_is_released(memory: Store) -> None:
    gate = Gate()
    proxy = StopWhenClaimed(memory)
    worker = proxy.worker = Worker(proxy.as_store(), App({"w": gate}))
    await memory.append("s", [work(1)])
    await bounded(worker.run())
    assert (gate.started, worker.stats.claimed, worker.stats.released) == (0, 1, 1)
    assert proxy.releases == [("s", 1)]


async def test_a_release_the_store_finds_superseded_is_not_counted(memory: Store) -> None:
    gate = Gate()
    worker = Worker(memory, App({"w": gate}))
    await memory.append("s", [work(1)])
    running = asyncio.create_task(worker.run())
    await until(lambda: gate.started == 1)
    await memory.clear("s")
    worker.stop(force=True)
    await bounded(running)
    assert (worker.stats.released, worker.stats.superseded) == (0, 1)


class BrokenRelease(RecordingStore):
    """``release_claims`` fails, or (``hang``) never answers."""

    hang = False

    async def release_claims(self, session_id: str, **options: Any) -> Any:
        if self.hang:
            await asyncio.Event().wait()
        raise ConnectionError("store unreachable")


@pytest.mark.parametrize("hang", [False, True], ids=["error", "timeout"])
async def test_a_failed_release_leaves_the_lease_to_lapse(
    memory: Store, clock: FakeClock, hang: bool
) -> None:
    gate = Gate()
    proxy = BrokenRelease(memory)
    proxy.hang = hang
    worker = Worker(proxy.as_store(), App({"w": gate}), ttl=30.0, cleanup_timeout=0.02)
    await memory.append("s", [work(1)])
    running = asyncio.create_task(worker.run())
    await until(lambda: gate.started == 1)
    worker.stop(force=True)
    await bounded(running)
    assert (worker.stats.released, worker.stats.store_errors) == (0, 1)
    assert await memory.claim_any(holder="next", ttl=30.0) == []  # still leased
    clock.advance(30.0)
    [head] = await memory.claim_any(holder="next", ttl=30.0)
    assert (head.attempt, head.failure_count) == (2, 1)


async def test_finished_work_is_flushed_even_when_forced(memory: Store) -> None:
    app = App()
    gate = Gate()
    app.add("slow", gate)
    app.add("fast", lambda head: [NewEvent("fast.done")])
    worker = Worker(memory, app, flush_interval=60.0, flush_size=100)
    await memory.append("s", [NewEvent("go", targets=[Target("slow"), Target("fast")])])
    running = asyncio.create_task(worker.run())
    await until(lambda: gate.started == 1 and worker.queued_completions == 1)
    worker.stop(force=True)
    await bounded(running)
    assert worker.stats.completed == 1 and worker.stats.released == 1
    assert [e.type for e in await memory.read("s")] == ["go", "fast.done"]


async def test_the_worker_can_run_again_after_stopping(memory: Store) -> None:
    worker = Worker(memory, App({"w": lambda head: None}))
    await memory.append("s", [work(1)])
    await bounded(worker.run_until_idle())
    await memory.append("s", [work(2)])
    await bounded(worker.run_until_idle())
    assert worker.stats.completed == 2


needs_main_thread = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(),
    reason="signal handlers need the main thread",
)


@needs_main_thread
async def test_sigterm_drains_then_serve_returns(
    memory: Store, caplog: pytest.LogCaptureFixture
) -> None:
    gate = Gate()
    drain_began = draining(caplog)
    await memory.append("s", [work(1)])
    serving = asyncio.create_task(serve(memory, App({"w": gate}), poll_interval=0.01))
    await until(lambda: gate.started == 1)
    os.kill(os.getpid(), signal.SIGTERM)
    await until(drain_began)  # the signal was handled: a stop, not a forced one
    assert not serving.done()
    gate.event.set()
    stats = await bounded(serving)
    assert stats.completed == 1 and stats.released == 0


@needs_main_thread
async def test_a_second_signal_forces_the_stop(memory: Store) -> None:
    gate = Gate()
    await memory.append("s", [work(1)])
    worker = Worker(memory, App({"w": gate}))
    running = asyncio.create_task(worker.run_with_signals())
    await until(lambda: gate.started == 1)
    os.kill(os.getpid(), signal.SIGINT)
    await until(lambda: worker.stopping)
    assert not running.done()
    os.kill(os.getpid(), signal.SIGINT)
    await bounded(running)
    assert worker.stats.released == 1
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


async def test_an_error_in_the_block_stops_without_waiting_out_the_grace(memory: Store) -> None:
    gate = Gate()
    await memory.append("s", [work(1)])
    worker = Worker(memory, App({"w": gate}), shutdown_grace=60.0)

    async def block() -> None:
        async with worker:
            await until(lambda: gate.started == 1)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await bounded(block())
    assert worker.stats.released == 1
