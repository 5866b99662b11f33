"""stream: stored events after `after`, then live ones, in order, no gaps, no duplicates."""

from __future__ import annotations

import asyncio

import pytest

from a2pg import CLEAR_EVENT_TYPE, StoredEvent
from a2pg.store import Store

from .helpers import (
    MakeStore,
    append,
    cancel,
    claim_one,
    close,
    completed,
    ev,
    let_run,
    next_within,
    take,
)


async def test_stored_events_come_first(store: Store) -> None:
    events = await append(store, "s", ev("a"), ev("b"), ev("c"))
    stream = store.stream("s")
    try:
        assert await take(stream, 3) == events
    finally:
        await close(stream)


async def test_after_skips_what_the_caller_has(store: Store) -> None:
    events = await append(store, "s", ev(), ev(), ev())
    stream = store.stream("s", after=2)
    try:
        assert await next_within(stream) == events[2]
    finally:
        await close(stream)


async def test_live_events_follow_the_stored_ones(store: Store) -> None:
    await append(store, "s", ev("old"))
    stream = store.stream("s")
    try:
        [old] = await take(stream, 1)
        assert old.type == "old"
        live = await append(store, "s", ev("new1"), ev("new2"))
        assert await take(stream, 2) == live
        more = await append(store, "s", ev("new3"))
        assert await take(stream, 1) == more
    finally:
        await close(stream)


async def test_a_stream_of_an_empty_session_waits_for_the_first_event(store: Store) -> None:
    stream = store.stream("s")
    pending = asyncio.ensure_future(next_within(stream))
    try:
        await let_run()
        [first] = await append(store, "s", ev("first"))
        assert await pending == first
    finally:
        await cancel(pending)
        await close(stream)


async def test_concurrent_appends_arrive_in_order_without_gaps(
    store: Store, make_store: MakeStore
) -> None:
    writer = await make_store()
    await append(writer, "s", ev("start"))
    stream = store.stream("s")
    try:
        await take(stream, 1)
        batches, size = 12, 3
        await asyncio.gather(
            *(writer.append("s", [ev(f"b{b}-{i}") for i in range(size)]) for b in range(batches))
        )
        received = await take(stream, batches * size)
        assert [e.index for e in received] == list(range(2, 2 + batches * size))
        assert received == await store.read("s", after=1)
    finally:
        await close(stream)


async def test_events_of_other_sessions_are_not_streamed(store: Store) -> None:
    stream = store.stream("s")
    pending = asyncio.ensure_future(next_within(stream))
    try:
        await let_run()
        await append(store, "other", ev("elsewhere"))
        [mine] = await append(store, "s", ev("mine"))
        got: StoredEvent = await pending
        assert got == mine
    finally:
        await cancel(pending)
        await close(stream)


async def test_completions_are_streamed(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    stream = store.stream("s")
    try:
        await take(stream, 1)
        [result] = await completed(store, await claim_one(store, "s"), ev("result", id="r"))
        assert await take(stream, 1) == [result]
    finally:
        await close(stream)


async def test_a_clear_is_streamed(store: Store) -> None:
    await append(store, "s", ev())
    stream = store.stream("s")
    try:
        await take(stream, 1)
        await store.clear("s")
        [marker] = await take(stream, 1)
        assert (marker.index, marker.type) == (2, CLEAR_EVENT_TYPE)
    finally:
        await close(stream)


async def test_a_running_stream_has_no_gap_across_a_clear(store: Store) -> None:
    """Events committed before a clear that a running stream has not reached yet still
    come, then the marker: a stream, once started, never skips an index."""
    await append(store, "s", ev(to=["c"]))
    stream = store.stream("s")
    try:
        await take(stream, 1)
        await completed(store, await claim_one(store, "s"), ev("result", id="r"))
        await store.clear("s")
        got = await take(stream, 2)
        assert [(e.index, e.type) for e in got] == [(2, "result"), (3, CLEAR_EVENT_TYPE)]
    finally:
        await close(stream)


async def test_a_stream_never_starts_below_the_clear_marker(store: Store) -> None:
    await append(store, "s", ev(), ev())
    await store.clear("s")
    [after] = await append(store, "s", ev("after"))
    stream = store.stream("s", after=0)
    try:
        got = await take(stream, 2)
        assert [(e.index, e.type) for e in got] == [(3, CLEAR_EVENT_TYPE), (4, "after")]
        assert got[1] == after
    finally:
        await close(stream)


async def test_many_streams_see_the_same_events(store: Store, make_store: MakeStore) -> None:
    other = await make_store()
    first, second = store.stream("s"), other.stream("s")
    pending = asyncio.ensure_future(asyncio.gather(take(first, 4), take(second, 4)))
    try:
        await let_run()
        events = await append(store, "s", ev(), ev())
        events += await append(store, "s", ev(), ev())
        a, b = await pending
        assert a == b == events
    finally:
        await cancel(pending)
        await close(first)
        await close(second)


async def test_closing_the_store_ends_its_streams(make_store: MakeStore) -> None:
    store = await make_store()
    await append(store, "s", ev())
    stream = store.stream("s")
    await take(stream, 1)
    pending = asyncio.ensure_future(next_within(stream))
    try:
        await let_run()
        await store.close()
        with pytest.raises(StopAsyncIteration):
            await pending
    finally:
        await cancel(pending)
        await close(stream)


async def test_closing_the_store_ends_its_wakeups(make_store: MakeStore) -> None:
    store = await make_store()
    wakeups = store.wakeups()
    pending = asyncio.ensure_future(next_within(wakeups))
    try:
        await let_run()
        await store.close()
        with pytest.raises(StopAsyncIteration):
            await pending
    finally:
        await cancel(pending)
        await close(wakeups)
