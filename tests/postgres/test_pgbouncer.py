"""PostgresStore behind PgBouncer: what each pool mode supports, and what the store does
about it (the conformance suite runs through both modes in ``.ci/run``)."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from collections.abc import Callable

import psycopg
import pytest

from a2pg.postgres import PostgresStore
from a2pg.postgres.migrate import upgrade
from a2pg.testing import PgBouncer, scratch_database
from tests.backends import BOUNCED_SCHEMA, BouncedDatabase
from tests.postgres.support import TIMEOUT, work

pytestmark = pytest.mark.postgres

Bouncer = Callable[[str], PgBouncer]
PREPARED_ERRORS = ("prepared statement", "bind message supplies")


async def busy(store: PostgresStore, tasks: int = 8, rounds: int = 12) -> None:
    """The same statements many times from many connections at once."""

    async def one(n: int) -> None:
        for _ in range(rounds):
            await store.append(f"s{n}", work(), consumers=[])
            await store.read(f"s{n}")

    await asyncio.gather(*(one(n) for n in range(tasks)))


async def test_prepared_statements_break_a_transaction_pooler_unless_turned_off(
    pgbouncer: Bouncer, postgres_dsn: str
) -> None:
    dsn = pgbouncer("transaction").dsn(postgres_dsn)
    store = await PostgresStore.open(dsn, pooler="transaction", max_size=4)
    try:
        await busy(store)  # prepare defaults to off with pooler="transaction"
    finally:
        await store.close()
    # The failure it avoids (PgBouncer before 1.21, or max_prepared_statements = 0):
    # psycopg prepares on one server connection, then runs on another.
    version = pgbouncer("transaction").version
    if tuple(int(n) for n in version.split()[-1].split(".")[:2]) >= (1, 21):
        pytest.skip(f"{version} may keep prepared statements in transaction mode")
    store = await PostgresStore.open(dsn, pooler="transaction", prepare=True, max_size=4)
    try:
        with pytest.raises(psycopg.Error) as failed:
            await busy(store)
        assert any(words in str(failed.value) for words in PREPARED_ERRORS), failed.value
    finally:
        await store.close()


async def test_prepare_off_reaches_every_connection_of_the_store(postgres_dsn: str) -> None:
    store = await PostgresStore.open(postgres_dsn, prepare=False, poll_interval=0.05)
    wakeups = store.wakeups()
    try:
        await asyncio.wait_for(store._listener.connected.wait(), TIMEOUT)
        assert store._listener._conn is not None
        assert store._listener._conn.prepare_threshold is None
        async with store.pool.connection() as conn:
            assert conn.prepare_threshold is None
    finally:
        await wakeups.aclose()
        await store.close()
    store = await PostgresStore.open(postgres_dsn)
    try:
        async with store.pool.connection() as conn:
            assert conn.prepare_threshold is not None
    finally:
        await store.close()


async def test_behind_a_transaction_pooler_the_store_polls_and_says_so_once(
    pgbouncer: Bouncer, postgres_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    dsn = pgbouncer("transaction").dsn(postgres_dsn)
    with caplog.at_level(logging.INFO, logger="a2pg"):
        reader = await PostgresStore.open(dsn, pooler="transaction", poll_interval=0.05)
    said = [r.getMessage() for r in caplog.records if "not listening" in r.getMessage()]
    assert len(said) == 1 and "transaction" in said[0], said
    writer = await PostgresStore.open(dsn, pooler="transaction")
    stream = reader.stream("s")
    wakeups = reader.wakeups()
    try:
        await writer.append("s", work(2), consumers=[])
        events = [await asyncio.wait_for(anext(stream), TIMEOUT) for _ in range(2)]
        assert [event.index for event in events] == [1, 2]
        while await asyncio.wait_for(anext(wakeups), TIMEOUT) != "s":
            pass
        assert reader._listener.hears_itself is None  # it never tried to listen
    finally:
        await wakeups.aclose()
        await stream.aclose()  # type: ignore[attr-defined]
        await writer.close()
        await reader.close()


async def test_behind_a_session_pooler_the_store_listens(
    pgbouncer: Bouncer, postgres_dsn: str
) -> None:
    dsn = pgbouncer("session").dsn(postgres_dsn)
    # Polls too rarely to matter: only a NOTIFY can bring the wakeup within TIMEOUT.
    reader = await PostgresStore.open(dsn, pooler="session", poll_interval=600)
    writer = await PostgresStore.open(dsn, pooler="session")
    wakeups = reader.wakeups()
    try:
        await asyncio.wait_for(reader._listener.connected.wait(), TIMEOUT)
        await writer.append("s", work(), consumers=[])
        while await asyncio.wait_for(anext(wakeups), TIMEOUT) != "s":
            pass
    finally:
        await wakeups.aclose()
        await writer.close()
        await reader.close()


async def test_a_transaction_pooler_with_a_direct_listen_dsn_listens(
    pgbouncer: Bouncer, postgres_dsn: str
) -> None:
    """Appenders on the transaction pool; the LISTEN connection goes straight to PostgreSQL."""
    dsn = pgbouncer("transaction").dsn(postgres_dsn)
    reader = await PostgresStore.open(
        dsn, pooler="transaction", listen_dsn=postgres_dsn, poll_interval=600
    )
    writer = await PostgresStore.open(dsn, pooler="transaction")
    wakeups = reader.wakeups()
    try:
        await asyncio.wait_for(reader._listener.connected.wait(), TIMEOUT)
        await writer.append("s", work(), consumers=[])
        while await asyncio.wait_for(anext(wakeups), TIMEOUT) != "s":
            pass
    finally:
        await wakeups.aclose()
        await writer.close()
        await reader.close()


def test_the_check_after_each_bounced_test_sees_rows_outside_a2(
    bounced_database: BouncedDatabase,
) -> None:
    assert bounced_database.written_outside() == {}
    with psycopg.connect(bounced_database.dsn, autocommit=True) as conn:
        conn.execute("insert into public.a2_sessions (session_id, created_at) values ('x', now())")
    try:
        assert bounced_database.written_outside() == {"public.a2_sessions": 1}
        with pytest.raises(AssertionError, match="outside schema 'a2'"):
            bounced_database.check_nothing_outside()
        assert bounced_database.written_outside() == {}  # the next test starts clean
    finally:
        with psycopg.connect(bounced_database.dsn, autocommit=True) as conn:
            conn.execute("delete from public.a2_sessions")


def test_the_demo_runs_through_a_transaction_pooler(
    pgbouncer: Bouncer, postgres_server_dsn: str
) -> None:
    with scratch_database(postgres_server_dsn, "a2pg_demo_bounced") as dsn:
        upgrade(dsn)  # public holds the layout too: nothing may land there
        bounced = pgbouncer("transaction").dsn(dsn)
        env = {**os.environ, "A2PG_POOLER": "transaction"}  # its workers inherit it
        command = [sys.executable, "-m", "a2pg.cli", "demo", "--dsn", bounced]
        command += ["--schema", BOUNCED_SCHEMA, "--sessions", "20", "--turns", "3"]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute(
                "select (select count(*) from public.a2_events),"
                " (select count(*) from a2.a2_events)"
            ).fetchone()
        assert row is not None and row[0] == 0 and row[1] > 0, row
