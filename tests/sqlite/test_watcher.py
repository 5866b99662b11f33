"""Wakeups and streams hear other connections' commits by the change signal alone.

The store under test polls nothing else for an hour (``poll_interval``): what reaches
its wakeups and streams within the bounded waits below came from ``PRAGMA data_version``
read every ``change_interval``. The writer is another store on the same file: another
connection pair, as another process's would be.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from a2pg import NewEvent, Target
from a2pg.sqlite import SqliteStore

from ..worker.helpers import bounded

HOUR = 3600.0


async def test_another_connections_append_wakes_by_the_change_signal(tmp_path: Path) -> None:
    path = tmp_path / "a2.db"
    watching = await SqliteStore.open(path, migrate=True, poll_interval=HOUR)
    writer = await SqliteStore.open(path)
    try:
        wakeups = watching.wakeups()
        assert await bounded(anext(wakeups)) is None  # the first look: "something may be new"
        await writer.append("s", [NewEvent("job", targets=[Target("c")])])
        assert await bounded(anext(wakeups)) == "s"
        await wakeups.aclose()
    finally:
        await writer.close()
        await watching.close()


async def test_another_connections_append_reaches_a_stream(tmp_path: Path) -> None:
    path = tmp_path / "a2.db"
    watching = await SqliteStore.open(path, migrate=True, poll_interval=HOUR)
    writer = await SqliteStore.open(path)
    try:
        stream = watching.stream("s")
        first = asyncio.ensure_future(anext(stream))
        await writer.append("s", [NewEvent("one", id="e1")])
        assert (await bounded(first)).id == "e1"
        await writer.append("s", [NewEvent("two", id="e2")])
        assert (await bounded(anext(stream))).id == "e2"
        await stream.aclose()  # type: ignore[attr-defined]
    finally:
        await writer.close()
        await watching.close()
