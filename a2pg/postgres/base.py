"""PostgresStore's plumbing: the pool, transactions, session locks, clock and registry cache."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, LiteralString, TypeVar

import psycopg
from psycopg import AsyncConnection, AsyncCursor, sql
from psycopg.pq import TransactionStatus
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool

from .. import validation as check
from ..ids import Clock, IdGenerator, uuid7
from ..models import Consumer, StoredEvent
from ..validation import Limits
from . import codec
from .errors import log, retrying
from .listen import Listener
from .queries import query
from .writes import SessionHead, WritePlan

T = TypeVar("T")

Conn = AsyncConnection[Any]
Params = dict[str, Any]
Finish = Callable[[], Awaitable[T]]
"""What a write transaction computes once committed (it may fetch queued results)."""

MAX_INDEX = 2**63 - 1
"""The largest index a bigint holds: the ``through`` of an unbounded read."""

STREAM_BATCH = 256
"""Events a stream reads per look at the table."""

CHANNEL_PREFIX = "a2pg_"
MAX_CHANNEL_BYTES = 63


def channel_name(schema: str) -> str:
    """The NOTIFY channel of a schema: ``a2pg_<schema>``, cut to PostgreSQL's 63 bytes."""
    raw = (CHANNEL_PREFIX + schema).encode()[:MAX_CHANNEL_BYTES]
    return raw.decode(errors="ignore")


async def execute(
    conn: Conn,
    statement: LiteralString | bytes | sql.Composed,
    params: Params | None = None,
    *,
    prepare: bool | None = None,
) -> AsyncCursor[DictRow]:
    """Runs one statement with dict rows (queued when the connection is pipelined)."""
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(statement, params, prepare=prepare)
    return cur


async def rollback(conn: Conn) -> None:
    """Ends a failed transaction so the connection goes back to the pool clean.

    ``conn.rollback()``, not a ROLLBACK statement: psycopg then deallocates its
    prepared statements at once (the server dropped those of the failed transaction);
    after a ROLLBACK statement it would do so later, inside the next pipeline, after
    statements it prepares there.
    """
    if conn.closed or conn.info.transaction_status == TransactionStatus.IDLE:
        return
    with contextlib.suppress(psycopg.Error):
        await conn.rollback()


def finished(value: T) -> Finish[T]:
    """A finisher for a value already known before the commit."""

    async def finish() -> T:
        return value

    return finish


@dataclass(frozen=True, slots=True)
class Locked:
    """Session locks queued on a pipelined transaction, and its clock reading."""

    rows: AsyncCursor[DictRow]
    clock: AsyncCursor[DictRow] | None
    injected: Clock | None

    async def result(self) -> tuple[dict[str, SessionHead], datetime]:
        """The locked sessions (missing ones absent) and the transaction's time: the injected
        clock's, or the server's read under the locks."""
        rows = await self.rows.fetchall()
        sessions = {
            row["session_id"]: SessionHead(
                row["session_id"], int(row["head"]), int(row["clear_index"])
            )
            for row in rows
        }
        if self.clock is None:
            assert self.injected is not None
            return sessions, self.injected()
        row = await self.clock.fetchone()
        assert row is not None
        return sessions, codec.utc(row["now"])


@dataclass(slots=True)
class Committed:
    """What a write transaction announces once it has committed."""

    plan: WritePlan | None = None
    notify: AsyncCursor[DictRow] | None = None


class StoreBase:
    """Holds the pool and settings; runs reads and write transactions for the store."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        *,
        schema: str,
        owns_pool: bool,
        connect: Callable[[], Awaitable[Conn]],
        clock: Clock | None,
        ids: IdGenerator | None,
        limits: Limits,
        registry_ttl: float,
        poll_interval: float,
    ) -> None:
        self._pool = pool
        self._schema = schema
        self._owns_pool = owns_pool
        self._clock = clock
        self._new_id = ids or uuid7
        self._limits = limits
        self._registry_ttl = registry_ttl
        self._registry_cache: tuple[float, list[Consumer]] | None = None
        self._channel = channel_name(schema)
        self._pool_check: asyncio.Task[None] | None = None
        self._listener = Listener(
            connect=connect, channel=self._channel, poll_interval=poll_interval, clock=clock
        )

    @property
    def schema(self) -> str:
        return self._schema

    @property
    def pool(self) -> AsyncConnectionPool[Any]:
        return self._pool

    def _now_param(self) -> datetime | None:
        """The injected clock's time, or None: SQL then takes the server's."""
        return None if self._clock is None else self._clock()

    def _check_pool_soon(self) -> None:
        """After a lost connection (a server restart, a failover) the pool's other idle
        connections are likely dead too: test them all now, in the background, so that
        one operation fails instead of one per pooled connection."""
        if self._pool_check is None or self._pool_check.done():
            self._pool_check = asyncio.get_running_loop().create_task(
                self._check_pool(), name="a2pg-pool-check"
            )

    async def _check_pool(self) -> None:
        try:
            await self._pool.check()
        except Exception as exc:  # the server may still be down: the next failure retries
            log.info("checking the pool's connections failed: %s", exc)

    # -- running statements ----------------------------------------------------------------

    async def _read(self, name: str, params: Params, *, idempotent: bool = True) -> list[DictRow]:
        """The named statement on an autocommit connection; its rows."""
        return await self._autocommit(query(name), params, idempotent=idempotent)

    async def _autocommit(
        self, statement: LiteralString | bytes, params: Params, *, idempotent: bool
    ) -> list[DictRow]:
        """One statement on an autocommit connection (retried when transient); its rows."""

        async def run() -> list[DictRow]:
            async with self._pool.connection() as conn:
                cur = await execute(conn, statement, params)
                return await cur.fetchall() if cur.description is not None else []

        return await retrying(run, idempotent=idempotent, on_connection_lost=self._check_pool_soon)

    async def _write(
        self, body: Callable[[Conn, Committed], Awaitable[Finish[T]]], *, idempotent: bool
    ) -> T:
        """Runs ``body`` in one pipelined transaction (retried when transient), then its
        finisher, then announces what it committed to this store's streams and wakeups.

        Statements ``body`` queues without fetching travel with the commit: a body that
        fetches once (its reads) costs two round trips in all.
        """

        async def run() -> T:
            committed = Committed()
            async with self._pool.connection() as conn:
                try:
                    # BEGIN and COMMIT are queued like any statement: psycopg's
                    # transaction() would add round trips of its own in pipeline mode.
                    async with conn.pipeline():
                        await conn.execute("begin")
                        finish = await body(conn, committed)
                        await conn.execute("commit")
                except BaseException:
                    await rollback(conn)
                    raise
                value = await finish()
                notified = [] if committed.notify is None else await committed.notify.fetchall()
            self._announce(committed.plan, [row["session_id"] for row in notified])
            return value

        return await retrying(run, idempotent=idempotent, on_connection_lost=self._check_pool_soon)

    def _announce(self, plan: WritePlan | None, notified: Sequence[str]) -> None:
        if plan is not None:
            for session_id in plan.appended:
                self._listener.committed(session_id)
        for session_id in notified:
            self._listener.work(session_id)

    async def _lock(
        self, conn: Conn, session_ids: Sequence[str], *, ensure: bool = False
    ) -> Locked:
        """Queues the session-row locks (creating the rows first when ``ensure``) and the
        read of the server's clock; the caller queues its reads, then awaits ``result``."""
        if ensure:
            for session_id in session_ids:
                params = {"session_id": session_id, "now": self._now_param()}
                await execute(conn, query("ensure_session"), params)
        locked = await execute(
            conn, query("lock_sessions"), {"session_ids": sorted(set(session_ids))}
        )
        clock = None if self._clock is not None else await execute(conn, query("server_now"))
        return Locked(locked, clock, self._clock)

    def _plan(self, now: datetime, sessions: dict[str, SessionHead]) -> WritePlan:
        return WritePlan(now=now, new_id=self._new_id, sessions=sessions)

    # -- consumer registry -----------------------------------------------------------------

    async def _registry(self) -> list[Consumer]:
        """The registered log consumers, cached for ``registry_ttl`` seconds: a registration
        made elsewhere reaches this store's writes within that bound, one made here at once."""
        cached = self._registry_cache
        now = time.monotonic()
        if cached is not None and now - cached[0] < self._registry_ttl:
            return cached[1]
        rows = await self._read("registered_consumers", {})
        consumers = [codec.consumer(row) for row in rows]
        self._registry_cache = (now, consumers)
        return consumers

    def _forget_registry(self) -> None:
        self._registry_cache = None

    async def _wake_set(self, consumers: Sequence[Consumer] | None) -> Sequence[Consumer]:
        """The log consumers a write wakes: those named, else the registered ones."""
        return await self._registry() if consumers is None else consumers

    def _checked_consumers(self, consumers: Sequence[Consumer] | None) -> Sequence[Consumer] | None:
        return check.check_consumers(consumers, self._limits)

    # -- reading events --------------------------------------------------------------------

    async def _events_after(
        self,
        session_id: str,
        *,
        after: int,
        through: int | None = None,
        types: Sequence[str] | None = None,
        limit: int | None = None,
        visible: bool = True,
    ) -> list[StoredEvent]:
        rows = await self._read(
            "read_events",
            {
                "session_id": session_id,
                "visible": visible,
                "after": min(after, MAX_INDEX),
                "through": MAX_INDEX if through is None else min(through, MAX_INDEX),
                "types": None if types is None else list(types),
                "limit": None if limit is None else min(limit, MAX_INDEX),
            },
        )
        return [codec.event(row) for row in rows]

    async def _stream_batch(
        self, session_id: str, last: int, *, visible: bool
    ) -> list[StoredEvent]:
        return await self._events_after(session_id, after=last, limit=STREAM_BATCH, visible=visible)
