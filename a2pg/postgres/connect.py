"""How PostgresStore's connections are set up, and the check of a pool passed in."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from psycopg import AsyncConnection, sql

from ..errors import invalid
from .database import Conn, execute

if TYPE_CHECKING:
    from .store import PostgresStore

Configure = Callable[[AsyncConnection[Any]], Awaitable[None]]

CONNECT_TIMEOUT = 10
"""Seconds ``open_store`` waits for the database before reporting it unreachable."""

_DRIVER_PREFIX = re.compile(r"^postgres(?:ql)?(?:\+\w+)?://")


def to_libpq_dsn(dsn: str) -> str:
    """``postgresql+psycopg://`` and ``postgres://`` URLs as libpq reads them; other DSNs as is."""
    return _DRIVER_PREFIX.sub("postgresql://", dsn, count=1)


def configure_connection(schema: str) -> Configure:
    """The pool ``configure`` callback a store needs: search_path on its schema, UTC.

    Pass it (with ``kwargs={"autocommit": True}``) when building a pool of your own
    for ``PostgresStore.open``.
    """
    statement = sql.SQL("set search_path to {}; set timezone to 'UTC'").format(
        sql.Identifier(schema)
    )

    async def configure(conn: AsyncConnection[Any]) -> None:
        await conn.execute(statement)

    return configure


async def check_pool_connection(conn: Conn, schema: str) -> None:
    """A pool passed in must hand out what the store's statements assume."""
    cur = await execute(conn, "select current_schema() as schema")
    row = await cur.fetchone()
    if not conn.autocommit or row is None or row["schema"] != schema:
        raise invalid(
            "the pool passed to PostgresStore.open must hand out autocommit connections "
            f"whose search_path is schema {schema!r}: build it with "
            f"kwargs={{'autocommit': True}}, configure=configure_connection({schema!r})"
        )


async def check_reachable(dsn: str) -> None:
    """Connects once, with a short timeout: an unreachable database fails in seconds with
    ``psycopg.OperationalError`` (a pool would keep retrying until its own timeout)."""
    conn = await AsyncConnection.connect(
        to_libpq_dsn(dsn), connect_timeout=CONNECT_TIMEOUT, autocommit=True
    )
    await conn.close()


@asynccontextmanager
async def open_store(dsn: str, schema: str | None = None) -> AsyncIterator[PostgresStore]:
    """A ``PostgresStore`` on a reachable (see ``check_reachable``), migrated database
    (``STORE_NOT_CONFIGURED`` otherwise), closed on exit."""
    await check_reachable(dsn)
    from .store import PostgresStore

    store = (
        await PostgresStore.open(dsn)
        if schema is None
        else await PostgresStore.open(dsn, schema=schema)
    )
    try:
        yield store
    finally:
        await store.close()
