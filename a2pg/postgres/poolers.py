"""What stands between a store and PostgreSQL, seen from its connections at ``open()``.

A transaction-mode pooler (PgBouncer ``pool_mode = transaction``) hands each
transaction of a client to whichever server connection is free. psycopg names the
statements it prepares ``_pg3_0``, ``_pg3_1``... per client connection, so two
clients' statements of one name meet on one server connection: one fails with
``prepared statement "_pg3_0" already exists``, another runs a statement the other
client prepared, with its schema in it. Told ``pooler="transaction"``, a store
prepares nothing; this module keeps a store that was not told from ever running a
statement it did not prepare:

- ``probe``, at ``open()``, tells a direct connection, a pooler that keeps each client
  on one server connection, and one that moves it (and whether that one keeps each
  client's prepared statements, as PgBouncer 1.21+ with ``max_prepared_statements``
  above 0 does); ``settle`` then refuses the store, or runs it as if told.
- ``number_statements`` starts each connection's statement names at a random number
  (``_pg3_4821...``): whatever the probe saw, two connections' names never meet, so a
  missing statement fails, and never runs another's.
- ``ready`` bounds a new connection's first statement: a pooler whose server
  connections are all taken queues it (for ``query_wait_timeout``, 120 s by
  PgBouncer's default); the store says so within its ``connect_timeout`` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, LiteralString, TypeVar

import psycopg
from psycopg import AsyncConnection, sql
from psycopg import errors as pg

from ..errors import invalid

T = TypeVar("T")
Conn = AsyncConnection[Any]
Connect = Callable[[], Awaitable[Conn]]
Seen = Literal["none", "session", "transaction"]

BACKEND_PID: LiteralString = "select pg_catalog.pg_backend_pid()"
PREPARED_PID: LiteralString = "select pg_catalog.pg_backend_pid() as a2pg_probe"
"""The probe's prepared statement (its own text, so psycopg keeps it apart)."""
SHARED_PID: LiteralString = (
    "select pg_catalog.pg_backend_pid(), exists (select from pg_catalog.pg_prepared_statements"
    " where name = %s)"
)

BACKSTOP = 1.0
"""Seconds after hanging up on a statement that its wait is cancelled, should nothing
wake it."""

FIRST_STATEMENT = 1 << 32
STATEMENT_SPREAD = 1 << 46
"""A connection's first statement is ``_pg3_N``, N drawn from FIRST_STATEMENT on within
STATEMENT_SPREAD: never among a fresh psycopg connection's ``_pg3_0``, ``_pg3_1``...,
and two connections' ranges (a few hundred names each) all but never overlap."""

UNDECLARED = (
    "PostgreSQL is reached through a transaction-mode pooler (PgBouncer pool_mode = "
    "transaction?), where prepared statements would mix between connections: pass "
    '--pooler transaction (A2PG_POOLER=transaction, or pooler="transaction" in '
    "PostgresStore.open)"
)
"""The one line an undeclared transaction-mode pooler gets (``INVALID_ARGUMENT``)."""


def no_server(within: float, *, pooled: bool = True) -> psycopg.OperationalError:
    """The error of a new connection's statement left unanswered: behind a pooler
    (``pooled``; else perhaps) its server connections ran out."""
    if pooled:
        what = (
            f"the pooler in front of PostgreSQL gave a new connection no server "
            f"connection within {within:g}s (it ran out of them"
        )
    else:
        what = (
            f"a new connection got no answer within {within:g}s (a pooler in front of "
            "PostgreSQL that ran out of server connections keeps new ones waiting"
        )
    return psycopg.OperationalError(
        f"{what}; in session mode each client connection holds one: see 'Connections' "
        "in docs/operating/poolers.md)"
    )


@dataclass(frozen=True, slots=True)
class Route:
    """What the probe saw: ``pooler`` is ``none`` (the server itself answered),
    ``session`` (a pooler that keeps each client on one server connection) or
    ``transaction`` (a client's transactions ran on different server connections, or
    two clients' on one); ``keeps_prepared``: a transaction pooler carried this
    client's prepared statement to other server connections (PgBouncer 1.21+ with
    ``max_prepared_statements`` above 0)."""

    pooler: Seen
    keeps_prepared: bool = False


DIRECT = Route("none")


def number_statements(conn: Conn, start: int | None = None) -> bool:
    """Makes psycopg name ``conn``'s next prepared statement ``_pg3_<start>`` (default:
    a random number, see ``FIRST_STATEMENT``); False where this psycopg keeps its
    counter elsewhere (the names then stay psycopg's own)."""
    manager = getattr(conn, "_prepared", None)
    if not isinstance(getattr(manager, "_prepared_idx", None), int):
        return False
    if start is None:
        start = FIRST_STATEMENT + secrets.randbelow(STATEMENT_SPREAD)
    manager._prepared_idx = start  # type: ignore[union-attr]
    return True


def _hang_up(conn: Conn) -> None:
    """Shuts ``conn``'s socket down: its pending read fails at once (a cancelled psycopg
    statement would first wait for the server to answer its cancel request)."""
    # On a duplicate of the descriptor: closing it leaves libpq's own to libpq.
    with (
        contextlib.suppress(OSError, psycopg.Error),
        socket.fromfd(conn.pgconn.socket, socket.AF_INET, socket.SOCK_STREAM) as sock,
    ):
        sock.shutdown(socket.SHUT_RDWR)


async def _bounded(conn: Conn, step: Awaitable[T], within: float, *, pooled: bool) -> T:
    """``step`` on ``conn`` in ``within`` seconds, else ``no_server`` (``conn`` then hung up)."""
    expired = False

    def expire() -> None:
        nonlocal expired
        expired = True
        _hang_up(conn)

    handle = asyncio.get_running_loop().call_later(within, expire)
    try:
        async with asyncio.timeout(within + BACKSTOP):
            return await step
    except (psycopg.Error, TimeoutError):
        if expired:
            raise no_server(within, pooled=pooled) from None
        raise
    finally:
        handle.cancel()


async def _pid(
    conn: Conn, statement: LiteralString, within: float, *, prepare: bool, pooled: bool = True
) -> int:
    async def run() -> int:
        cur = await conn.execute(statement, prepare=prepare)
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])

    return await _bounded(conn, run(), within, pooled=pooled)


async def ready(conn: Conn, within: float) -> None:
    """A new connection's first statement in ``within`` seconds (else ``no_server``): behind
    a session-mode pooler the connection holds a server connection from then on."""
    try:
        await _pid(conn, BACKEND_PID, within, prepare=False)
    except BaseException:
        with contextlib.suppress(Exception):
            await conn.close()
        raise


async def probe(conn: Conn, second: Connect, *, prepare: bool, within: float) -> Route:
    """Which ``Route`` ``conn`` (autocommit, idle) takes to PostgreSQL; ``prepare``:
    whether the store may prepare statements (then the probe prepares one).

    PostgreSQL tells a client its server process's id when it connects; a pooler tells
    one of its own (it cannot promise that process will serve the client). So when
    ``conn.info.backend_pid`` is ``pg_backend_pid()``, nothing is in between and one
    statement is the whole probe. Otherwise five statements, each in ``within`` seconds
    (``no_server`` past it), run one after another, never two at once (a pooler with a
    single server connection answers them all):

    1. ``conn``: its server connection's pid;
    2. ``conn``: the same, as a prepared statement ``_pg3_<random>`` (with ``prepare``);
    3. ``second`` (a new connection): its server connection's pid, and whether a
       statement of that name is prepared there;
    4. and 5. ``conn``: the prepared statement again.

    A direct connection or a session-mode pooler keeps ``conn`` on one server
    connection that no other client uses, whatever happens: one pid in steps 1, 2, 4
    and 5, another in 3, every step answered. A transaction-mode pooler cannot avoid
    showing otherwise: handing out its most recently used server connection first
    (PgBouncer's default), it gives ``second`` the one ``conn`` just used; handing out
    the longest idle (``server_round_robin = 1``), it gives ``conn`` another server
    connection in step 2, 4 or 5 (with one idle server connection, ``second`` gets
    it). Its prepared statement is kept when it ran on another server connection
    than the one it was made on, or ``second`` shared that one and did not find it
    under ``conn``'s name (the pooler renamed it: it tracks prepared statements).
    """
    first = await _pid(conn, BACKEND_PID, within, prepare=False, pooled=False)
    if first == conn.info.backend_pid:
        return DIRECT
    prepares = prepare and conn.prepare_threshold is not None
    name = ""
    if prepares:
        start = FIRST_STATEMENT + secrets.randbelow(STATEMENT_SPREAD)
        prepares = number_statements(conn, start)
        name = f"_pg3_{start}"
    lost = False

    async def prepared() -> int | None:
        nonlocal lost
        try:
            return await _pid(conn, PREPARED_PID, within, prepare=prepares)
        except (pg.InvalidSqlStatementName, pg.DuplicatePreparedStatement):
            lost = True  # run where it was never made (psycopg prepares, then runs)
            return None

    other = await second()  # within the connect timeout (libpq's)
    try:
        made = await prepared()

        async def shared() -> tuple[int, bool]:
            cur = await other.execute(SHARED_PID, (name,), prepare=False)
            row = await cur.fetchone()
            assert row is not None
            return int(row[0]), bool(row[1])

        theirs, found = await _bounded(other, shared(), within, pooled=True)
    finally:
        with contextlib.suppress(Exception):
            await other.close()
    later = [await prepared(), await prepared()]
    mine = {first, made, *later}
    if not lost and len(mine) == 1 and theirs not in mine:
        return Route("session")
    moved_with_it = any(pid != made for pid in later)
    renamed = theirs == made and not found
    kept = prepares and not lost and not found and (moved_with_it or renamed)
    if prepares and not kept:
        await _forget(conn, name, within)
    return Route("transaction", keeps_prepared=kept)


async def _forget(conn: Conn, name: str, within: float) -> None:
    """Deallocates the probe's statement where ``conn`` runs now, which is most likely
    where it was made (a pooler that does not keep prepared statements would leave it
    on that server connection for its lifetime); elsewhere, it is not there: no harm."""
    statement = sql.SQL("deallocate {}").format(sql.Identifier(name))
    with contextlib.suppress(psycopg.Error):
        await _bounded(conn, conn.execute(statement, prepare=False), within, pooled=True)


def settle(route: Route | None, declared: str, *, prepare: bool) -> bool:
    """Whether a store told ``pooler=declared`` (not ``transaction``) must run as behind a
    transaction-mode pooler: True when the probe saw one and the store may run there
    (it prepares nothing, or the pooler keeps prepared statements); ``UNDECLARED``
    (``INVALID_ARGUMENT``) when it would prepare statements there that mix."""
    if declared == "transaction" or route is None or route.pooler != "transaction":
        return False
    if prepare and not route.keeps_prepared:
        raise invalid(UNDECLARED)
    return True


def configure(*, within: float, first_statement: bool) -> Callable[[Conn], Awaitable[None]]:
    """The store's pool's ``configure``: random statement names (``number_statements``)
    and, behind a pooler, the first statement in ``within`` seconds (``ready``)."""

    async def configure(conn: Conn) -> None:
        number_statements(conn)
        if first_statement:
            await ready(conn, within)

    return configure
