"""Completions leave in batches (by count or after a few ms) and survive a lost acknowledgement."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from a2pg import CompletedAndClaimed, CompleteResult, Completion, Head, NewEvent
from a2pg.store import Store
from a2pg.worker import App, Worker

from .helpers import RecordingStore, bounded, until, work


def echo_app() -> App:
    app = App()

    @app.consumer("w")
    async def echo(head: Head) -> list[NewEvent]:
        return [NewEvent("done", head.event.payload)]

    return app


async def test_completions_are_batched_under_load(memory: Store) -> None:
    proxy = RecordingStore(memory)
    await memory.append("s", [work(n) for n in range(25)])
    worker = Worker(proxy.as_store(), echo_app(), concurrency=10)
    await bounded(worker.run_until_idle())
    assert sum(proxy.completion_batches) == 25
    assert max(proxy.completion_batches) > 1
    assert len(proxy.completion_batches) < 25
    assert worker.stats.flushes == len(proxy.completion_batches)
    assert worker.stats.completed == 25


async def test_a_batch_leaves_when_it_is_full(memory: Store) -> None:
    proxy = RecordingStore(memory)
    await memory.append("s", [work(n) for n in range(12)])
    worker = Worker(proxy.as_store(), echo_app(), concurrency=12, flush_size=4)
    await bounded(worker.run_until_idle())
    assert proxy.completion_batches == [4, 4, 4]


async def test_completions_from_many_sessions_share_a_batch(memory: Store) -> None:
    proxy = RecordingStore(memory)
    for s in range(6):
        await memory.append(f"s{s}", [work(s)])
    worker = Worker(proxy.as_store(), echo_app(), concurrency=6)
    await bounded(worker.run_until_idle())
    assert proxy.completion_batches == [6]
    for s in range(6):
        assert [e.type for e in await memory.read(f"s{s}")] == ["job", "done"]


class LosesFirstAck(RecordingStore):
    """The first batch commits, then the connection drops before the answer arrives."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.lost = 0

    async def complete_attempts(self, completions: Sequence[Completion]) -> list[CompleteResult]:
        outcomes = await super().complete_attempts(completions)
        self._lose_the_first()
        return outcomes

    async def complete_and_claim(
        self, completions: Sequence[Completion], **options: Any
    ) -> CompletedAndClaimed:
        result = await super().complete_and_claim(completions, **options)
        if completions:
            self._lose_the_first()
        return result

    def _lose_the_first(self) -> None:
        if not self.lost:
            self.lost += 1
            raise ConnectionResetError("connection lost after commit")


async def test_a_resent_batch_replays_instead_of_appending_twice(store: Store) -> None:
    proxy = LosesFirstAck(store)
    await store.append("s", [work(n) for n in range(3)])
    app = App()

    @app.consumer("w")
    async def handle(head: Head) -> list[NewEvent]:
        return [NewEvent("a"), NewEvent("b")]  # no ids: the worker derives stable ones

    worker = Worker(proxy.as_store(), app, concurrency=3)
    await bounded(worker.run_until_idle())
    assert proxy.lost == 1 and len(proxy.completion_batches) == 2
    assert worker.stats.completed == 3
    types = [e.type for e in await store.read("s")]
    assert types.count("a") == 3 and types.count("b") == 3


class FailsFirstClaim(RecordingStore):
    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.failures = 0

    async def claim_any(self, **options: Any) -> list[Head]:
        if not self.failures:
            self.failures += 1
            raise ConnectionResetError("database restarting")
        return await super().claim_any(**options)


async def test_a_failing_claim_is_retried_after_a_poll_interval(memory: Store) -> None:
    proxy = FailsFirstClaim(memory)
    await memory.append("s", [work(1)])
    async with Worker(proxy.as_store(), echo_app(), poll_interval=0.01) as worker:
        await bounded(worker.wait_idle())
    assert worker.stats.store_errors == 1
    assert worker.stats.completed == 1


async def test_a_partial_batch_leaves_after_the_flush_interval(memory: Store) -> None:
    import asyncio

    from a2pg import Target

    gate = asyncio.Event()

    async def slow(head: Head) -> None:
        await gate.wait()

    app = App({"slow": slow, "fast": lambda head: None})
    proxy = RecordingStore(memory)
    worker = Worker(proxy.as_store(), app, concurrency=4, flush_size=4, flush_interval=0.002)
    async with worker:
        await memory.append("s", [NewEvent("go", targets=[Target("slow"), Target("fast")])])
        await until(lambda: worker.stats.completed == 1)  # while "slow" still runs
        assert proxy.completion_batches == [1]
        gate.set()
        await bounded(worker.wait_idle())
    assert worker.stats.completed == 2


async def test_finished_attempts_travel_with_the_next_claim(store: Store) -> None:
    """The claim loop takes the completions waiting for their batch along with its claim
    (one round trip, one commit), never running more handlers than ``concurrency``."""
    proxy = RecordingStore(store)
    for s in range(8):
        await store.append(f"s{s}", [work(n) for n in range(5)])
    running = peak = 0
    app = App()

    @app.consumer("w")
    async def handle(head: Head) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.002)
        running -= 1

    worker = Worker(proxy.as_store(), app, concurrency=4)
    await bounded(worker.run_until_idle())
    assert worker.stats.completed == 40
    assert sum(proxy.completion_batches) == 40
    assert proxy.fused_batches, "no completion travelled with a claim"
    assert peak <= 4
