"""Monitoring reads on SQLite judge what they read at the time they read it.

The store's reader thread may be busy when ``consumer_stats`` or ``workers`` is called;
the time their counts are judged by must be read with the rows, not before the call
waits its turn, or a write committed meanwhile (by this process or another) is judged
by a time older than itself: a head released meanwhile counted as backing off.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

from a2pg import NewEvent, Target
from a2pg.ids import FakeClock
from a2pg.models import AttemptRef, ConsumerStats
from a2pg.sqlite import SqliteStore

from ..worker.helpers import bounded


async def test_consumer_stats_judge_heads_at_the_time_of_their_read(tmp_path: Path) -> None:
    clock = FakeClock()
    store = await SqliteStore.open(tmp_path / "a2.db", migrate=True, clock=clock)
    try:
        await store.append("s", [NewEvent("job", targets=[Target("w")])])
        [head] = await store.claim_any(holder="h", ttl=60)
        gate = threading.Event()

        def busy(conn: sqlite3.Connection) -> None:
            gate.wait(10)

        blocker = asyncio.ensure_future(store._db.reader.call(busy))  # a read under way
        stats = asyncio.ensure_future(store.consumer_stats())
        await asyncio.sleep(0)  # consumer_stats is called, its read waits its turn
        clock.advance(1)
        ref = AttemptRef("w", None, head.event.index, head.dispatch.attempt_count)
        await store.release_claims("s", holder="h", claims=[ref])  # ready from now on
        gate.set()
        await bounded(blocker)
        [w] = await bounded(stats)
        assert w == ConsumerStats("w", 1, 0, 0, 0, 0, 0, 0.0, False)
    finally:
        await store.close()
