"""Cheap counts the demo and bench poll while workers run: events, live heads, dead letters.

These read the a2_ tables directly (one statement, no locks) because the Store
protocol has no "how much work is left everywhere" call, and polling every session
through the protocol would load the database more than the work being measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from .connect import CONNECT_TIMEOUT, connect, timeout_seconds
from .dsn import to_libpq
from .layout import DEFAULT_SCHEMA, check_schema
from .queries import Statements, statements


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

    def __init__(self, conn: psycopg.AsyncConnection[Any], statements: Statements) -> None:
        self._conn = conn
        self._statements = statements
        self._seen: set[str] = set()

    @classmethod
    async def connect(cls, dsn: str, schema: str | None) -> Probe:
        """A probe of the store in ``schema`` (None: a2pg's default schema).

        It never prepares statements (they run about once a second: preparing would
        save nothing), so it works through any pooler, PgBouncer in transaction mode
        included.
        """
        schema = check_schema(DEFAULT_SCHEMA if schema is None else schema)
        conn = await connect(
            to_libpq(dsn),
            autocommit=True,
            prepare_threshold=None,
            connect_timeout=timeout_seconds(CONNECT_TIMEOUT),
        )
        return cls(conn, statements(schema))

    async def counts(self) -> Counts:
        cur = await self._conn.execute(self._statements.query("probe_counts"))
        row = await cur.fetchone()
        assert row is not None
        return Counts(int(row[0]), int(row[1]), int(row[2]))

    async def connected(self, prefix: str) -> int:
        """How many distinct ``application_name``s starting with ``prefix`` this probe has
        seen connected, now or at an earlier call.

        Remembered across calls: behind a transaction-mode pooler a server connection
        shows the name of the last client it served, so clients that are all connected
        may never show at the same instant.
        """
        cur = await self._conn.execute(
            self._statements.query("probe_connected"), {"prefix": prefix + "%"}
        )
        self._seen.update(str(row[0]) for row in await cur.fetchall())
        return sum(1 for name in self._seen if name.startswith(prefix))

    async def server_version(self) -> str:
        return self._conn.info.parameter_status("server_version") or "unknown"

    async def server(self) -> str:
        """The database, for reports: ``PostgreSQL 15.4``."""
        return f"PostgreSQL {await self.server_version()}"

    async def close(self) -> None:
        await self._conn.close()
