"""A store not told what pooler stands in front of PostgreSQL (issue 18, items 2 and 3).

Behind a transaction-mode PgBouncer that does not keep prepared statements it refuses at
open in one line, or works as if told; in no case does a row land in another schema's
tables (two stores on two schemas through one PgBouncer, checked on the tables). Running
out of connections, of the store's pool or of the pooler's, is an error within a bound,
never a hang.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from a2pg import A2Error, backends
from a2pg.postgres import PostgresStore
from a2pg.postgres.connect import connect, connection_kwargs
from a2pg.postgres.layout import TABLES
from a2pg.postgres.migrate import upgrade
from a2pg.postgres.poolers import DIRECT, FIRST_STATEMENT, probe
from a2pg.testing import PgBouncer, scratch_database
from tests.postgres.support import TIMEOUT, work

pytestmark = pytest.mark.postgres

SCHEMAS = ("public", "a2")
Bouncer = Callable[..., PgBouncer]
PREPARED_ERRORS = ("prepared statement", "bind message supplies")


def version(bouncer: PgBouncer) -> tuple[int, int]:
    major, minor = bouncer.version.split()[-1].split(".")[:2]
    return int(major), int(minor)


@pytest.fixture
def bouncer(pgbouncer: Callable[[str], PgBouncer], postgres_server_dsn: str) -> Iterator[Bouncer]:
    """``bouncer(mode, **settings)``: a PgBouncer of this test's own (``pgbouncer`` only
    for its skip). Transaction mode keeps no prepared statements, as PgBouncer before
    1.21 and 1.21-1.23 by default (``max_prepared_statements = 0``)."""
    started: list[PgBouncer] = []

    def start(mode: str, **settings: str) -> PgBouncer:
        made = PgBouncer(postgres_server_dsn, mode, settings=settings)
        if mode == "transaction" and version(made) >= (1, 21):
            made.settings.setdefault("max_prepared_statements", "0")
        started.append(made.start())
        return made

    yield start
    for running in started:
        running.stop()


@pytest.fixture(scope="module")
def two_schemas_database(postgres_server_dsn: str) -> Iterator[str]:
    """One database with a2pg's layout in ``public`` and in ``a2``."""
    with scratch_database(postgres_server_dsn, "a2pg_two_schemas") as dsn:
        for schema in SCHEMAS:
            upgrade(dsn, schema=schema)
        yield dsn


@pytest.fixture
def two_schemas(two_schemas_database: str) -> str:
    """The database above with every table emptied (layout records aside)."""
    with psycopg.connect(two_schemas_database, autocommit=True) as conn, conn.transaction():
        for schema in SCHEMAS:
            for table in TABLES:
                if table != "a2_meta":
                    conn.execute(
                        sql.SQL("delete from {}.{}").format(
                            sql.Identifier(schema), sql.Identifier(table)
                        )
                    )
    return two_schemas_database


def rows_by_owner(dsn: str) -> dict[str, dict[str, int]]:
    """For each schema: its events and cursors, counted by the schema their session
    names (``<schema>-<n>``)."""
    found: dict[str, dict[str, int]] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for schema in SCHEMAS:
            counts: dict[str, int] = {}
            for table in ("a2_events", "a2_cursors"):
                query = sql.SQL(
                    "select split_part(session_id, '-', 1), count(*) from {}.{} group by 1"
                ).format(sql.Identifier(schema), sql.Identifier(table))
                for owner, count in conn.execute(query).fetchall():
                    key = f"{table} of {owner}"
                    counts[key] = counts.get(key, 0) + int(count)
            found[schema] = counts
    return found


def only_their_own(dsn: str) -> None:
    for schema, counts in rows_by_owner(dsn).items():
        strangers = {key: n for key, n in counts.items() if not key.endswith(f" of {schema}")}
        assert not strangers, f"rows of other schemas in {schema!r}: {strangers}"


async def busy(store: PostgresStore, tasks: int = 6, rounds: int = 8) -> list[str]:
    """Appends and claims from many connections at once (psycopg prepares what repeats);
    the errors it met (the claims must only ever see the store's own sessions)."""
    errors: list[str] = []

    async def one(n: int) -> None:
        session = f"{store.schema}-{n}"
        for _ in range(rounds):
            try:
                await store.append(session, work(), consumers=[])
                for head in await store.claim_any(holder=f"h{n}", ttl=30, limit=2):
                    assert head.session_id.startswith(f"{store.schema}-"), head.session_id
            except psycopg.Error as exc:
                errors.append(str(exc))

    await asyncio.gather(*(one(n) for n in range(tasks)))
    return errors


@pytest.fixture
async def opened() -> AsyncIterator[list[PostgresStore]]:
    """Stores the test opens, closed at its end."""
    stores: list[PostgresStore] = []
    yield stores
    for store in stores:
        await store.close()


async def test_an_undeclared_transaction_pooler_is_refused_at_open_in_one_line(
    bouncer: Bouncer, two_schemas: str, opened: list[PostgresStore]
) -> None:
    dsn = bouncer("transaction").dsn(two_schemas)
    for schema in SCHEMAS:
        with pytest.raises(A2Error) as refused:
            await PostgresStore.open(dsn, schema=schema, max_size=4)
        error = refused.value
        assert error.code == "INVALID_ARGUMENT"
        assert "--pooler transaction" in error.message and "\n" not in error.message
        assert 'pooler="transaction"' in error.message
    # Told "session" when it is not, the same; a pool of one's own is probed too.
    with pytest.raises(A2Error, match="--pooler transaction"):
        await PostgresStore.open(dsn, schema="a2", pooler="session")
    pool = AsyncConnectionPool(dsn, kwargs={"autocommit": True}, open=False)
    await pool.open()
    try:
        with pytest.raises(A2Error, match="--pooler transaction"):
            await PostgresStore.open(pool, schema="a2")
    finally:
        await pool.close()
    assert rows_by_owner(two_schemas) == {"public": {}, "a2": {}}
    # Told, both work as before, every row in its own schema.
    for schema in SCHEMAS:
        opened.append(await PostgresStore.open(dsn, schema=schema, pooler="transaction"))
    results = await asyncio.gather(*(busy(store) for store in opened))
    assert results == [[], []]
    counts = rows_by_owner(two_schemas)
    for schema in SCHEMAS:
        assert counts[schema] == {f"a2_events of {schema}": 48, f"a2_cursors of {schema}": 48}


def test_the_refusal_is_the_command_line_s_one_line_and_usage_exit(
    bouncer: Bouncer, two_schemas: str
) -> None:
    dsn = bouncer("transaction").dsn(two_schemas)
    env = {key: value for key, value in os.environ.items() if not key.startswith("A2PG_")}
    command = [sys.executable, "-m", "a2pg.cli", "sessions", "--dsn", dsn, "--schema", "a2"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("a2pg: error: "), done.stderr
    assert "--pooler transaction" in lines[0]


async def test_undeclared_without_prepare_it_works_as_told_and_says_so(
    bouncer: Bouncer,
    two_schemas: str,
    opened: list[PostgresStore],
    caplog: pytest.LogCaptureFixture,
) -> None:
    dsn = bouncer("transaction").dsn(two_schemas)
    with caplog.at_level(logging.WARNING, logger="a2pg"):
        for schema in SCHEMAS:
            opened.append(
                await PostgresStore.open(dsn, schema=schema, prepare=False, poll_interval=0.05)
            )
    said = [r.getMessage() for r in caplog.records if "transaction-mode" in r.getMessage()]
    assert len(said) == 2 and all("--pooler transaction" in line for line in said), said
    wakeups = opened[1].wakeups()
    try:
        results = await asyncio.gather(*(busy(store) for store in opened))
        assert results == [[], []]
        await asyncio.wait_for(opened[1]._listener.connected.wait(), TIMEOUT)
        assert opened[1]._listener.hears_itself is None  # it never tried to listen
    finally:
        await wakeups.aclose()
    counts = rows_by_owner(two_schemas)
    for schema in SCHEMAS:
        assert counts[schema] == {f"a2_events of {schema}": 48, f"a2_cursors of {schema}": 48}


async def test_prepared_statements_that_mix_fail_but_never_run_another_store_s(
    bouncer: Bouncer, two_schemas: str, opened: list[PostgresStore]
) -> None:
    """Told to prepare where the pooler mixes prepared statements (``--prepare`` behind
    PgBouncer that does not keep them): statements fail, as documented, yet none runs a
    statement another connection prepared: every row is in its own schema."""
    dsn = bouncer("transaction").dsn(two_schemas)
    for schema in SCHEMAS:
        opened.append(
            await PostgresStore.open(dsn, schema=schema, pooler="transaction", prepare=True)
        )
    results = await asyncio.gather(*(busy(store) for store in opened))
    errors = [error for found in results for error in found]
    assert errors and all(any(w in e for w in PREPARED_ERRORS) for e in errors), errors[:3]
    only_their_own(two_schemas)


async def test_an_undeclared_session_pooler_keeps_working_with_statements_named_apart(
    bouncer: Bouncer, two_schemas: str, opened: list[PostgresStore]
) -> None:
    """Not told of a session-mode pooler, stores work (they prepare, and listen) as
    before; their connections' prepared statements are named apart, as everywhere."""
    dsn = bouncer("session").dsn(two_schemas)
    for schema in SCHEMAS:
        opened.append(await PostgresStore.open(dsn, schema=schema, poll_interval=600))
    reader = await PostgresStore.open(dsn, schema="a2", poll_interval=600)
    opened.append(reader)
    wakeups = reader.wakeups()
    try:
        await asyncio.wait_for(reader._listener.connected.wait(), TIMEOUT)
        results = await asyncio.gather(*(busy(store) for store in opened[:2]))
        assert results == [[], []]
        await opened[1].append("a2-far", work(), consumers=[])
        while await asyncio.wait_for(anext(wakeups), TIMEOUT) != "a2-far":
            pass  # only a NOTIFY brings it within TIMEOUT: the poll is every 600s
        assert reader._listener.hears_itself is True
    finally:
        await wakeups.aclose()
    only_their_own(two_schemas)
    named: list[set[str]] = []
    async with opened[1].pool.connection() as one, opened[1].pool.connection() as two:
        for conn in (one, two):
            await conn.execute("select 1 as a2pg_test", prepare=True)
            cur = await conn.execute("select name from pg_catalog.pg_prepared_statements")
            names = {str(row[0]) for row in await cur.fetchall()}
            assert all(int(n.removeprefix("_pg3_")) >= FIRST_STATEMENT for n in names), names
            named.append(names)
    assert named[0] and named[1] and not named[0] & named[1], named


@pytest.mark.parametrize("prepare", [True, False])
async def test_the_probe_tells_a_direct_session_and_transaction_path_apart(
    bouncer: Bouncer, postgres_dsn: str, prepare: bool
) -> None:
    async def route(dsn: str) -> tuple[str, bool]:
        kwargs = connection_kwargs(prepare=prepare, timeout=5)
        conn = await connect(dsn, **kwargs)
        try:
            seen = await probe(
                conn, functools.partial(connect, dsn, **kwargs), prepare=prepare, within=5
            )
        finally:
            await conn.close()
        return seen.pooler, seen.keeps_prepared

    assert await route(postgres_dsn) == (DIRECT.pooler, False)
    assert await route(bouncer("session").dsn(postgres_dsn)) == ("session", False)
    assert await route(bouncer("session", server_round_robin="1").dsn(postgres_dsn)) == (
        "session",
        False,
    )
    for settings in ({}, {"server_round_robin": "1"}, {"default_pool_size": "1"}):
        dsn = bouncer("transaction", **settings).dsn(postgres_dsn)
        # Several idle server connections first, as a pooler in use has.
        conns = [await connect(dsn, autocommit=True) for _ in range(3)]
        await asyncio.gather(*(c.execute("select pg_catalog.pg_sleep(0.1)") for c in conns))
        for conn in conns:
            await conn.close()
        for _ in range(3):
            assert await route(dsn) == ("transaction", False), settings
    # The probe leaves nothing on the server connection (the only one of this pooler).
    async with await connect(dsn, autocommit=True) as conn:
        cur = await conn.execute("select name from pg_catalog.pg_prepared_statements")
        assert await cur.fetchall() == []


async def test_an_exhausted_pool_is_an_error_within_the_bound(postgres_dsn: str) -> None:
    store = await PostgresStore.open(postgres_dsn, max_size=1, connect_timeout=1)
    try:
        async with store.pool.connection():
            started = time.monotonic()
            with pytest.raises(PoolTimeout) as timed_out:
                await asyncio.wait_for(store.append("s", work(), consumers=[]), 20)
            assert time.monotonic() - started < 5
        error = backends.classify(timed_out.value, "db")
        assert error is not None and error.code == "STORE_UNAVAILABLE"
        assert "pool ran out" in error.message, error.message
        await store.append("s", work(), consumers=[])  # fine once it is back
    finally:
        await store.close()


def hold_server_connections(dsn: str, count: int) -> list[psycopg.Connection[Any]]:
    """Clients of a session-mode pooler, each holding one of its server connections."""
    held = []
    for _ in range(count):
        conn = psycopg.connect(dsn, autocommit=True)
        conn.execute("select 1")
        held.append(conn)
    return held


async def test_a_full_session_pooler_fails_open_within_the_bound(
    bouncer: Bouncer, postgres_dsn: str
) -> None:
    dsn = bouncer("session", default_pool_size="1").dsn(postgres_dsn)
    held = hold_server_connections(dsn, 1)
    try:
        started = time.monotonic()
        with pytest.raises(psycopg.OperationalError) as failed:
            await asyncio.wait_for(PostgresStore.open(dsn, pooler="session", connect_timeout=2), 30)
        assert time.monotonic() - started < 10
        error = backends.classify(failed.value, "db")
        assert error is not None and error.code == "STORE_UNAVAILABLE"
        assert "no answer within 2s" in error.message and "pooler" in error.message
    finally:
        for conn in held:
            conn.close()


async def test_a_pool_that_a_full_session_pooler_stops_growing_fails_within_the_bound(
    bouncer: Bouncer, postgres_dsn: str
) -> None:
    """The pool's one connection holds a server connection; the pooler has none left for
    a second: the call waiting for it fails within the bound, it does not wait in the
    pooler's queue (PgBouncer's query_wait_timeout, 120 s by default)."""
    dsn = bouncer("session", default_pool_size="2").dsn(postgres_dsn)
    store = await PostgresStore.open(dsn, pooler="session", max_size=2, connect_timeout=1)
    held = hold_server_connections(dsn, 1)
    try:
        async with store.pool.connection():
            started = time.monotonic()
            with pytest.raises(PoolTimeout):
                await asyncio.wait_for(store.append("s", work(), consumers=[]), 30)
            assert time.monotonic() - started < 10
        await store.append("s", work(), consumers=[])  # the pool's own connection still works
    finally:
        for conn in held:
            conn.close()
        await store.close()


def test_the_demo_runs_through_a_session_pooler_of_ten(
    bouncer: Bouncer, postgres_server_dsn: str
) -> None:
    """Three processes (the demo and two workers), each wanting up to 11 connections,
    share PgBouncer's 10 server connections: the pools that cannot grow make do."""
    with scratch_database(postgres_server_dsn, "a2pg_demo_session") as dsn:
        bounced = bouncer("session", default_pool_size="10").dsn(dsn)
        env = {key: value for key, value in os.environ.items() if not key.startswith("A2PG_")}
        command = [sys.executable, "-m", "a2pg.cli", "demo", "--dsn", bounced]
        command += ["--workers", "2", "--sessions", "20", "--turns", "3", "--timeout", "60"]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
