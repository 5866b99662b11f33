"""Where PostgresStore departs from the seeds on purpose (docs/differences.md): the keys of
its tables, and the clock it takes times from."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from a2pg import NewEvent
from a2pg.postgres import PostgresStore
from a2pg.postgres.layout import TABLES

pytestmark = pytest.mark.postgres

NOT_PER_SESSION = {
    "a2_presence": ["ns", "participant", "field"],
    "a2_consumers": ["name"],
    "a2_workers": ["holder"],
    "a2_consumer_pauses": ["consumer"],
    "a2_audit": ["id"],
    "a2_meta": ["key"],
}
"""The tables keyed otherwise (not per session: reference tables under Citus), and their
keys."""


def test_every_per_session_table_is_keyed_by_session_first(postgres_dsn: str) -> None:
    """SPEC 4 asks every table's key to begin with ``session_id``; the tables of
    ``NOT_PER_SESSION`` are not per session and are keyed by what they are per."""
    with psycopg.connect(postgres_dsn) as conn:
        rows = conn.execute(
            """select t.relname, array_agg(a.attname order by k.n)
                 from pg_catalog.pg_index i
                 join pg_catalog.pg_class t on t.oid = i.indrelid
                 join pg_catalog.pg_namespace s on s.oid = t.relnamespace
                 cross join lateral unnest(i.indkey) with ordinality as k (attnum, n)
                 join pg_catalog.pg_attribute a
                   on a.attrelid = t.oid and a.attnum = k.attnum
                where i.indisprimary and s.nspname = 'public' and t.relname = any(%s)
                group by t.relname""",
            (list(TABLES),),
        ).fetchall()
    keys = {str(name): list(columns) for name, columns in rows}
    assert set(keys) == set(TABLES)
    for table, columns in keys.items():
        if table in NOT_PER_SESSION:
            assert columns == NOT_PER_SESSION[table], table
        else:
            assert columns[0] == "session_id", (table, columns)


async def test_without_a_clock_times_are_the_servers_read_under_the_session_lock(
    postgres_dsn: str,
) -> None:
    """The seeds took every time from the process's clock; PostgresStore without a
    ``clock`` reads the server's, under the session row's lock: an append that waited for
    that lock is stamped after the lock was let go, not when it was called."""
    store = await PostgresStore.open(postgres_dsn)
    try:
        await store.append("s", [NewEvent("first")])
        with psycopg.connect(postgres_dsn) as holder:
            holder.execute("select 1 from a2_sessions where session_id = 's' for update")
            called = holder.execute("select pg_catalog.clock_timestamp()").fetchone()
            waiting = asyncio.ensure_future(store.append("s", [NewEvent("second")]))
            await asyncio.sleep(0.5)
            assert not waiting.done()
            released = holder.execute("select pg_catalog.clock_timestamp()").fetchone()
            holder.commit()
        [second] = (await asyncio.wait_for(waiting, 10)).events
    finally:
        await store.close()
    assert called is not None and released is not None
    assert second.created_at >= released[0] > called[0]
