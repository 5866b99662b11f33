"""How PostgresStore's connections are set up, and the check of a pool passed in."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from psycopg import AsyncConnection, sql

from ..errors import invalid
from .base import Conn, execute

Configure = Callable[[AsyncConnection[Any]], Awaitable[None]]


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
