"""wakeups: an iterator that yields whenever claimable work may have appeared."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

from a2pg import Target
from a2pg.store import Store

from .helpers import (
    TIMEOUT,
    MakeStore,
    append,
    cancel,
    claim_one,
    close,
    completed,
    ev,
    fail,
    let_run,
    log_consumer,
)

Trigger = Callable[[], Awaitable[object]]


async def _first_of(wakeups: AsyncIterator[str | None], wanted: set[str | None]) -> str | None:
    while True:
        value = await anext(wakeups)
        if value in wanted:
            return value


async def expect_wakeup(watcher: Store, writer: Store, session_id: str, trigger: Trigger) -> None:
    """Subscribes (proved by a warm-up wakeup), runs ``trigger``, then waits for its session."""
    wakeups = watcher.wakeups()
    waiting: asyncio.Future[str | None] | None = None
    try:
        waiting = asyncio.ensure_future(_first_of(wakeups, {None, "warm-up"}))
        await let_run()
        await append(writer, "warm-up", ev(to=["warm"]))
        await asyncio.wait_for(waiting, TIMEOUT)
        waiting = asyncio.ensure_future(_first_of(wakeups, {session_id}))
        await let_run()
        await trigger()
        assert await asyncio.wait_for(waiting, TIMEOUT) == session_id
    finally:
        await cancel(waiting)
        await close(wakeups)


async def test_an_append_that_creates_work_wakes(store: Store, make_store: MakeStore) -> None:
    writer = await make_store()

    async def trigger() -> object:
        return await append(writer, "s", ev(to=["c"]))

    await expect_wakeup(store, writer, "s", trigger)


async def test_an_append_that_wakes_a_log_consumer_wakes(store: Store) -> None:
    async def trigger() -> object:
        return await append(store, "s", ev("a"), consumers=[log_consumer("audit")])

    await expect_wakeup(store, store, "s", trigger)


async def test_a_completion_that_returns_work_wakes(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")

    async def trigger() -> object:
        return await completed(store, head, ev("next", id="n", to=["d"]))

    await expect_wakeup(store, store, "s", trigger)


async def test_a_lane_moving_to_its_next_event_wakes(store: Store) -> None:
    await append(store, "s", ev(to=[Target("c", "x")]), ev(to=[Target("c", "x")]))
    head = await claim_one(store, "s")

    async def trigger() -> object:
        return await completed(store, head)

    await expect_wakeup(store, store, "s", trigger)


async def test_a_failure_claimable_at_once_wakes(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")

    async def trigger() -> object:
        return await fail(store, head)

    await expect_wakeup(store, store, "s", trigger)


async def test_a_redrive_wakes(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    await fail(store, await claim_one(store, "s"), max_failures=1)

    async def trigger() -> object:
        return await store.redrive("s", consumer="c", index=1, action="retry")

    await expect_wakeup(store, store, "s", trigger)


async def test_a_redrive_skip_that_exposes_the_next_head_wakes(store: Store) -> None:
    await append(store, "s", ev(to=[Target("c", "x")]), ev(to=[Target("c", "x")]))
    await fail(store, await claim_one(store, "s"), max_failures=1)

    async def trigger() -> object:
        return await store.redrive("s", consumer="c", index=1, action="skip")

    await expect_wakeup(store, store, "s", trigger)


async def test_every_listener_is_woken(store: Store, make_store: MakeStore) -> None:
    other = await make_store()
    first, second = store.wakeups(), other.wakeups()
    waiting = [
        asyncio.ensure_future(_first_of(first, {"s", None})),
        asyncio.ensure_future(_first_of(second, {"s", None})),
    ]
    try:
        await let_run()
        await append(store, "s", ev(to=["c"]))
        results = await asyncio.wait_for(asyncio.gather(*waiting), TIMEOUT)
        assert set(results) <= {"s", None}
    finally:
        for task in waiting:
            await cancel(task)
        await close(first)
        await close(second)
