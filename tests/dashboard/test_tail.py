"""The live tail: ends when its client goes away (no stream task or subscription is left),
serves at most ``MAX_STREAMS`` at once however fast they open, and holds a bounded number
of bytes for a client that does not read, however large the events."""

from __future__ import annotations

import asyncio
import gc
import json
import tracemalloc
from pathlib import Path

import a2pg.dashboard
from a2pg import NewEvent
from a2pg.dashboard import create_app
from a2pg.store import Store

from ..worker.helpers import bounded, until
from .helpers import RawTail, append_plain

MAX_STREAMS = 64
"""The documented cap (``docs/operating/dashboard.md``): one process, 64 live tails."""
MIB = 1 << 20


def _tail_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "a2pg-dashboard-tail"]


async def test_a_tail_whose_client_disconnects_is_closed(store: Store) -> None:
    await append_plain(store, "s1", [1, 2])
    app = create_app(store)
    dashboard = app.state.dashboard
    tail = RawTail(app, "id=s1&after=0").start()

    await bounded(until(lambda: tail.events == 2))
    assert len(dashboard.tails) == 1
    await append_plain(store, "s1", [3])
    await bounded(until(lambda: tail.events == 3))

    await tail.close()
    assert dashboard.tails == set()
    await bounded(until(lambda: not _tail_tasks()))


READERS_END = 40.0
"""Seconds the closed tails' reader tasks get to end (see the cap test)."""


async def test_tails_opened_at_once_stream_at_most_the_cap(store: Store) -> None:
    """200 tails opened in the same instant: exactly 64 stream, the others get a 503 that
    says when to come back, and a tail that ends frees its place."""
    await append_plain(store, "s1", [1])
    app = create_app(store)
    dashboard = app.state.dashboard
    tails = [RawTail(app, "id=s1&after=0") for _ in range(200)]
    for tail in tails:
        tail.start()
    try:
        await bounded(until(lambda: all(t.status is not None for t in tails)))
        streaming = [t for t in tails if t.status == 200]
        refused = [t for t in tails if t.status != 200]
        assert len(streaming) == MAX_STREAMS
        assert {t.status for t in refused} == {503}
        assert all(t.headers.get("retry-after", "").isdigit() for t in refused)
        assert all(b"too many live tails" in t.body() for t in refused)
        await bounded(until(lambda: all(t.events == 1 for t in streaming)))
        assert len(dashboard.tails) == MAX_STREAMS
        await append_plain(store, "s1", [2])
        await bounded(until(lambda: all(t.events == 2 for t in streaming)))

        await streaming[0].close()
        assert len(dashboard.tails) == MAX_STREAMS - 1
        again = RawTail(app, "id=s1&after=1").start()
        tails.append(again)
        await bounded(until(lambda: again.events == 1))
        assert again.status == 200
        late = RawTail(app, "id=s1&after=0").start()
        tails.append(late)
        await bounded(until(lambda: late.status is not None))
        assert late.status == 503
    finally:
        for tail in tails:
            await tail.close()
    assert dashboard.tails == set()
    # Every reader task ends, but on PostgreSQL one cancelled mid-read first lets psycopg
    # cancel its statement and wait for the server's answer: 64 of them on a loaded
    # 2-core CI took over 10 s once.
    await bounded(until(lambda: not _tail_tasks(), within=READERS_END), within=READERS_END)


async def test_a_large_event_is_cut_short_in_the_tail_with_a_marker(store: Store) -> None:
    payload = {"text": "y" * (MIB - 20)}
    size = len(json.dumps(payload, separators=(",", ":")).encode())
    await append_plain(store, "big", [0])
    app = create_app(store)
    tail = RawTail(app, "id=big&after=1").start()
    try:
        await bounded(until(lambda: tail.status == 200 and len(tail.chunks) >= 1))
        await store.append("big", [NewEvent("big", payload), NewEvent("small", {"n": 1})])
        await bounded(until(lambda: tail.events == 2))
    finally:
        await tail.close()
    frames = [c for c in tail.chunks if c.startswith(b"id: ")]
    assert len(frames) == 2
    assert len(frames[0]) < 64 * 1024, len(frames[0])
    shown = json.loads(frames[0].decode().split("data: ", 1)[1])
    assert shown["collapsed"] is True
    assert shown["payload"].startswith('{\n  "text": "yyy')
    assert shown["payload"].endswith(f"(truncated: {size} bytes in all)")
    assert json.loads(frames[1].decode().split("data: ", 1)[1])["payload"] == '{\n  "n": 1\n}'


async def test_tails_whose_clients_never_read_hold_a_bounded_number_of_bytes(
    store: Store,
) -> None:
    """10 clients that never read while 80 events of 128 KiB are appended (10 MiB): the
    dashboard holds about 1 MiB for each, not every event it read for them; and once they
    go, nothing of theirs is left."""
    clients = 10
    await append_plain(store, "big", [0])
    app = create_app(store)
    dashboard = app.state.dashboard
    text = "x" * (128 * 1024)
    gc.collect()
    tracemalloc.start(TRACE_DEPTH)
    try:
        stuck = [RawTail(app, "id=big&after=1", read=False).start() for _ in range(clients)]
        witness = RawTail(app, "id=big&after=1", keep=False).start()
        await bounded(until(lambda: all(t.status == 200 for t in [*stuck, witness])))
        for n in range(80):
            await store.append("big", [NewEvent("big", {"n": n, "text": text})])
        await bounded(until(lambda: witness.events == 80), within=60)
        await _settled()
        held = _held_by_the_dashboard()
    finally:
        tracemalloc.stop()
    opened = list(dashboard.tails)
    for tail in [*stuck, witness]:
        await tail.close()
    assert held < clients * 1.5 * MIB, f"{clients} stuck tails held {held / MIB:.1f} MiB"
    assert dashboard.tails == set()
    await bounded(until(lambda: not _tail_tasks()))
    # The dashboard's own count: the most each tail ever held unsent.
    peaks = sorted(t.peak_unsent for t in opened)
    assert len(peaks) == clients + 1
    assert peaks[-1] <= MIB + 64 * 1024
    assert peaks[1] >= MIB  # each stuck one filled its buffer, then stopped reading the store


TRACE_DEPTH = 16
"""Frames tracemalloc keeps of each allocation: enough to reach the dashboard's own frame
from the store's decoding of a row."""
DASHBOARD_FILES = str(Path(a2pg.dashboard.__file__).parent / "*")


def _held_by_the_dashboard() -> int:
    """Bytes traced now that were allocated with one of the dashboard's frames on the
    stack: what its tails read, rendered and keep (not the store's own copies)."""
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(True, DASHBOARD_FILES, all_frames=True)]
    )
    return sum(trace.size for trace in snapshot.traces)


async def _settled() -> None:
    """Until the traced memory stops moving (the tails' reads and renders are done)."""
    last = -1
    for _ in range(100):
        gc.collect()
        now = tracemalloc.get_traced_memory()[0]
        if abs(now - last) < 64 * 1024:
            return
        last = now
        await asyncio.sleep(0.1)
