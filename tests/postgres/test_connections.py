"""Reaching the database: a pool of your own, a named schema, an unmigrated database, and
which driver errors are retried."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors as pg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from a2pg import A2Error
from a2pg.postgres import PostgresStore, configure_connection
from a2pg.postgres.errors import RetryPolicy, retrying
from a2pg.postgres.migrate import upgrade
from a2pg.testing import scratch_database
from tests.postgres.support import work

pytestmark = pytest.mark.postgres


async def test_a_named_schema_is_quoted_everywhere(postgres_server_dsn: str) -> None:
    schema = 'A2 "odd" schema'
    with scratch_database(postgres_server_dsn, "a2pg_pg_schema") as dsn:
        upgrade(dsn, schema=schema)
        store = await PostgresStore.open(dsn, schema=schema)
        try:
            await store.append("s", work(), consumers=[])
            [head] = await store.claim_any(holder="h", ttl=30)
            assert head.session_id == "s"
            async with await psycopg.AsyncConnection.connect(dsn) as conn:
                cur = await conn.execute(
                    sql.SQL("select count(*) from {}.a2_events").format(sql.Identifier(schema))
                )
                assert await cur.fetchone() == (1,)
        finally:
            await store.close()


async def test_an_unmigrated_database_is_not_configured(postgres_server_dsn: str) -> None:
    with scratch_database(postgres_server_dsn, "a2pg_pg_empty") as dsn:
        with pytest.raises(A2Error) as error:
            await PostgresStore.open(dsn)
        assert error.value.code == "STORE_NOT_CONFIGURED"
        assert "a2pg migrate" in str(error.value)


async def test_a_pool_of_your_own_must_be_configured(postgres_dsn: str) -> None:
    plain = AsyncConnectionPool(postgres_dsn, min_size=1, open=False)
    await plain.open()
    try:
        with pytest.raises(A2Error) as error:
            await PostgresStore.open(plain)
        assert error.value.code == "INVALID_ARGUMENT"
    finally:
        await plain.close()
    configured = AsyncConnectionPool(
        postgres_dsn,
        min_size=1,
        kwargs={"autocommit": True},
        configure=configure_connection("public"),
        open=False,
    )
    await configured.open()
    try:
        store = await PostgresStore.open(configured)
        await store.append("s", work(), consumers=[])
        await store.close()
        assert not configured.closed
    finally:
        await configured.close()


async def test_deadlocks_are_retried_and_lost_connections_only_when_idempotent() -> None:
    policy = RetryPolicy(attempts=3, first_delay=0.001)
    calls = 0

    async def deadlocks_once() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise pg.DeadlockDetected("deadlock detected")
        return "done"

    assert await retrying(deadlocks_once, idempotent=False, policy=policy) == "done"

    async def connection_lost() -> str:
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    with pytest.raises(psycopg.OperationalError):
        await retrying(connection_lost, idempotent=False, policy=policy)

    async def other_error() -> str:
        raise pg.DivisionByZero("division by zero")

    with pytest.raises(pg.DivisionByZero):
        await retrying(other_error, idempotent=True, policy=policy)
