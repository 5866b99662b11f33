"""Cheap counts the demo and bench poll while workers run: events, live heads, dead letters.

These read the a2_ tables directly (one statement, no locks) because the Store
protocol has no "how much work is left everywhere" call, and polling every session
through the protocol would load the database more than the work being measured.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from .connect import configure_connection
from .queries import query


@dataclass(frozen=True, slots=True)
class Counts:
    """``events``: events ever appended (the sum of session heads: one small row per
    session, where counting the events table would scan it); ``live``: heads still to
    run (held, backing off or ready); ``dead``: dead-lettered heads."""

    events: int
    live: int
    dead: int


class Probe:
    """One autocommit connection that answers ``counts()`` and ``connected(prefix)``."""

    def __init__(self, conn: psycopg.AsyncConnection[tuple[int, ...]]) -> None:
        self._conn = conn

    @classmethod
    async def connect(cls, dsn: str, schema: str | None) -> Probe:
        """A probe of the store in ``schema`` (None: the connection's own search_path),
        whose connection is set up as the store's are."""
        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        try:
            if schema is not None:
                await configure_connection(schema)(conn)
        except BaseException:
            await conn.close()
            raise
        return cls(conn)

    async def counts(self) -> Counts:
        cur = await self._conn.execute(query("probe_counts"))
        row = await cur.fetchone()
        assert row is not None
        return Counts(int(row[0]), int(row[1]), int(row[2]))

    async def connected(self, prefix: str) -> int:
        """How many distinct ``application_name``s starting with ``prefix`` are connected."""
        cur = await self._conn.execute(query("probe_connected"), {"prefix": prefix + "%"})
        row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def server_version(self) -> str:
        return self._conn.info.parameter_status("server_version") or "unknown"

    async def close(self) -> None:
        await self._conn.close()
