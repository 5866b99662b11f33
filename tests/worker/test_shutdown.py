"""Graceful shutdown: stop claiming, drain in-flight attempts, release what the grace cut short."""

from __future__ import annotations

import asyncio
import os
import signal
import threading

import pytest

from a2pg import Head, NewEvent, Target
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


async def test_stop_drains_in_flight_attempts_and_claims_no_more(store: Store) -> None:
    gate = Gate()
    proxy = RecordingStore(store)
    worker = Worker(proxy.as_store(), App({"w": gate}), concurrency=2, claim_batch=2)
    await store.append("s", [work(n) for n in range(4)])
    running = asyncio.create_task(worker.run())
    await until(lambda: gate.started == 2)
    worker.stop()
    claims = len(proxy.claim_limits)
    for _ in range(20):
        await asyncio.sleep(0)
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
    worker = Worker(store, App({"w": gate}))
    await store.append("s", [work(1)])
    running = asyncio.create_task(worker.run())
    await until(lambda: gate.started == 1)
    worker.stop()
    worker.stop(force=True)
    await bounded(running)
    assert worker.stats.released == 1 and worker.stats.completed == 0
    [head] = await store.claim_any(holder="next", ttl=30.0)  # at once: not a lapsed lease
    assert (head.attempt, head.failure_count) == (2, 1)
    assert "released" in (head.dispatch.last_error or "")


async def test_the_grace_period_bounds_the_drain(memory: Store) -> None:
    gate = Gate()
    worker = Worker(memory, App({"w": gate}), shutdown_grace=0.02)
    await memory.append("s", [work(1)])
    running = asyncio.create_task(worker.run())
    await until(lambda: gate.started == 1)
    worker.stop()
    await bounded(running)
    assert worker.stats.released == 1


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
async def test_sigterm_drains_then_serve_returns(memory: Store) -> None:
    gate = Gate()
    await memory.append("s", [work(1)])
    serving = asyncio.create_task(serve(memory, App({"w": gate}), poll_interval=0.01))
    await until(lambda: gate.started == 1)
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(20):
        await asyncio.sleep(0.001)
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
