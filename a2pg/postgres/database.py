"""PostgresStore's plumbing: the pool, autocommit statements, pipelined write transactions.

Every operation of the store is either one named statement on an autocommit
connection (``Database.run``) or one short write transaction (``Database.write``)
whose body gets an explicit ``Tx``: the connection, the clock, the NOTIFY channel
and what the transaction will announce once committed. The area modules (``log``,
``claims``, ``completions``, ``snapshots``, ``clear``) are functions of a ``Tx``;
none of them reads the store's attributes. Every call runs under a deadline
(``deadlines``): the store's ``call_timeout``, pool wait and retries included.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, LiteralString, TypeVar

import psycopg
from psycopg import AsyncConnection, AsyncCursor, AsyncPipeline, AsyncRawCursor, postgres, sql
from psycopg.adapt import Dumper
from psycopg.pq import TransactionStatus
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool

from ..ids import Clock, IdGenerator
from . import codec
from .deadlines import CALL_TIMEOUT, Abandoner, Deadline
from .errors import CallTimeout, log, retrying
from .queries import OffGroup, Positional, Statements
from .shards import ShardGroup, Shards, live_connection, moved
from .writes import SessionHead, WritePlan

T = TypeVar("T")

Conn = AsyncConnection[Any]
Params = dict[str, Any]
Statement = LiteralString | bytes | sql.Composed
Finish = Callable[[], Awaitable[T]]
"""What a write transaction computes once committed (it may fetch queued results)."""


class OffNode(Exception):
    """A transaction that could not run on its session's node and wrote nothing there:
    a statement read a table outside the shard group, or (``moved``) the node no
    longer holds the shard. The caller runs it through the coordinator."""

    def __init__(self, *, moved: bool) -> None:
        super().__init__("moved" if moved else "off the shard group")
        self.moved = moved


RECONNECT_PROBE = 0.5
"""Seconds between the store's own tries of a lost server while requests wait on the pool."""

MAX_INDEX = 2**63 - 1
"""The largest index a bigint holds: the ``through`` of an unbounded read."""


async def execute(
    conn: Conn, statement: Statement, params: Params | None = None, *, prepare: bool | None = None
) -> AsyncCursor[DictRow]:
    """Runs one statement with dict rows (queued when the connection is pipelined)."""
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(statement, params, prepare=prepare)
    return cur


async def execute_positional(
    conn: Conn, statement: Positional, params: Params
) -> AsyncCursor[DictRow]:
    """Runs a ``Positional`` statement on a raw cursor: sent as it is, with no placeholder
    parse (queued when the connection is pipelined)."""
    cur: AsyncRawCursor[DictRow] = AsyncRawCursor(conn, row_factory=dict_row)
    await cur.execute(statement.text, statement.values(params))
    return cur


class ServerNow(str):
    """A timestamptz parameter that is the server's time: the text ``'now'``, typed, which
    PostgreSQL reads when it binds it (the transaction's start). Untyped, Citus would
    pass it on to a worker node that cannot tell its type."""

    __slots__ = ()


class _ServerNowDumper(Dumper):
    oid = postgres.types["timestamptz"].oid

    def dump(self, obj: object) -> bytes:
        return b"now"


psycopg.adapters.register_dumper(ServerNow, _ServerNowDumper)
SERVER_NOW = ServerNow("now")


def finished(value: T) -> Finish[T]:
    """A finisher for a value already known before the commit."""

    async def finish() -> T:
        return value

    return finish


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


DRAIN_TRIES = 3


async def drain_pipeline(conn: Conn, pipeline: AsyncPipeline) -> None:
    """After a statement of a pipeline failed: collects what the server still owes for
    the statements queued behind it (each one "pipeline aborted"), so that leaving the
    pipeline finds nothing left, and psycopg logs no WARNING ("error ignored terminating
    ... pipeline aborted") beside the error the caller raises anyway."""
    for _ in range(DRAIN_TRIES):
        if conn.closed or not (pipeline.result_queue or pipeline.command_queue):
            return
        with contextlib.suppress(psycopg.Error):
            await pipeline.sync()


@dataclass(frozen=True, slots=True)
class Joined:
    """The rows of one statement run once per session (``Statements.by_session``), read as
    the rows of one cursor."""

    cursors: list[AsyncCursor[DictRow]]

    async def fetchall(self) -> list[DictRow]:
        return [row for cur in self.cursors for row in await cur.fetchall()]

    async def fetchone(self) -> DictRow | None:
        rows = await self.fetchall()
        return rows[0] if rows else None


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


Announce = Callable[[Sequence[str], Sequence[str]], None]
"""Tells this store's streams and wakeups what a commit did: ``(appended, work)`` sessions."""


@dataclass(slots=True)
class Tx:
    """One pipelined write transaction: what an area function needs, and nothing else.

    Statements queued with ``execute`` travel with the next fetch or the commit. The
    function records what to announce after the commit in ``plan``, ``notify`` and
    ``work``.
    """

    conn: Conn
    statements: Statements
    channel: str
    clock: Clock | None
    new_id: IdGenerator
    plan: WritePlan | None = None
    notify: AsyncCursor[DictRow] | None = None
    """The NOTIFY statement's cursor: its rows name the sessions notified."""
    work: set[str] = field(default_factory=set)
    """Sessions where this transaction made work claimable without a NOTIFY statement."""
    hold_notify: bool = False
    """Set when the transaction claims after its writes: the NOTIFY waits in ``held`` for
    ``notify_held``, so it names only work the claim left to others."""
    held: set[str] = field(default_factory=set)
    held_now: datetime | None = None

    def query(self, name: str, *, limit: int | None = None) -> bytes:
        """Statement ``name`` rendered for the store's schema (see ``queries.Statements``)."""
        return self.statements.query(name, limit=limit)

    async def execute(
        self, statement: Statement, params: Params | None = None
    ) -> AsyncCursor[DictRow]:
        if isinstance(statement, bytes) and params is not None:
            parts = self.statements.by_session(statement, dict(params))
            if len(parts) > 1:  # on Citus: one statement per session, in order
                cursors = [await execute(self.conn, statement, part) for part in parts]
                return Joined(cursors)  # type: ignore[return-value]
            params = parts[0]
        return await execute(self.conn, statement, params)

    async def execute_positional(
        self, statement: Positional, params: Params
    ) -> AsyncCursor[DictRow]:
        return await execute_positional(self.conn, statement, params)

    def now_param(self) -> datetime | None:
        """The injected clock's time, or None: SQL then takes the server's."""
        return None if self.clock is None else self.clock()

    async def lock(self, session_ids: Sequence[str], *, ensure: bool = False) -> Locked:
        """Queues the session-row locks (creating the rows first when ``ensure``) and the
        read of the server's clock; the caller queues its reads, then awaits ``result``."""
        if ensure:
            for session_id in session_ids:
                params = {"session_id": session_id, "now": self.now_param()}
                await self.execute(self.query("ensure_session"), params)
        locked = await self.execute(
            self.query("lock_sessions"), {"session_ids": sorted(set(session_ids))}
        )
        clock = None if self.clock is not None else await self.execute(self.query("server_now"))
        return Locked(locked, clock, self.clock)

    def new_plan(self, now: datetime, sessions: dict[str, SessionHead]) -> WritePlan:
        return WritePlan(now=now, new_id=self.new_id, sessions=sessions)

    async def apply(self, plan: WritePlan, *, notify: bool = True) -> None:
        """Queues the plan's writes and, unless ``notify`` is off, its NOTIFY."""
        self.plan = plan
        await plan.apply(self.conn, statements=self.statements)
        if notify:
            await self.notify_ready(plan.touched, plan.now)

    async def notify_ready(self, session_ids: set[str], now: datetime | None) -> None:
        """Queues the NOTIFY of the sessions where this transaction made a head claimable
        at ``now`` (None: the transaction's time), or holds it (``hold_notify``)."""
        if self.hold_notify:
            self.held |= session_ids
            self.held_now = now
        elif session_ids:
            params = {"channel": self.channel, "session_ids": sorted(session_ids), "now": now}
            self.notify = await self.execute(self.query("notify_ready"), params)

    async def notify_held(self) -> None:
        """Queues the held NOTIFY, after the statements that may have claimed its work."""
        self.hold_notify = False
        held, self.held = self.held, set()
        await self.notify_ready(held, self.held_now)


class Database:
    """Runs the store's statements and transactions on its pool, retrying transient failures."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        *,
        statements: Statements,
        channel: str,
        prepare: bool = True,
        clock: Clock | None,
        new_id: IdGenerator,
        announce: Announce,
        call_timeout: float = CALL_TIMEOUT,
    ) -> None:
        self.pool = pool
        self.statements = statements
        self.channel = channel
        self.prepare = prepare
        self.clock = clock
        self.new_id = new_id
        self._announce = announce
        self._pool_check: asyncio.Task[None] | None = None
        self._deadlines = Abandoner(call_timeout)
        self.shards: Shards | None = None
        """On Citus, the shard groups the claims go round (``shards``)."""

    @property
    def call_timeout(self) -> float:
        """Seconds each call may take (``deadlines``): pool wait, retries, round trips."""
        return self._deadlines.call_timeout

    @call_timeout.setter
    def call_timeout(self, seconds: float) -> None:
        self._deadlines.close()
        self._deadlines = Abandoner(seconds)

    def query(self, name: str, *, limit: int | None = None) -> bytes:
        """Statement ``name`` rendered for the store's schema (see ``queries.Statements``)."""
        return self.statements.query(name, limit=limit)

    @asynccontextmanager
    async def connection(
        self, deadline: Deadline | None = None, pool: AsyncConnectionPool[Any] | None = None
    ) -> AsyncIterator[Conn]:
        """A connection of the pool (of ``pool``: a Citus node's, ``live_connection``);
        with ``prepare`` off, psycopg prepares nothing on it (also on a pool passed in,
        whose connections the store did not make). Under a ``deadline`` the connection
        is abandoned when it passes, until the pool has it back (see ``deadlines``):
        what fails then is ``CallTimeout``, which ``retrying`` neither retries nor takes
        for a lost connection."""
        try:
            async with self.pool.connection() if pool is None else live_connection(pool) as conn:
                if deadline is not None:
                    deadline.attach(conn)
                if not self.prepare:
                    conn.prepare_threshold = None
                yield conn
        except psycopg.Error as exc:
            if deadline is None or not deadline.expired or isinstance(exc, CallTimeout):
                raise
            raise deadline.error() from exc
        finally:
            if deadline is not None:
                deadline.detach()

    async def _call(self, operation: Callable[[Deadline], Awaitable[T]], *, idempotent: bool) -> T:
        """``operation`` (one whole statement or transaction), again after a transient
        failure, all within the store's ``call_timeout`` (else ``CallTimeout``)."""
        async with self._deadlines.deadline() as deadline:
            return await retrying(
                lambda: operation(deadline),
                idempotent=idempotent,
                on_connection_lost=self._check_pool_soon,
            )

    async def load_shards(self) -> None:
        """Reads Citus's map of shard groups (``shards``) again, within the store's
        ``call_timeout`` and retried like any read."""
        shards = self.shards
        assert shards is not None

        async def run(deadline: Deadline) -> None:
            async with self.connection(deadline) as conn:
                await shards.load(conn)

        await self._call(run, idempotent=True)

    def now_param(self) -> datetime | None:
        """The injected clock's time, or None: SQL then takes the server's."""
        return None if self.clock is None else self.clock()

    def moment(self) -> datetime | ServerNow:
        """The injected clock's time, or :data:`SERVER_NOW`, which PostgreSQL reads when it
        binds the parameter (the transaction's start): a constant, where Citus allows no
        function's call."""
        injected = self.now_param()
        return SERVER_NOW if injected is None else injected

    def _payloads(self, rows: Sequence[DictRow]) -> list[str]:
        """On Citus, the notifications the rows of a statement hold (``notify_payloads``;
        see ``notify_ready@citus``)."""
        if self.statements.dialect != "citus" or not rows or "notify_payloads" not in rows[0]:
            return []
        return sorted({p for row in rows for p in row["notify_payloads"] or ()})

    async def _notify(self, conn: Conn, rows: Sequence[DictRow]) -> None:
        """On Citus, sends from the coordinator (``conn``) the notifications the rows of a
        committed statement hold."""
        payloads = self._payloads(rows)
        if payloads:
            await self._send(conn, payloads)

    async def _send(self, conn: Conn, payloads: list[str]) -> None:
        assert self.shards is not None  # payloads come from Citus's statements alone
        params = {"channel": self.channel, "payloads": payloads,
                  "sessions": self.shards.sessions_table}  # fmt: skip
        await execute(conn, self.query("notify_sessions"), params)

    async def run(
        self, statement: Statement, params: Params, *, idempotent: bool = True
    ) -> list[DictRow]:
        """One statement on an autocommit connection (retried when transient); its rows."""

        async def run(deadline: Deadline) -> list[DictRow]:
            async with self.connection(deadline) as conn:
                cur = await execute(conn, statement, params)
                rows = await cur.fetchall() if cur.description is not None else []
                await self._notify(conn, rows)
                return rows

        return await self._call(run, idempotent=idempotent)

    async def write_one(
        self,
        statement: Positional,
        params: Params,
        *,
        idempotent: bool,
        declined: Callable[[psycopg.Error], bool] | None = None,
        pool: AsyncConnectionPool[Any] | None = None,
        session: str | None = None,
    ) -> list[DictRow] | None:
        """One writing statement on an autocommit connection (retried when transient): its
        rows, or None when it failed with an error ``declined`` recognises (nothing was
        written: the caller takes its transaction instead).

        ``pool``: a connection of that pool (a Citus node's, ``statement`` on its shards)
        instead of the store's; ``OffNode`` when the node does not hold them (any more).
        ``session``: the one session whose rows ``statement`` reads and writes: on Citus
        it then runs on the node of the session's shard group, as ``write`` says."""
        shards = self.shards
        if session is not None and shards is not None and pool is None:
            group = await self.session_group(session)
            if group is not None:
                try:
                    return await self.write_one(
                        shards.on_group(group, statement),
                        params,
                        idempotent=idempotent,
                        declined=declined,
                        pool=await shards.pool(group.node),
                    )
                except OffNode:
                    await self.load_shards()  # the shard moved: the coordinator knows where

        async def run(deadline: Deadline) -> list[DictRow] | None:
            async with self.connection(deadline, pool) as conn:
                try:
                    cur = await execute_positional(conn, statement, params)
                except psycopg.Error as exc:
                    if declined is not None and declined(exc):
                        return None
                    if pool is not None and moved(exc):
                        raise OffNode(moved=True) from exc
                    raise
                rows = await cur.fetchall()
                if pool is None:
                    await self._notify(conn, rows)
                    return rows
            await self._notify_committed(deadline, rows)
            return rows

        return await self._call(run, idempotent=idempotent)

    async def _notify_committed(self, deadline: Deadline, rows: Sequence[DictRow]) -> None:
        """Sends from the coordinator the notifications of a statement a node committed.
        A failure here is logged, not raised: the write stands (a retry would run it
        twice), and listeners find its work when they next poll."""
        payloads = self._payloads(rows)
        if not payloads:
            return
        try:
            async with self.connection(deadline) as conn:
                await self._send(conn, payloads)
        except psycopg.Error as exc:
            log.warning(
                "a2pg sent no notification of a write a Citus node committed (listeners "
                "find its work when they next poll): %s",
                exc,
            )

    def announce(self, appended: Sequence[str], work: Sequence[str]) -> None:
        """Tells this store's streams and wakeups what a commit did (``Announce``)."""
        self._announce(appended, work)

    async def write(
        self,
        body: Callable[[Tx], Awaitable[Finish[T]]],
        *,
        idempotent: bool,
        session: str | None = None,
    ) -> T:
        """Runs ``body`` in one pipelined transaction (retried when transient), then its
        finisher, then announces what it committed to this store's streams and wakeups.

        Statements ``body`` queues without fetching travel with the commit: a body that
        fetches once (its reads) costs two round trips in all.

        ``session``: the one session whose rows ``body`` reads and writes. On Citus the
        transaction then runs on the node of the session's shard group, on its shards
        (``Shards.statements``), unless one of its statements reads a table outside the
        group or the node no longer holds the shard: then (nothing written there)
        through the coordinator.
        """
        shards = self.shards
        if session is not None and shards is not None:
            group = await self.session_group(session)
            if group is not None:
                try:
                    return await self._write(body, idempotent, group)
                except OffNode as exc:
                    if exc.moved:
                        await self.load_shards()
        return await self._write(body, idempotent, None)

    async def _write(
        self,
        body: Callable[[Tx], Awaitable[Finish[T]]],
        idempotent: bool,
        group: ShardGroup | None,
    ) -> T:
        statements, pool = self.statements, None
        if group is not None:
            assert self.shards is not None
            statements = self.shards.statements(group)
            pool = await self.shards.pool(group.node)

        async def run(deadline: Deadline) -> T:
            async with self.connection(deadline, pool) as conn:
                tx = Tx(conn, statements, self.channel, self.clock, self.new_id)
                try:
                    # BEGIN and COMMIT are queued like any statement: psycopg's
                    # transaction() would add round trips of its own in pipeline mode.
                    async with conn.pipeline() as pipeline:
                        try:
                            await conn.execute("begin")
                            finish = await body(tx)
                            await conn.execute("commit")
                        except Exception:
                            await drain_pipeline(conn, pipeline)
                            raise
                except BaseException as exc:
                    await rollback(conn)
                    if isinstance(exc, OffGroup):
                        raise OffNode(moved=False) from exc
                    if pool is not None and isinstance(exc, psycopg.Error) and moved(exc):
                        raise OffNode(moved=True) from exc
                    raise
                value = await finish()
                notified = [] if tx.notify is None else await tx.notify.fetchall()
                if pool is None:
                    await self._notify(conn, notified)
            if pool is not None:
                await self._notify_committed(deadline, notified)
            appended = () if tx.plan is None else sorted(tx.plan.appended)
            self._announce(appended, [*tx.work, *(row["session_id"] for row in notified)])
            return value

        return await self._call(run, idempotent=idempotent)

    async def session_group(self, session_id: str) -> ShardGroup | None:
        """On Citus, the shard group that holds ``session_id``'s rows, as far as the map
        knows: Citus's answer (``session_shard``), asked once per session."""
        shards = self.shards
        assert shards is not None
        shard = shards.shard_of(session_id)
        if shard is None:
            params = {"sessions": shards.sessions_table, "session_id": session_id}
            [row] = await self.run(self.query("session_shard"), params)
            shard = int(row["shard"])
            shards.remember(session_id, shard)
        return shards.group_of_shard(shard)

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
            await self.pool.check()
        except Exception as exc:  # the server may still be down: the next failure retries
            log.info("checking the pool's connections failed: %s", exc)
        await self._reconnect_promptly()

    async def _reconnect_promptly(self) -> None:
        """psycopg_pool retries a lost server with a doubling delay (1, 2, 4, 8... s), so
        after an outage of a minute its requests may wait another minute for the next
        try. While requests wait and no connection is free, this tries the server itself
        every ``RECONNECT_PROBE`` seconds and, once it answers, has the pool connect now
        (``resize`` to one more than ``min_size`` starts a fresh attempt; back at once)."""
        while not self.pool.closed:  # until the pool has a connection or the server answers
            await asyncio.sleep(RECONNECT_PROBE)
            stats = self.pool.get_stats()
            if stats.get("pool_available", 0) > 0:
                return
            conninfo = self.pool.conninfo
            if not stats.get("requests_waiting") or not isinstance(conninfo, str):
                continue
            try:
                probe = await AsyncConnection.connect(conninfo, connect_timeout=2)
            except psycopg.Error:
                continue
            await probe.close()
            low, high = self.pool.min_size, self.pool.max_size
            if low < high:
                await self.pool.resize(low + 1, high)
                await self.pool.resize(low, high)
            return

    def close(self) -> None:
        """Stops a pool check in progress and the cancel requests of abandoned statements
        (the pool itself belongs to whoever opened it)."""
        if self._pool_check is not None:
            self._pool_check.cancel()
        self._deadlines.close()
