"""``a2pg bench --sync off``: the database's ``synchronous_commit`` off for the run, then back.

``ALTER DATABASE ... SET`` reaches every connection opened afterwards (and none opened
before), whichever driver opens it: psycopg for a2pg, asyncpg for pgqueuer, the
bench's worker processes. So it is applied before anything connects and undone in a
``finally``: a setting the database had of its own is put back, else it is reset.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Literal

import psycopg
from psycopg import sql

from ..postgres.dsn import to_libpq

Sync = Literal["on", "off"]
SYNC_CHOICES: tuple[Sync, ...] = ("on", "off")
SETTING = "synchronous_commit"

OWN_SETTING = """
select s.setconfig from pg_db_role_setting s
  join pg_database d on d.oid = s.setdatabase
 where d.datname = current_database() and s.setrole = 0
"""


async def database_setting(dsn: str) -> str | None:
    """The ``synchronous_commit`` the current database sets for itself, if it does."""
    async with await psycopg.AsyncConnection.connect(to_libpq(dsn), autocommit=True) as conn:
        cur = await conn.execute(OWN_SETTING)
        row = await cur.fetchone()
    for entry in row[0] if row and row[0] else []:
        name, _, value = str(entry).partition("=")
        if name == SETTING:
            return value
    return None


async def _alter(dsn: str, value: str | None) -> None:
    async with await psycopg.AsyncConnection.connect(to_libpq(dsn), autocommit=True) as conn:
        cur = await conn.execute("select current_database()")
        row = await cur.fetchone()
        database = sql.Identifier(str(row[0]) if row else "")
        if value is None:
            statement = sql.SQL("alter database {} reset {}")
            await conn.execute(statement.format(database, sql.Identifier(SETTING)))
        else:
            statement = sql.SQL("alter database {} set {} = {}")
            await conn.execute(
                statement.format(database, sql.Identifier(SETTING), sql.Literal(value))
            )


@contextlib.asynccontextmanager
async def synchronous_commit(dsn: str, sync: Sync) -> AsyncIterator[None]:
    """``off``: the database's connections opened inside commit without waiting for the WAL
    flush, until the block ends. ``on``: nothing changes (the server's own setting)."""
    if sync == "on":
        yield
        return
    before = await database_setting(dsn)
    await _alter(dsn, "off")
    try:
        yield
    finally:
        await _alter(dsn, before)


async def effective(dsn: str) -> str:
    """``show synchronous_commit`` on a fresh connection: what new connections run with."""
    async with await psycopg.AsyncConnection.connect(to_libpq(dsn), autocommit=True) as conn:
        cur = await conn.execute("show synchronous_commit")
        row = await cur.fetchone()
    return str(row[0]) if row else "unknown"
