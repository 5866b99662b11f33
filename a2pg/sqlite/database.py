"""SqliteStore's plumbing: one writer and one reader connection, write transactions, reads.

Every write of the store is one ``BEGIN IMMEDIATE`` transaction on the process's one
writer connection: it takes the file's write lock at once, so the transaction reads
what no other process can change before it commits (what PostgreSQL's row locks and
SKIP LOCKED give the PostgreSQL store), and other processes' writes wait for it
(``busy_timeout``). The body of a transaction is a plain function of a ``Tx`` that
runs on the writer's thread from BEGIN to COMMIT, so no other write of this process
interleaves with it and nothing in it waits on the event loop. Reads run on the
reader connection, which in WAL mode never waits for the writer.

The area modules (``log``, ``claims``, ``completions``, ``snapshots``, ``clear``) are
functions of a ``Tx`` (writes) or of a ``sqlite3.Connection`` (reads); none of them
reads the store's attributes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from ..contract.rules import due_at
from ..errors import A2Error
from ..ids import Clock, IdGenerator
from . import codec
from .connection import Connection
from .queries import statement

T = TypeVar("T")

Params = Mapping[str, Any]

MAX_INDEX = 2**63 - 1
"""The largest index SQLite's integer holds: the ``through`` of an unbounded read."""

DUPLICATE_ID = "a2_events.session_id, a2_events.event_id"
"""What SQLite names in the unique-index error of an event id taken twice."""


def one(conn: sqlite3.Connection, name: str, params: Params | None = None) -> sqlite3.Row | None:
    """The first row of statement ``name``, if any."""
    row: sqlite3.Row | None = conn.execute(statement(name), params or {}).fetchone()
    return row


def rows(conn: sqlite3.Connection, name: str, params: Params | None = None) -> list[sqlite3.Row]:
    return conn.execute(statement(name), params or {}).fetchall()


def run(conn: sqlite3.Connection, name: str, params: Params | None = None) -> int:
    """Runs statement ``name``; the rows it changed."""
    return conn.execute(statement(name), params or {}).rowcount


@dataclass(frozen=True, slots=True)
class SessionHead:
    """A session as a transaction finds it: its head (0: no events) and clear index."""

    session_id: str
    head: int
    clear_index: int

    @property
    def exists(self) -> bool:
        """A session is its events: one with none was never written."""
        return self.head > 0


def session_head(conn: sqlite3.Connection, session_id: str) -> SessionHead:
    row = one(conn, "session_head", {"session_id": session_id})
    assert row is not None
    return SessionHead(session_id, int(row["head"]), int(row["clear_index"]))


@dataclass(slots=True)
class Tx:
    """One write transaction as its body sees it: the connection, the transaction's time
    (read once, under the write lock) and what to announce once it commits."""

    conn: sqlite3.Connection
    now: datetime
    new_id: IdGenerator
    appended: set[str] = field(default_factory=set)
    """Sessions this transaction appended to: their streams read again."""
    work: set[str] = field(default_factory=set)
    """Sessions where this transaction made a head claimable now."""

    @property
    def now_us(self) -> int:
        return codec.micros(self.now)

    def due_us(self, not_before: datetime | timedelta | None) -> int | None:
        """A target's due time as stored, if later than this transaction's time."""
        due = due_at(not_before, self.now)
        return None if due is None else codec.micros(due)

    def one(self, name: str, params: Params | None = None) -> sqlite3.Row | None:
        return one(self.conn, name, params)

    def rows(self, name: str, params: Params | None = None) -> list[sqlite3.Row]:
        return rows(self.conn, name, params)

    def run(self, name: str, params: Params | None = None) -> int:
        return run(self.conn, name, params)

    def session(self, session_id: str) -> SessionHead:
        return session_head(self.conn, session_id)


Announce = Callable[[Sequence[str], Sequence[str]], None]
"""Tells this store's streams and wakeups what a commit did: ``(appended, work)`` sessions."""


class Database:
    """The writer and reader connections of one store, and the clock and ids writes use."""

    def __init__(
        self,
        writer: Connection,
        reader: Connection,
        *,
        clock: Clock,
        new_id: IdGenerator,
        announce: Announce,
    ) -> None:
        self.writer = writer
        self.reader = reader
        self.clock = clock
        self.new_id = new_id
        self._announce = announce

    async def write(self, body: Callable[[Tx], T]) -> T:
        """Runs ``body`` in one ``BEGIN IMMEDIATE`` transaction on the writer's thread, then
        announces what it committed to this store's streams and wakeups."""

        def transaction(conn: sqlite3.Connection) -> tuple[T, Tx]:
            conn.execute("begin immediate")
            try:
                tx = Tx(conn, self.clock(), self.new_id)
                value = body(tx)
                conn.execute("commit")
            except BaseException as exc:
                if conn.in_transaction:
                    conn.execute("rollback")
                if isinstance(exc, sqlite3.IntegrityError) and DUPLICATE_ID in str(exc):
                    raise A2Error(
                        "PARTIAL_DUPLICATE_BATCH", "an event id of the batch is already stored"
                    ) from None
                raise
            return value, tx

        value, tx = await self.writer.call(transaction)
        if tx.appended or tx.work:
            self._announce(sorted(tx.appended), sorted(tx.work))
        return value

    async def read(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """Runs ``body`` on the reader's thread, in one read transaction (one snapshot)."""

        def transaction(conn: sqlite3.Connection) -> T:
            conn.execute("begin")
            try:
                return body(conn)
            finally:
                conn.execute("commit")

        return await self.reader.call(transaction)

    def now(self) -> datetime:
        return self.clock()

    async def close(self) -> None:
        await self.writer.close()
        await self.reader.close()
