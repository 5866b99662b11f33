"""Wakeups: subscribed when the worker starts, closed when it stops; PollingOnly never wakes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence

import pytest

from a2pg import Consumer, Head, NewEvent, Target
from a2pg.memory import MemoryStore
from a2pg.store import Store
from a2pg.wakeups import Subscription
from a2pg.worker import App, Worker
from a2pg.worker.polling import PollingOnly

TIMEOUT = 10.0
QUIET = 0.05
"""How long a test listens for a wakeup that must not come."""


def job() -> NewEvent:
    return NewEvent("job", targets=[Target("w")])


async def until(predicate: Callable[[], bool], within: float = TIMEOUT) -> None:
    async def poll() -> None:
        while not predicate():  # noqa: ASYNC110 - the worker's tasks make it true
            await asyncio.sleep(0.001)

    await asyncio.wait_for(poll(), within)


class AppendsAfterFirstClaim(MemoryStore):
    """A real MemoryStore where another client appends work just after the first claim
    looked (as a commit landing after a claim statement's snapshot on PostgreSQL)."""

    def __init__(self) -> None:
        super().__init__()
        self.claims = 0
        self.subscriptions: list[AsyncIterator[str | None]] = []

    async def claim_any(
        self,
        *,
        holder: str,
        ttl: float,
        consumers: Sequence[Consumer] | None = None,
        limit: int = 10,
        max_failures: int | None = None,
    ) -> list[Head]:
        heads = await super().claim_any(
            holder=holder, ttl=ttl, consumers=consumers, limit=limit, max_failures=max_failures
        )
        self.claims += 1
        if self.claims == 1:
            assert heads == []
            await self.append("s", [job()])
        return heads

    def wakeups(self) -> Subscription:
        subscription = super().wakeups()
        self.subscriptions.append(subscription)
        return subscription


async def test_a_wakeup_sent_right_after_start_reaches_the_first_idle_wait() -> None:
    """The subscription is in place when ``start()`` returns: work signalled while the first
    claim runs (``run()`` claims without yielding to other tasks first) wakes the worker at
    once, not a ``poll_interval`` later."""
    store = AppendsAfterFirstClaim()
    seen: list[int] = []
    worker = Worker(store, App({"w": lambda head: seen.append(head.index)}), poll_interval=60.0)
    running = asyncio.create_task(worker.run())
    try:
        await until(lambda: seen == [1])
    finally:
        worker.stop()
        await asyncio.wait_for(running, TIMEOUT)
    assert store.claims >= 2


async def test_the_subscription_is_taken_at_start_and_closed_at_shutdown() -> None:
    store = AppendsAfterFirstClaim()
    worker = Worker(store, App({"w": lambda head: None}), poll_interval=60.0)
    await worker.start()
    assert len(store.subscriptions) == 1  # before any claim
    assert store.claims == 0
    await asyncio.wait_for(worker.run_until_idle(), TIMEOUT)
    assert len(store.subscriptions) == 1
    with pytest.raises(StopAsyncIteration):  # closed: ends at once instead of waiting
        await asyncio.wait_for(anext(store.subscriptions[0]), TIMEOUT)


async def test_polling_only_is_the_wrapped_store_but_never_wakes() -> None:
    inner = MemoryStore()
    store: Store = PollingOnly(inner)
    assert isinstance(store, Store)
    assert store.presence is inner.presence

    await store.append("s", [job()])  # every call but wakeups() reaches the inner store
    assert [e.type for e in await inner.read("s")] == ["job"]
    assert [e.type for e in await store.read("s")] == ["job"]

    heard = inner.wakeups()  # the control: the inner store does wake
    silent = store.wakeups()
    waiting = asyncio.ensure_future(anext(silent))
    await store.append("t", [job()])
    assert await asyncio.wait_for(anext(heard), TIMEOUT) in ("s", "t")
    await asyncio.sleep(QUIET)
    assert not waiting.done()
    assert isinstance(silent, Subscription)
    await silent.aclose()  # ends the waiting iteration
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(waiting, TIMEOUT)
    assert isinstance(heard, Subscription)
    await heard.aclose()


async def test_a_worker_on_polling_only_finds_work_by_polling() -> None:
    inner = MemoryStore()
    seen: list[int] = []
    worker = Worker(
        PollingOnly(inner), App({"w": lambda h: seen.append(h.index)}), poll_interval=0.01
    )
    async with worker:
        await asyncio.wait_for(worker.wait_idle(), TIMEOUT)
        await inner.append("s", [job()])
        await until(lambda: seen == [1])
