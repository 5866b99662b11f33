"""The bench's bookkeeping: what it reads straight from the a2_ tables, and the server's settings.

Like ``a2pg.postgres.probe``, these statements bypass the store on purpose: they
count what a phase left behind (heads still live, heads completed exactly once) in
the phase's own sessions, one cheap statement at a time, while the work itself goes
through the public store and worker runtime. Every table is qualified with the schema
(``psycopg.sql.Identifier``), so one connection serves every schema the bench uses.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql

from ..postgres.dsn import to_libpq

LIVE_HEADS = """
select count(*) from {cursors}
 where session_id = any(%(ids)s::text[]) and head is not null and failed_at is null
"""

CURSORS_DONE = """
select count(*), count(*) filter (where completed_attempt = 1) from {cursors}
 where session_id = any(%(ids)s::text[]) and consumer = %(consumer)s
   and head is null and failed_at is null and completed_idx = position
"""

LANE_EVENTS_DONE = """
select count(*), count(*) filter (where completed_attempt = 1) from {lane_events}
 where session_id = any(%(ids)s::text[]) and consumer = %(consumer)s and done
"""

EVENTS_IN = "select coalesce(sum(head), 0) from {sessions} where session_id = any(%(ids)s::text[])"

SETTINGS = ("server_version", "fsync", "synchronous_commit")


class Ledger:
    """One autocommit connection for the bench's own reads and scratch objects."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn

    @classmethod
    async def connect(cls, dsn: str) -> Ledger:
        return cls(await psycopg.AsyncConnection.connect(to_libpq(dsn), autocommit=True))

    async def close(self) -> None:
        await self.conn.close()

    async def _row(self, template: str, schema: str, **params: Any) -> tuple[int, ...]:
        statement = sql.SQL(template).format(
            cursors=sql.Identifier(schema, "a2_cursors"),
            lane_events=sql.Identifier(schema, "a2_lane_events"),
            sessions=sql.Identifier(schema, "a2_sessions"),
        )
        cur = await self.conn.execute(statement, params)
        row = await cur.fetchone()
        return tuple(int(value) for value in row) if row else (0, 0)

    async def live_heads(self, schema: str, ids: Sequence[str]) -> int:
        """Heads still to run (ready, held or backing off) in these sessions."""
        return (await self._row(LIVE_HEADS, schema, ids=list(ids)))[0]

    async def done(self, schema: str, ids: Sequence[str], consumer: str) -> tuple[int, int]:
        """Event cursors of ``consumer`` in these sessions that completed their event (a
        cursor completes once, then idles), and how many of those by their first attempt."""
        done, first = await self._row(CURSORS_DONE, schema, ids=list(ids), consumer=consumer)
        return done, first

    async def lane_done(self, schema: str, ids: Sequence[str], consumer: str) -> tuple[int, int]:
        """Lane events of ``consumer`` in these sessions completed, and how many of those
        by their first attempt."""
        done, first = await self._row(LANE_EVENTS_DONE, schema, ids=list(ids), consumer=consumer)
        return done, first

    async def events_in(self, schema: str, ids: Sequence[str]) -> int:
        """Events these sessions hold (the sum of their heads)."""
        return (await self._row(EVENTS_IN, schema, ids=list(ids)))[0]

    def of(self, schema: str) -> SchemaLedger:
        """These reads in one schema (``phases.Ledger``, which names no schema)."""
        return SchemaLedger(self, schema)

    async def machine(self) -> dict[str, Any]:
        """What the figures depend on: cores, server and its durability, Python, date."""
        found: dict[str, str] = {}
        for name in SETTINGS:
            cur = await self.conn.execute(sql.SQL("show {}").format(sql.Identifier(name)))
            row = await cur.fetchone()
            found[name] = str(row[0]) if row else "unknown"
        return {
            "cpu_cores": os.cpu_count(),
            "postgres": found["server_version"],
            "fsync": found["fsync"],
            "synchronous_commit": found["synchronous_commit"],
            "python": platform.python_version(),
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
        }

    async def drop_schema(self, schema: str) -> None:
        await self.conn.execute(
            sql.SQL("drop schema if exists {} cascade").format(sql.Identifier(schema))
        )


@dataclass(frozen=True, slots=True)
class SchemaLedger:
    """A ledger's reads of the store in one schema."""

    ledger: Ledger
    schema: str

    async def live_heads(self, ids: Sequence[str]) -> int:
        return await self.ledger.live_heads(self.schema, ids)

    async def done(self, ids: Sequence[str], consumer: str) -> tuple[int, int]:
        return await self.ledger.done(self.schema, ids, consumer)

    async def lane_done(self, ids: Sequence[str], consumer: str) -> tuple[int, int]:
        return await self.ledger.lane_done(self.schema, ids, consumer)

    async def events_in(self, ids: Sequence[str]) -> int:
        return await self.ledger.events_in(self.schema, ids)


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the platform has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None
