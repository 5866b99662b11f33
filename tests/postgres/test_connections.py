"""Reaching the database: a pool of your own, a named schema, an unmigrated database, an
unreachable or silent server, the pooler settings, and which driver errors are retried."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import errors as pg
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool

from a2pg import A2Error
from a2pg.postgres import PostgresStore, configure_connection
from a2pg.postgres.backend import env_pooler, env_prepare, open_store, outage
from a2pg.postgres.errors import RetryPolicy, connection_lost, retrying
from a2pg.postgres.migrate import upgrade
from a2pg.testing import scratch_database
from tests.postgres.support import work

SECRET = "s3cret-Pa55word"

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


async def test_a_pool_of_your_own_needs_autocommit_and_nothing_else(postgres_dsn: str) -> None:
    plain = AsyncConnectionPool(postgres_dsn, min_size=1, open=False)
    await plain.open()
    try:
        with pytest.raises(A2Error, match="autocommit") as error:
            await PostgresStore.open(plain)
        assert error.value.code == "INVALID_ARGUMENT"
    finally:
        await plain.close()
    # No search_path, whatever it is: configure_connection is kept for old code only.
    elsewhere = make_conninfo(postgres_dsn, options="-c search_path=pg_catalog")
    for configure in (None, configure_connection("public")):
        pool = AsyncConnectionPool(
            elsewhere, min_size=1, kwargs={"autocommit": True}, configure=configure, open=False
        )
        await pool.open()
        try:
            store = await PostgresStore.open(pool)
            await store.append("s", work(), consumers=[])
            await store.close()
            assert not pool.closed
        finally:
            await pool.close()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections and never answers (a hung server)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_an_unreachable_server_fails_at_once_and_no_log_holds_the_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dsn = f"postgresql://a2pg:{SECRET}@127.0.0.1:{closed_port()}/nowhere"
    started = time.monotonic()
    with caplog.at_level(logging.DEBUG), pytest.raises(psycopg.OperationalError) as failed:
        await PostgresStore.open(dsn, connect_timeout=3)
    assert time.monotonic() - started < 3
    assert SECRET not in str(failed.value)
    assert failed.value.__cause__ is None and failed.value.__suppress_context__
    assert SECRET not in caplog.text


async def test_a_silent_server_fails_open_within_the_connect_timeout(silent_port: int) -> None:
    dsn = f"postgresql://a2pg:{SECRET}@127.0.0.1:{silent_port}/nowhere"

    async def through_the_cli_path() -> None:
        async with open_store(dsn, connect_timeout=2):
            pass

    for opening in (lambda: PostgresStore.open(dsn, connect_timeout=2), through_the_cli_path):
        started = time.monotonic()
        with pytest.raises(psycopg.OperationalError) as failed:
            await opening()
        assert time.monotonic() - started < 8
        assert SECRET not in str(failed.value)


async def test_the_pool_log_never_shows_the_password(
    postgres_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Trust authentication ignores the password; psycopg_pool would quote errors with it.
    dsn = make_conninfo(postgres_dsn, password=SECRET)
    store = await PostgresStore.open(dsn)
    pool_log = logging.getLogger("psycopg.pool")
    try:
        with caplog.at_level(logging.WARNING, logger="psycopg.pool"):
            pool_log.warning("error connecting in %r: %s", "a2pg", f"password={SECRET} rejected")
        assert SECRET not in caplog.text and "password=*** rejected" in caplog.text
    finally:
        await store.close()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="psycopg.pool"):
        pool_log.warning("after close: %s", SECRET)
    assert SECRET in caplog.text  # the store's filter went with it


async def test_the_layout_check_gives_up_on_a_lock_and_leaves_no_timeout_behind(
    postgres_dsn: str,
) -> None:
    async with await psycopg.AsyncConnection.connect(postgres_dsn) as holder:
        await holder.execute("lock table a2_meta in access exclusive mode")
        started = time.monotonic()
        with pytest.raises(pg.QueryCanceled):
            await PostgresStore.open(postgres_dsn, connect_timeout=1)
        assert time.monotonic() - started < 5
        await holder.rollback()
    store = await PostgresStore.open(postgres_dsn, connect_timeout=1)
    try:
        async with store.pool.connection() as conn:
            cur = await conn.execute("show statement_timeout")
            assert await cur.fetchone() == ("0",)
    finally:
        await store.close()


def test_pooler_settings_from_the_environment() -> None:
    assert env_prepare({}) is None and env_pooler({}) is None
    for raw, value in [("1", True), ("true", True), ("YES", True), ("0", False), ("no", False)]:
        assert env_prepare({"A2PG_PREPARE": raw}) is value
    assert env_pooler({"A2PG_POOLER": "transaction"}) == "transaction"
    with pytest.raises(A2Error, match="A2PG_PREPARE"):
        env_prepare({"A2PG_PREPARE": "maybe"})
    with pytest.raises(A2Error, match="A2PG_POOLER"):
        env_pooler({"A2PG_POOLER": "pgbouncer"})


async def test_open_store_takes_the_pooler_from_the_environment_unless_told(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("A2PG_POOLER", "transaction")
    async with open_store(postgres_dsn) as store:
        assert not store._listener._listen_enabled and not store._db.prepare
    async with open_store(postgres_dsn, pooler="none") as store:
        assert store._listener._listen_enabled and store._db.prepare
    monkeypatch.setenv("A2PG_PREPARE", "yes")
    async with open_store(postgres_dsn) as store:
        assert not store._listener._listen_enabled and store._db.prepare
    with pytest.raises(A2Error, match="pooler"):
        await PostgresStore.open(postgres_dsn, pooler="pgbouncer")  # type: ignore[arg-type]


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


async def test_a_worker_nodes_lost_connection_relayed_by_citus_is_a_lost_connection() -> None:
    """Citus's coordinator relays a worker node's broken connection as an internal error
    (XX000): an idempotent call retries it and the CLI calls it an outage, as for the
    store's own connection; other internal errors stay what they are."""
    policy = RetryPolicy(attempts=3, first_delay=0.001)
    relayed = (
        "server closed the connection unexpectedly\n\tThis probably means the server "
        "terminated abnormally\nCONTEXT:  while executing command on 127.0.0.1:5433"
    )
    calls = 0

    async def node_crashed_once() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise pg.InternalError_(relayed)
        return "done"

    assert connection_lost(pg.InternalError_(relayed))
    assert await retrying(node_crashed_once, idempotent=True, policy=policy) == "done"
    calls = 0
    with pytest.raises(pg.InternalError_):
        await retrying(node_crashed_once, idempotent=False, policy=policy)
    found = outage(pg.InternalError_(relayed), "the coordinator")
    assert found is not None and found.code == "STORE_UNAVAILABLE"
    other = pg.InternalError_("could not find shard 102008")
    assert not connection_lost(other) and outage(other, "the coordinator") is None


async def test_claim_nodes_are_for_a_store_on_citus(postgres_dsn: str) -> None:
    with pytest.raises(A2Error, match="claim_nodes is for a store on Citus") as raised:
        await PostgresStore.open(postgres_dsn, claim_nodes="127.0.0.1:5432")
    assert raised.value.code == "INVALID_ARGUMENT"
