"""Appends on the application's connection, inside its transaction (``PostgresStore.append_in``).

An application that commits its own rows and then calls ``append`` makes two commits (a
dual write): a crash between them keeps one without the other. ``append_in`` runs the
store's append (``log.append`` and its ``WritePlan``, through a ``Tx``) on the
application's ``psycopg.AsyncConnection`` instead, inside the transaction it has open,
and begins and commits nothing of its own: the events, their cursors and the session's
head commit or roll back with the application's rows. The NOTIFY that wakes workers is
queued inside that transaction, and PostgreSQL delivers it only when it commits.

A connection the store does not own is used with care:

- nothing is prepared on it (it may sit behind a transaction-mode pooler): every
  statement runs with ``prepare=False``, on a cursor of its own with an explicit row
  factory; its ``row_factory``, ``autocommit``, ``prepare_threshold``, search_path and
  settings are never touched (the statements are schema-qualified already);
- no deadline of the store applies, no statement timeout is set and nothing is retried:
  a failed statement dooms the caller's transaction, which only the caller can run
  again, and the caller's own timeouts (``statement_timeout``, ``asyncio.timeout``) bound
  the call;
- each call's statements run in a savepoint (``SAVEPOINT``), pipelined like the store's
  own transactions: when the append raises, the caller's transaction is as it was before
  the call (when the call began it, it is rolled back, and the connection is idle again).

A connection to a database or schema without the store's layout fails a statement; the
error path reads the layout on that connection and raises its ``STORE_NOT_CONFIGURED``
(the happy path pays nothing for the check).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg import AsyncConnection, AsyncCursor, AsyncRawCursor
from psycopg import errors as pg
from psycopg.pq import TransactionStatus
from psycopg.rows import DictRow, TupleRow, dict_row, tuple_row

from ..contract.args import AppendArgs
from ..errors import A2Error, invalid
from ..ids import Clock, IdGenerator
from ..models import AppendResult, Consumer
from . import codec, log
from .database import Conn, Finish, Params, Statement, Tx, drain_pipeline
from .errors import translated
from .layout import inspect_async
from .queries import Positional, Statements
from .writes import WritePlan

T = TypeVar("T")

SAVEPOINT = "a2pg_append_in"
"""The savepoint each call's statements run in, inside the caller's transaction."""

LAYOUT_ERRORS = (pg.UndefinedTable, pg.InvalidSchemaName, pg.UndefinedColumn)
"""What a statement fails with on a database or schema without the current layout."""

_STATES = {
    TransactionStatus.INERROR: "its transaction has failed (roll it back first)",
    TransactionStatus.ACTIVE: "a statement of it is still running (or its pipeline has "
    "results to fetch: sync it first)",
    TransactionStatus.UNKNOWN: "it is broken",
}


def check_connection(conn: object) -> Conn:
    """The caller's connection, if an append can join its transaction (else
    ``INVALID_ARGUMENT``, having touched nothing): an open ``psycopg.AsyncConnection``
    idle in a transaction, or idle and not in autocommit (the append's first statement
    then begins the transaction, which the caller commits)."""
    if isinstance(conn, psycopg.Connection):
        raise invalid(
            "conn must be a psycopg.AsyncConnection; got a sync psycopg.Connection "
            "(open the application's connection with psycopg.AsyncConnection.connect)"
        )
    if not isinstance(conn, AsyncConnection):
        raise invalid(f"conn must be a psycopg.AsyncConnection, got {type(conn).__name__}")
    if conn.closed:
        raise invalid("conn is closed")
    status = conn.info.transaction_status
    if status == TransactionStatus.IDLE and conn.autocommit:
        raise invalid(
            "conn is in autocommit mode outside a transaction: the events would commit "
            "on their own; open one first (async with conn.transaction(): ...)"
        )
    why = _STATES.get(status)
    if why is not None:
        raise invalid(f"conn cannot take the append: {why}")
    return conn


class _Unprepared:
    """What ``WritePlan.apply`` uses of a connection (``execute``), on the caller's: each
    statement on a cursor of its own, tuple rows, never prepared."""

    __slots__ = ("_conn",)

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    async def execute(
        self, query: Statement, params: Params | None = None
    ) -> AsyncCursor[TupleRow]:
        cur = self._conn.cursor(row_factory=tuple_row)
        await cur.execute(query, params, prepare=False)
        return cur


class CallerTx(Tx):
    """A ``Tx`` over a connection the store does not own: the area functions run on it as
    on the store's, but nothing they send is prepared and every cursor names its rows."""

    __slots__ = ()

    async def execute(
        self, statement: Statement, params: Params | None = None
    ) -> AsyncCursor[DictRow]:
        cur = self.conn.cursor(row_factory=dict_row)
        await cur.execute(statement, params, prepare=False)
        return cur

    async def execute_positional(
        self, statement: Positional, params: Params
    ) -> AsyncCursor[DictRow]:
        cur: AsyncRawCursor[DictRow] = AsyncRawCursor(self.conn, row_factory=dict_row)
        await cur.execute(statement.text, statement.values(params), prepare=False)
        return cur

    async def apply(self, plan: WritePlan, *, notify: bool = True) -> None:
        """``Tx.apply`` with the plan's writes sent unprepared (``_Unprepared``)."""
        self.plan = plan
        await plan.apply(_Unprepared(self.conn), statements=self.statements)
        if notify:
            await self.notify_ready(plan.touched, plan.now)


class Caller:
    """One ``append_in`` on the caller's connection (checked by ``check_connection``): each
    ``run`` is a savepoint of the caller's transaction; the first one begins that
    transaction if the connection was idle. ``async with`` it: a call that began the
    transaction and then raises (between runs too) leaves the connection idle again."""

    def __init__(
        self,
        conn: Conn,
        *,
        statements: Statements,
        channel: str,
        clock: Clock | None,
        new_id: IdGenerator,
    ) -> None:
        self.conn = conn
        self.statements = statements
        self.channel = channel
        self.clock = clock
        self.new_id = new_id
        self._began = False
        """Whether this call began the caller's transaction (rolled back whole on failure)."""

    async def __aenter__(self) -> Caller:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if kind is not None:
            await self._leave()

    async def _leave(self) -> None:
        """Rolls back the transaction this call began (nothing of the caller's is in it)."""
        if self._began and not self.conn.closed:
            with contextlib.suppress(psycopg.Error):
                await self.conn.rollback()

    async def run(self, body: Callable[[CallerTx], Awaitable[Finish[T]]]) -> T:
        """``body`` in a savepoint, pipelined as ``Database.write`` runs it (what it queues
        travels with the savepoint's release: two round trips for a body that fetches
        once), then its finisher; when anything fails, the savepoint is rolled back (the
        whole transaction, if this call began it) and the error raised as the store raises
        it (a missing layout: ``STORE_NOT_CONFIGURED``)."""
        conn = self.conn
        if conn.info.transaction_status == TransactionStatus.IDLE:
            self._began = True
        try:
            with translated():
                async with conn.pipeline() as pipeline:
                    try:
                        await self._command(f"savepoint {SAVEPOINT}")
                        tx = CallerTx(conn, self.statements, self.channel, self.clock, self.new_id)
                        finish = await body(tx)
                        await self._command(f"release savepoint {SAVEPOINT}")
                    except Exception:
                        await drain_pipeline(conn, pipeline)
                        raise
                return await finish()  # reads what the pipeline's end fetched
        except BaseException as exc:
            await self._undo(exc)
            raise

    async def _command(self, text: Statement) -> None:
        cur = self.conn.cursor(row_factory=tuple_row)
        await cur.execute(text, prepare=False)

    async def _undo(self, exc: BaseException) -> None:
        """Back to the savepoint (so the layout can be read), then, if this call began the
        transaction, out of it. A missing layout raises its ``STORE_NOT_CONFIGURED``."""
        with contextlib.suppress(psycopg.Error):
            await self._command(f"rollback to savepoint {SAVEPOINT}")
            await self._command(f"release savepoint {SAVEPOINT}")
        found = None
        cause = exc.__cause__ if isinstance(exc, A2Error) else exc
        if isinstance(cause, LAYOUT_ERRORS) and not self.conn.closed:
            with contextlib.suppress(psycopg.Error):
                found = await layout_error(self.conn, self.statements.schema)
        await self._leave()
        if found is not None:
            raise found from exc

    async def wake_set(self, consumers: Sequence[Consumer] | None) -> Sequence[Consumer]:
        """The log consumers the append wakes: those named, else the registry as the
        caller's transaction reads it (never through the store's pool)."""
        if consumers is not None:
            return consumers

        async def registered(tx: CallerTx) -> Finish[list[Consumer]]:
            cur = await tx.execute(tx.query("registered_consumers"))

            async def finish() -> list[Consumer]:
                return [codec.consumer(row) for row in await cur.fetchall()]

            return finish

        return await self.run(registered)

    async def append(self, args: AppendArgs, wake: Sequence[Consumer]) -> AppendResult:
        """``log.append`` in the caller's transaction (nothing written for an empty batch)."""
        if not args.events:

            async def pending(tx: CallerTx) -> Finish[AppendResult]:
                params = log.has_pending(args.session_id, args.consumers)
                flag = await tx.execute(tx.query("has_pending"), params)

                async def finish() -> AppendResult:
                    return AppendResult([], await log.pending_flag(flag))

                return finish

            return await self.run(pending)
        ids = log.event_ids(args, self.new_id)
        return await self.run(lambda tx: log.append(tx, args, wake, ids))


async def layout_error(conn: AsyncConnection[Any], schema: str) -> A2Error | None:
    """The ``STORE_NOT_CONFIGURED`` of ``schema`` as ``conn`` sees it, or None when its
    layout is current; read in its transaction (``layout.inspect_async``: cursors of its
    own, nothing prepared)."""
    status = await inspect_async(conn, schema)
    return None if status.is_current else status.error()
