"""MemoryStore's live feeds: wakeups subscribed at creation, and everything ending on close."""

from __future__ import annotations

import asyncio

from a2pg import NewEvent, Target
from a2pg.memory import MemoryStore

TIMEOUT = 5.0


def job() -> NewEvent:
    return NewEvent("job", targets=(Target("w"),))


async def test_wakeups_hear_work_signalled_before_the_first_read(store: MemoryStore) -> None:
    wakeups = store.wakeups()
    await store.append("a", [job()])
    await store.append("b", [NewEvent("note")])
    await store.append("a", [job()])
    await store.append("c", [job()])
    got = [await asyncio.wait_for(anext(wakeups), TIMEOUT) for _ in range(2)]
    assert got == ["a", "c"]
    await wakeups.aclose()
    assert [s async for s in wakeups] == []


async def test_close_ends_waiting_streams_and_wakeups(store: MemoryStore) -> None:
    wakeups, stream = store.wakeups(), store.stream("s")
    waiting = asyncio.gather(anext(wakeups, "ended"), anext(stream, "ended"))
    await asyncio.sleep(0)
    await store.close()
    assert list(await asyncio.wait_for(waiting, TIMEOUT)) == ["ended", "ended"]
    assert [event async for event in store.stream("s")] == []


async def test_a_stream_delivers_events_committed_before_a_clear(store: MemoryStore) -> None:
    await store.append("s", [NewEvent("a")])
    stream = store.stream("s")
    assert (await anext(stream)).index == 1
    await store.append("s", [NewEvent("b")])
    await store.clear("s")
    got = [await asyncio.wait_for(anext(stream), TIMEOUT) for _ in range(2)]
    assert [event.type for event in got] == ["b", "a2.cleared"]
    await stream.aclose()  # type: ignore[attr-defined]
