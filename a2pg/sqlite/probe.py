"""Cheap counts the demo and bench poll while workers run: events, live heads, dead letters.

Like ``a2pg.postgres.probe``, this reads the a2_ tables directly (one statement) on a
connection of its own: the Store protocol has no "how much work is left everywhere"
call, and polling every session through it would load the file more than the work.
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from .connection import connect
from .database import one


@dataclass(frozen=True, slots=True)
class Counts:
    """``events``: events ever appended (the sum of session heads); ``live``: heads still to
    run (held, backing off or ready); ``dead``: dead-lettered heads."""

    events: int
    live: int
    dead: int


class SqliteProbe:
    """One read connection of its own that answers ``counts()``."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._lock = asyncio.Lock()

    @classmethod
    async def connect(cls, path: Path) -> SqliteProbe:
        return cls(await asyncio.to_thread(connect, path))

    async def counts(self) -> Counts:
        async with self._lock:  # one thread at a time on the connection
            row = await asyncio.to_thread(one, self._conn, "probe_counts")
        assert row is not None
        return Counts(int(row["events"]), int(row["live"]), int(row["dead"]))

    async def close(self) -> None:
        async with self._lock:
            await asyncio.to_thread(self._conn.close)


def version() -> str:
    """The SQLite library's version, for reports."""
    return sqlite3.sqlite_version
