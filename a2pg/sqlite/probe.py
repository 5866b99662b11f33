"""Cheap counts the demo and bench poll while workers run: events, live heads, dead letters.

Like ``a2pg.postgres.probe``, this reads the a2_ tables directly (one statement) on a
connection of its own: the Store protocol has no "how much work is left everywhere"
call, and polling every session through it would load the file more than the work.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Mapping, Sequence
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
    """One read connection of its own that answers ``counts()`` (and the bench's reads)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._lock = asyncio.Lock()

    @classmethod
    async def connect(cls, path: Path) -> SqliteProbe:
        return cls(await asyncio.to_thread(connect, path))

    async def _row(self, name: str, params: Mapping[str, object] | None = None) -> sqlite3.Row:
        async with self._lock:  # one thread at a time on the connection
            row = await asyncio.to_thread(one, self._conn, name, params)
        assert row is not None
        return row

    async def counts(self) -> Counts:
        row = await self._row("probe_counts")
        return Counts(int(row["events"]), int(row["live"]), int(row["dead"]))

    async def connected(self, prefix: str) -> None:
        """None: SQLite keeps no list of the connections to a file (the demo reads its
        workers' logs instead)."""
        return None

    async def server(self) -> str:
        """The database, for reports: ``SQLite 3.40.1``."""
        return f"SQLite {version()}"

    # -- what ``a2pg bench --sqlite`` reads of its own sessions (``a2pg.bench.phases.Ledger``)

    async def live_heads(self, ids: Sequence[str]) -> int:
        """Heads still to run (ready, held or backing off) in these sessions."""
        return int((await self._row("bench_live_heads", {"ids": json.dumps(list(ids))}))["n"])

    async def done(self, ids: Sequence[str], consumer: str) -> tuple[int, int]:
        """Event cursors of ``consumer`` in these sessions that completed their event, and
        how many of those by their first attempt."""
        params = {"ids": json.dumps(list(ids)), "consumer": consumer}
        row = await self._row("bench_cursors_done", params)
        return int(row["done"]), int(row["first"])

    async def lane_done(self, ids: Sequence[str], consumer: str) -> tuple[int, int]:
        """Lane events of ``consumer`` in these sessions completed, and how many of those by
        their first attempt."""
        params = {"ids": json.dumps(list(ids)), "consumer": consumer}
        row = await self._row("bench_lane_events_done", params)
        return int(row["done"]), int(row["first"])

    async def events_in(self, ids: Sequence[str]) -> int:
        return int((await self._row("bench_events_in", {"ids": json.dumps(list(ids))}))["n"])

    async def close(self) -> None:
        async with self._lock:
            await asyncio.to_thread(self._conn.close)


def version() -> str:
    """The SQLite library's version, for reports."""
    return sqlite3.sqlite_version
