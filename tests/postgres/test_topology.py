"""The store in any schema, whatever its connections' state: search_path, TimeZone, and
functions of the same names as pg_catalog's in a schema the runtime role can write."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from a2pg import (
    Busy,
    Claimed,
    Completion,
    Consumer,
    LogSpec,
    NewEvent,
    SnapshotWrite,
    Target,
)
from a2pg.ids import FakeClock
from a2pg.postgres import PostgresStore
from a2pg.postgres.migrate import upgrade
from a2pg.postgres.probe import Probe
from a2pg.testing import scratch_database
from tests.postgres.support import TIMEOUT

pytestmark = pytest.mark.postgres

SCHEMA = "a2"

# Each trap counts its calls in a sequence (never rolled back), then does what the
# built-in does, so a store that called one would carry on and be caught afterwards.
_COUNT = "perform pg_catalog.nextval('a2.trap_calls');"
TRAPS = [
    f"""create function a2.{name} returns {returns} language plpgsql as $$
        begin {_COUNT} {body} end $$"""
    for name, returns, body in [
        ("now()", "timestamptz", "return pg_catalog.now();"),
        ("clock_timestamp()", "timestamptz", "return pg_catalog.clock_timestamp();"),
        ("statement_timestamp()", "timestamptz", "return pg_catalog.statement_timestamp();"),
        ("pg_notify(text, text)", "void", "perform pg_catalog.pg_notify($1, $2);"),
        (
            "json_build_object(text, text, text, bigint)",
            "json",
            "return pg_catalog.json_build_object($1, $2, $3, $4);",
        ),
        ("unnest(text[])", "setof text", "return query select pg_catalog.unnest($1);"),
        ("unnest(bigint[])", "setof bigint", "return query select pg_catalog.unnest($1);"),
        ("unnest(integer[])", "setof integer", "return query select pg_catalog.unnest($1);"),
        ("unnest(boolean[])", "setof boolean", "return query select pg_catalog.unnest($1);"),
        (
            "json_array_elements_text(json)",
            "setof text",
            "return query select pg_catalog.json_array_elements_text($1);",
        ),
        ("json_typeof(json)", "text", "return pg_catalog.json_typeof($1);"),
        ("to_regclass(text)", "regclass", "return pg_catalog.to_regclass($1);"),
        ("format(text, text)", "text", "return pg_catalog.format($1, $2);"),
        (
            "set_config(text, text, boolean)",
            "text",
            "return pg_catalog.set_config($1, $2, $3);",
        ),
        (
            "make_interval(years int = 0, months int = 0, weeks int = 0, days int = 0,"
            " hours int = 0, mins int = 0, secs double precision = 0.0)",
            "interval",
            "return pg_catalog.make_interval(years, months, weeks, days, hours, mins, secs);",
        ),
        ("trap_step(bigint)", "bigint", "return $1 + 1;"),
        ("trap_step(bigint, anyelement)", "bigint", "return $1 + 1;"),
        ("trap_pick(anyelement, anyelement)", "anyelement", "return pg_catalog.least($1, $2);"),
    ]
] + [
    "create aggregate a2.count(*) (sfunc = a2.trap_step, stype = bigint, initcond = 0)",
    "create aggregate a2.count(text) (sfunc = a2.trap_step, stype = bigint, initcond = 0)",
    "create aggregate a2.min(bigint) (sfunc = a2.trap_pick, stype = bigint)",
    "create aggregate a2.max(bigint) (sfunc = a2.trap_pick, stype = bigint)",
    "create aggregate a2.min(timestamptz) (sfunc = a2.trap_pick, stype = timestamptz)",
    "create aggregate a2.sum(bigint) (sfunc = a2.trap_pick, stype = bigint)",
]


def on_search_path(dsn: str, search_path: str, **settings: str) -> str:
    """``dsn`` whose every connection starts with this search_path (and settings)."""
    options = " ".join(
        f"-c {key}={value}" for key, value in {"search_path": search_path, **settings}.items()
    )
    return make_conninfo(dsn, options=options)


def trap_calls(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("select last_value, is_called from a2.trap_calls").fetchone()
        assert row is not None
        return int(row[0]) if row[1] else 0


@pytest.fixture
def trapped(postgres_server_dsn: str) -> Iterator[str]:
    """A database migrated in schema a2, which also holds the traps."""
    with scratch_database(postgres_server_dsn, "a2pg_trap") as dsn:
        upgrade(dsn, schema=SCHEMA)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("create sequence a2.trap_calls")
            for statement in TRAPS:
                conn.execute(statement.encode())
        yield dsn


def test_the_traps_fire_on_calls_that_lean_on_the_search_path(trapped: str) -> None:
    leaning = on_search_path(trapped, "a2,pg_catalog")
    with psycopg.connect(leaning, autocommit=True) as conn:
        conn.execute("select now(), count(*) from (values (1)) v")
        conn.execute("select * from unnest(array['x'])")
    assert trap_calls(trapped) == 3
    # The exact-typed overload wins even with pg_catalog first on the path.
    with psycopg.connect(on_search_path(trapped, "a2"), autocommit=True) as conn:
        conn.execute("select json_build_object('a', 'b', 'c', 1::bigint)")
    assert trap_calls(trapped) == 4


async def test_overloaded_builtins_in_a_writable_schema_are_never_called(trapped: str) -> None:
    dsn = on_search_path(trapped, "a2,pg_catalog")
    audit = Consumer("audit", LogSpec(types=("work",)))
    store = await PostgresStore.open(dsn, schema=SCHEMA, poll_interval=0.05)
    other = await PostgresStore.open(dsn, schema=SCHEMA, poll_interval=0.05)
    stream = other.stream("s")
    wakeups = other.wakeups()
    try:
        await store.register_consumers([audit])
        lanes = [NewEvent("work", {"n": n}, targets=[Target("mail", lane="x")]) for n in range(2)]
        single = [NewEvent("work", {"n": 9}, targets=[Target("bill")])]
        await store.append("s", [*lanes, *single])
        assert (await asyncio.wait_for(anext(stream), TIMEOUT)).index == 1
        while await asyncio.wait_for(anext(wakeups), TIMEOUT) != "s":
            pass
        claimed = await store.claim_available("s", holder="h", ttl=30)
        assert isinstance(claimed, Claimed)
        refs = [head.attempt_ref for head in claimed.heads]
        await store.renew_claims("s", holder="h", claims=refs, ttl=60)
        await store.put_snapshots("s", "totals", [SnapshotWrite(1, {"n": 1}, pins=[])])
        assert (await store.read_state("s", "totals")).state == {"n": 1}
        by_consumer = {head.consumer: head for head in claimed.heads}
        mail, bill = by_consumer["mail"], by_consumer["bill"]
        reply = NewEvent("reply", {"ok": True}, id="reply-1")
        done = Completion("s", "mail", "x", mail.index, mail.attempt, [reply])
        await store.complete_attempts([done])
        await store.fail_attempt(
            "s", consumer="bill", lane=None, index=bill.index, attempt=bill.attempt,
            error="boom", max_failures=1,
        )  # fmt: skip
        assert [head.index for head in await store.dead_letters("s")] == [bill.index]
        await store.redrive("s", consumer="bill", index=bill.index, action="retry")
        again = await store.claim_any(holder="h2", ttl=30, limit=5)
        assert bill.index in [head.index for head in again]
        refs = [head.attempt_ref for head in again]
        assert len((await store.release_claims("s", holder="h2", claims=refs)).released) == len(
            refs
        )
        await store.presence.write("ns", "p", {"f": 1}, at=datetime.now(UTC), seen=None, ttl=30)
        assert [row.value for row in await store.presence.read("ns")] == [1]
        assert [info.session_id for info in await store.sessions()] == ["s"]
        assert await store.cursors("s")
        await store.clear("s")
        await store.reclaim("s")
        probe = await Probe.connect(dsn, SCHEMA)
        try:
            await probe.counts()
        finally:
            await probe.close()
        await store.unregister_consumers(["audit"])
    finally:
        await wakeups.aclose()
        await stream.aclose()  # type: ignore[attr-defined]
        await other.close()
        await store.close()
    assert trap_calls(trapped) == 0


async def test_a_store_writes_its_own_schema_whatever_the_search_path(
    postgres_server_dsn: str,
) -> None:
    # Behind a transaction pooler a store of schema a2 once wrote into public, the
    # search_path of whichever server connection it got.
    with scratch_database(postgres_server_dsn, "a2pg_paths") as dsn:
        upgrade(dsn)
        upgrade(dsn, schema=SCHEMA)
        store = await PostgresStore.open(on_search_path(dsn, "public"), schema=SCHEMA)
        try:
            await store.append("s", [NewEvent("work", targets=[Target("w")])], consumers=[])
            [head] = await store.claim_any(holder="h", ttl=30)
            await store.complete_attempt(
                "s", consumer="w", lane=None, index=head.index, attempt=head.attempt
            )
        finally:
            await store.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            counts = {
                schema: conn.execute(
                    sql.SQL("select count(*) from {}.a2_events").format(sql.Identifier(schema))
                ).fetchone()
                for schema in (SCHEMA, "public")
            }
        assert counts == {SCHEMA: (1,), "public": (0,)}


async def test_a_lease_is_exact_seconds_whatever_the_session_timezone(
    postgres_dsn: str,
) -> None:
    # 2026-03-29 is a DST change in Paris: a day added in that TimeZone is 23 hours.
    clock = FakeClock(datetime(2026, 3, 28, 11, 0, tzinfo=UTC))
    dsn = on_search_path(postgres_dsn, "public", TimeZone="Europe/Paris")
    store = await PostgresStore.open(dsn, clock=clock)
    try:
        await store.append("s", [NewEvent("work", targets=[Target("w")])], consumers=[])
        day = timedelta(days=1).total_seconds()
        assert isinstance(await store.claim_available("s", holder="h", ttl=day), Claimed)
        busy = await store.claim_available("s", holder="other", ttl=day)
        assert busy == Busy(clock() + timedelta(days=1))
        await store.presence.write("ns", "p", {"f": 1}, at=clock(), seen=None, ttl=day)
        [row] = await store.presence.read("ns")
        assert row.expires_at == clock() + timedelta(days=1)
    finally:
        await store.close()
