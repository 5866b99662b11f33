"""Live feeds across connections: streams and wakeups hear other stores and outlive a lost
LISTEN connection or a server restart."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from a2pg import NewEvent
from a2pg.postgres import PostgresStore
from a2pg.postgres.migrate import upgrade
from a2pg.testing import EmbeddedPostgres, create_database, unique_name
from tests.postgres.support import POLL_INTERVAL, TIMEOUT, claim, work

pytestmark = pytest.mark.postgres


async def test_a_stream_survives_its_listen_connection_being_killed(
    store: PostgresStore, postgres_dsn: str
) -> None:
    writer = await PostgresStore.open(postgres_dsn)
    stream = store.stream("s")
    try:
        await writer.append("s", [NewEvent("first")], consumers=[])
        first = await asyncio.wait_for(anext(stream), TIMEOUT)
        assert first.index == 1
        async with await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as conn:
            await conn.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity "
                "where query ilike 'listen %%' and pid <> pg_backend_pid()"
            )
        await writer.append("s", work(2), consumers=[])
        later = [await asyncio.wait_for(anext(stream), TIMEOUT) for _ in range(2)]
        assert [event.index for event in later] == [2, 3]
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
        await writer.close()


async def test_wakeups_hear_another_store(store: PostgresStore, postgres_dsn: str) -> None:
    writer = await PostgresStore.open(postgres_dsn)
    wakeups = store.wakeups()
    try:
        await asyncio.wait_for(store._listener.connected.wait(), TIMEOUT)
        await writer.append("far", work(), consumers=[])
        while (got := await asyncio.wait_for(anext(wakeups), TIMEOUT)) != "far":
            assert got is None
    finally:
        await wakeups.aclose()
        await writer.close()


async def test_streams_and_wakeups_live_through_a_server_restart(
    private_postgres: EmbeddedPostgres,
) -> None:
    dsn = create_database(private_postgres.dsn(), unique_name("a2pg_pg_restart"))
    upgrade(dsn)
    store = await PostgresStore.open(dsn, poll_interval=POLL_INTERVAL)
    stream = store.stream("s")
    wakeups = store.wakeups()
    try:
        await store.append("s", work(), consumers=[])
        assert (await asyncio.wait_for(anext(stream), TIMEOUT)).index == 1
        pending = asyncio.ensure_future(anext(stream))
        await asyncio.sleep(0)
        private_postgres.stop("fast")
        private_postgres.start()
        writer = await PostgresStore.open(dsn)
        try:
            await writer.append("s", work(), consumers=[])
        finally:
            await writer.close()
        assert (await asyncio.wait_for(pending, 30.0)).index == 2
        seen: set[str | None] = set()
        while "s" not in seen:
            seen.add(await asyncio.wait_for(anext(wakeups), 30.0))
    finally:
        await wakeups.aclose()
        await stream.aclose()  # type: ignore[attr-defined]
        await store.close()


async def test_a_release_wakes_another_stores_wakeups(
    store: PostgresStore, postgres_dsn: str
) -> None:
    await store.append("s", work(), consumers=[])
    head = await claim(store, "a")
    # Polls too rarely to matter within TIMEOUT: only the NOTIFY can bring "s".
    reader = await PostgresStore.open(postgres_dsn, poll_interval=600)
    wakeups = reader.wakeups()
    try:
        await asyncio.wait_for(reader._listener.connected.wait(), TIMEOUT)
        await store.release_claims("s", holder="a", claims=[head.attempt_ref])
        while (got := await asyncio.wait_for(anext(wakeups), TIMEOUT)) != "s":
            assert got is None
    finally:
        await wakeups.aclose()
        await reader.close()
