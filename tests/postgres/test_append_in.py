"""append_in: the append inside the application's own transaction, on its own connection.

The events commit or roll back with the application's rows; the NOTIFY goes out only at
the commit; bad connections and bad arguments write nothing and leave the caller's
transaction as it was; the store's pool is never used.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from a2pg import A2Error, Consumer, LogSpec, NewEvent, Target
from a2pg.postgres import PostgresStore
from a2pg.postgres.migrate import upgrade
from a2pg.testing import PgBouncer, scratch_database
from tests.postgres.support import TIMEOUT, work

pytestmark = pytest.mark.postgres

CHANNEL = "a2pg_public"
Conn = psycopg.AsyncConnection[Any]


@pytest.fixture
async def app(postgres_dsn: str) -> AsyncIterator[Conn]:
    """The application's connection (not autocommit, as psycopg opens one by default),
    with an ``orders`` table of its own beside the store's."""
    async with await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as admin:
        await admin.execute("create table public.orders (id text primary key)")
    conn = await psycopg.AsyncConnection.connect(postgres_dsn)
    try:
        yield conn
    finally:
        await conn.close()


async def orders(dsn: str) -> list[str]:
    """The committed orders, read on a connection of its own."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute("select id from public.orders order by id")
        return [row[0] for row in await cur.fetchall()]


async def nothing_stored(store: PostgresStore) -> None:
    """Nothing of session ``s`` was committed: no session row, event or cursor."""
    assert "s" not in [info.session_id for info in await store.sessions()]
    assert await store.read("s") == []
    assert await store.cursors("s") == []


def status(conn: Conn | psycopg.Connection[Any]) -> TransactionStatus:
    """The connection's transaction status now (a call, so that mypy narrows nothing)."""
    return conn.info.transaction_status


async def notified(dsn: str, action: Callable[[], Awaitable[object]]) -> list[str]:
    """The sessions notified on the store's channel while ``action`` ran: a marker sent
    after it arrives after them all, so "none" needs no wait."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(sql.SQL("listen {}").format(sql.Identifier(CHANNEL)))
        await action()
        await conn.execute("select pg_notify(%s, 'end')", (CHANNEL,))
        sessions = []
        async for notify in conn.notifies(timeout=TIMEOUT):
            if notify.payload == "end":
                break
            if notify.payload.startswith("{"):
                sessions.append(json.loads(notify.payload)["session_id"])
        return sessions


# -- commit and rollback ---------------------------------------------------------------


async def test_commit_keeps_the_rows_and_the_events_together(
    store: PostgresStore, app: Conn, postgres_dsn: str
) -> None:
    async with app.transaction():
        await app.execute("insert into public.orders values ('o1')")
        result = await store.append_in(app, "s", work(2))
        assert [event.index for event in result.events] == [1, 2]
        assert result.has_pending
        assert await store.read("s") == []  # not committed: the store does not see it
        assert await orders(postgres_dsn) == []
    assert await orders(postgres_dsn) == ["o1"]
    assert await store.read("s") == result.events
    assert [(c.consumer, c.head) for c in await store.cursors("s")] == [
        ("worker", 1),
        ("worker", 2),
    ]


async def test_an_idle_connection_gets_its_transaction_begun_and_the_caller_commits(
    store: PostgresStore, app: Conn
) -> None:
    assert status(app) == TransactionStatus.IDLE
    await store.append_in(app, "s", [NewEvent("a")], consumers=[])
    assert status(app) == TransactionStatus.INTRANS
    assert await store.read("s") == []
    await app.commit()
    assert [event.type for event in await store.read("s")] == ["a"]


async def test_rollback_drops_the_rows_events_cursors_and_session(
    store: PostgresStore, app: Conn, postgres_dsn: str
) -> None:
    log = Consumer("audit", LogSpec())
    await store.register_consumers([log])
    await app.execute("insert into public.orders values ('o1')")
    await store.append_in(
        app, "s", [NewEvent("a", targets=[Target("worker"), Target("mailer", "m")])]
    )
    await app.rollback()
    assert await orders(postgres_dsn) == []
    await nothing_stored(store)
    later = await store.append("s", [NewEvent("b")], consumers=[])
    assert [event.index for event in later.events] == [1]


async def test_a_savepoint_rolled_back_drops_only_what_it_appended(
    store: PostgresStore, app: Conn, postgres_dsn: str
) -> None:
    async with app.transaction():
        await app.execute("insert into public.orders values ('o1')")
        kept = await store.append_in(app, "s", [NewEvent("kept")], consumers=[])
        with pytest.raises(RuntimeError):
            async with app.transaction():  # a savepoint
                await app.execute("insert into public.orders values ('o2')")
                await store.append_in(app, "s", work(), consumers=[])
                raise RuntimeError("the application changes its mind")
        after = await store.append_in(app, "s", [NewEvent("after")], consumers=[])
    assert await orders(postgres_dsn) == ["o1"]
    assert [(e.index, e.type) for e in await store.read("s")] == [(1, "kept"), (2, "after")]
    assert [e.index for e in kept.events + after.events] == [1, 2]
    assert await store.cursors("s") == []  # the rolled-back target's cursor went too


# -- the wakeup ------------------------------------------------------------------------


async def test_the_notify_goes_out_at_the_commit_and_never_after_a_rollback(
    store: PostgresStore, app: Conn, postgres_dsn: str
) -> None:
    async def uncommitted() -> None:
        await store.append_in(app, "s", work(), consumers=[])

    assert await notified(postgres_dsn, uncommitted) == []
    assert await notified(postgres_dsn, app.commit) == ["s"]

    async def rolled_back() -> None:
        await store.append_in(app, "s", work(), consumers=[])
        await app.rollback()

    assert await notified(postgres_dsn, rolled_back) == []


async def test_another_stores_wakeups_and_stream_see_the_events_after_the_commit(
    store: PostgresStore, app: Conn, postgres_dsn: str
) -> None:
    # Polls too rarely to matter within TIMEOUT: only the NOTIFY at commit brings "s".
    reader = await PostgresStore.open(postgres_dsn, poll_interval=600)
    wakeups = reader.wakeups()
    try:
        await asyncio.wait_for(reader._listener.connected.wait(), TIMEOUT)
        await store.append_in(app, "s", work(), consumers=[])
        await app.commit()
        while (got := await asyncio.wait_for(anext(wakeups), TIMEOUT)) != "s":
            assert got is None
    finally:
        await wakeups.aclose()
        await reader.close()
    stream = store.stream("t")
    try:
        await store.append_in(app, "t", [NewEvent("rolled back")], consumers=[])
        await app.rollback()
        await store.append_in(app, "t", [NewEvent("committed")], consumers=[])
        await app.commit()
        first = await asyncio.wait_for(anext(stream), TIMEOUT)
        assert (first.index, first.type) == (1, "committed")
    finally:
        await stream.aclose()  # type: ignore[attr-defined]


# -- duplicate ids ---------------------------------------------------------------------


async def test_stored_ids_replay_within_the_transaction_and_after_it(
    store: PostgresStore, app: Conn
) -> None:
    batch = [NewEvent("a", id="e1"), NewEvent("b", id="e2")]
    first = await store.append_in(app, "s", batch, consumers=[])
    again = await store.append_in(app, "s", batch, consumers=[])
    assert again.events == first.events
    await app.commit()
    after = await store.append_in(app, "s", batch, consumers=[])
    assert after.events == first.events
    await app.commit()  # a replay locks the session row too: until then append() would wait
    assert (await store.append("s", batch, consumers=[])).events == first.events
    assert [e.id for e in await store.read("s")] == ["e1", "e2"]


async def test_a_partial_duplicate_raises_and_leaves_the_callers_transaction_usable(
    store: PostgresStore, app: Conn, postgres_dsn: str
) -> None:
    async with app.transaction():
        await app.execute("insert into public.orders values ('o1')")
        await store.append_in(app, "s", [NewEvent("a", id="e1")], consumers=[])
        with pytest.raises(A2Error) as caught:
            await store.append_in(
                app, "s", [NewEvent("a", id="e1"), NewEvent("b", id="e2")], consumers=[]
            )
        assert caught.value.code == "PARTIAL_DUPLICATE_BATCH"
        assert status(app) == TransactionStatus.INTRANS
        await app.execute("insert into public.orders values ('o2')")
    assert await orders(postgres_dsn) == ["o1", "o2"]
    assert [e.id for e in await store.read("s")] == ["e1"]


# -- bad arguments and bad connections -------------------------------------------------

INVALID = "INVALID_ARGUMENT"
BAD_ARGUMENTS: list[tuple[str, dict[str, Any], str]] = [
    ("session_id", {"session_id": ""}, INVALID),
    ("session_id", {"session_id": 7}, INVALID),
    ("events", {"events": "not a list"}, INVALID),
    ("events", {"events": [{"type": "a"}]}, INVALID),
    ("events", {"events": [NewEvent("")]}, INVALID),
    ("events", {"events": [NewEvent("a2.cleared")]}, INVALID),
    ("events", {"events": [NewEvent("a", {"n": float("nan")})]}, INVALID),
    (
        "events",
        {"events": [NewEvent("a", id="x"), NewEvent("b", id="x")]},
        "PARTIAL_DUPLICATE_BATCH",
    ),
    ("consumers", {"consumers": "audit"}, INVALID),
    ("consumers", {"consumers": [Consumer("")]}, INVALID),
    ("consumers", {"consumers": [None]}, INVALID),
    ("origin_index", {"origin_index": -1}, INVALID),
    ("origin_index", {"origin_index": "1"}, INVALID),
    ("log target", {"events": [NewEvent("a", targets=[Target("audit")])]}, INVALID),
]


@pytest.mark.parametrize(
    ("bad", "code"),
    [(bad, code) for _, bad, code in BAD_ARGUMENTS],
    ids=[f"{name}-{i}" for i, (name, _, _) in enumerate(BAD_ARGUMENTS)],
)
async def test_bad_arguments_raise_and_leave_the_transaction_as_it_was(
    store: PostgresStore, app: Conn, postgres_dsn: str, bad: dict[str, Any], code: str
) -> None:
    call: dict[str, Any] = {
        "session_id": "s",
        "events": [NewEvent("a")],
        "consumers": [Consumer("audit", LogSpec())],
        **bad,
    }
    async with app.transaction():
        await app.execute("insert into public.orders values ('o1')")
        with pytest.raises(A2Error) as caught:
            await store.append_in(app, **call)
        assert caught.value.code == code
        assert status(app) == TransactionStatus.INTRANS
    assert await orders(postgres_dsn) == ["o1"]
    await nothing_stored(store)


async def test_bad_arguments_on_an_idle_connection_leave_it_idle(
    store: PostgresStore, app: Conn
) -> None:
    await store.register_consumers([Consumer("audit", LogSpec())])
    # Refused once the registry was read in the transaction this call began.
    with pytest.raises(A2Error, match="INVALID_ARGUMENT"):
        await store.append_in(app, "s", [NewEvent("a", targets=[Target("audit")])])
    assert status(app) == TransactionStatus.IDLE
    with pytest.raises(A2Error, match="INVALID_ARGUMENT"):
        await store.append_in(app, "", [NewEvent("a")])
    assert status(app) == TransactionStatus.IDLE
    await nothing_stored(store)


async def refused(store: PostgresStore, conn: Any, words: str) -> None:
    """``append_in`` on ``conn`` is ``INVALID_ARGUMENT``, saying ``words``."""
    with pytest.raises(A2Error) as caught:
        await store.append_in(conn, "s", [NewEvent("a", targets=[Target("worker")])])
    assert caught.value.code == "INVALID_ARGUMENT"
    assert words in caught.value.message


async def test_connections_that_cannot_take_the_append_are_refused(
    store: PostgresStore, postgres_dsn: str
) -> None:
    with psycopg.Connection.connect(postgres_dsn) as sync:
        await refused(store, sync, "got a sync psycopg.Connection")
        assert status(sync) == TransactionStatus.IDLE
    for value in (None, postgres_dsn, store.pool):
        await refused(store, value, "conn must be a psycopg.AsyncConnection")
    async with await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as auto:
        await refused(store, auto, "autocommit mode outside a transaction")
        assert status(auto) == TransactionStatus.IDLE
        async with auto.transaction():  # in a transaction block, autocommit is fine
            await store.append_in(auto, "ok", [NewEvent("a")])
    failed = await psycopg.AsyncConnection.connect(postgres_dsn)
    with pytest.raises(psycopg.errors.DivisionByZero):
        await failed.execute("select 1 / 0")
    await refused(store, failed, "its transaction has failed")
    assert status(failed) == TransactionStatus.INERROR
    await failed.close()
    await refused(store, failed, "conn is closed")
    await nothing_stored(store)
    assert [e.type for e in await store.read("ok")] == ["a"]


async def test_a_database_without_the_layout_is_store_not_configured(
    store: PostgresStore, postgres_server_dsn: str
) -> None:
    with scratch_database(postgres_server_dsn) as empty:
        # dict rows on the caller's connection: the layout check reads with its own.
        async with await psycopg.AsyncConnection.connect(empty, row_factory=dict_row) as conn:
            choices: list[list[Consumer] | None] = [[], None]
            for consumers in choices:
                with pytest.raises(A2Error) as caught:
                    await store.append_in(conn, "s", work(), consumers=consumers)
                assert caught.value.code == "STORE_NOT_CONFIGURED"
                assert "has no a2pg tables" in caught.value.message
                assert "a2pg migrate" in caught.value.message
                assert status(conn) == TransactionStatus.IDLE
            async with conn.transaction():
                with pytest.raises(A2Error, match="STORE_NOT_CONFIGURED"):
                    await store.append_in(conn, "s", work(), consumers=[])
                cur = await conn.execute("select 1 as one")  # the transaction still works
                assert await cur.fetchone() == {"one": 1}
    await nothing_stored(store)


async def test_a_database_without_the_stores_schema_names_it(
    postgres_server_dsn: str, postgres_dsn: str
) -> None:
    with scratch_database(postgres_server_dsn) as elsewhere:
        upgrade(elsewhere, schema="a2")
        store = await PostgresStore.open(elsewhere, schema="a2")
        try:
            # The test's database has the layout in public only.
            async with await psycopg.AsyncConnection.connect(postgres_dsn) as conn:
                with pytest.raises(A2Error) as caught:
                    await store.append_in(conn, "s", [NewEvent("a")], consumers=[])
        finally:
            await store.close()
    assert caught.value.code == "STORE_NOT_CONFIGURED"
    assert "schema 'a2' has no a2pg tables" in caught.value.message


# -- the caller's connection, not the store's -------------------------------------------


async def test_the_callers_connection_state_is_left_alone_and_nothing_is_prepared(
    store: PostgresStore, postgres_dsn: str
) -> None:
    await store.register_consumers([Consumer("audit", LogSpec())])
    conn = await psycopg.AsyncConnection.connect(postgres_dsn, row_factory=dict_row)
    conn.prepare_threshold = 0  # psycopg would prepare every statement at once
    try:
        before = await (await conn.execute("show all", prepare=False)).fetchall()
        for _ in range(3):
            await store.append_in(conn, "s", work(2))
            await store.append_in(conn, "s", [NewEvent("a", id="e1")], consumers=[])
        await conn.commit()
        cur = await conn.execute(
            "select count(*) as n from pg_catalog.pg_prepared_statements", prepare=False
        )
        assert await cur.fetchone() == {"n": 0}
        assert conn.row_factory is dict_row
        assert conn.prepare_threshold == 0
        assert not conn.autocommit
        after = await (await conn.execute("show all", prepare=False)).fetchall()
        assert after == before
    finally:
        await conn.close()
    assert len(await store.read("s")) == 7


async def test_the_stores_pool_is_not_used(postgres_dsn: str, app: Conn) -> None:
    store = await PostgresStore.open(postgres_dsn, min_size=1, max_size=1, call_timeout=60)
    try:
        await store.register_consumers([Consumer("audit", LogSpec())])
        async with store.pool.connection():  # someone else holds the pool's one connection
            result = await asyncio.wait_for(store.append_in(app, "s", work()), TIMEOUT)
            await app.commit()
        assert [e.index for e in result.events] == [1]
        assert {c.consumer for c in await store.cursors("s")} == {"audit", "worker"}
    finally:
        await store.close()


async def test_a_plain_append_of_the_session_waits_for_the_commit_and_takes_the_next_indexes(
    store: PostgresStore, app: Conn
) -> None:
    await store.append_in(app, "s", work(2), consumers=[])
    waiting = asyncio.ensure_future(store.append("s", work(), consumers=[]))
    other = await store.append("other", work(), consumers=[])  # other sessions do not wait
    assert [e.index for e in other.events] == [1]
    await asyncio.sleep(0.3)
    assert not waiting.done()  # the session row is locked until the caller commits
    await app.commit()
    later = await asyncio.wait_for(waiting, TIMEOUT)
    assert [e.index for e in later.events] == [3]
    assert [e.index for e in await store.read("s")] == [1, 2, 3]


async def test_a_session_cleared_below_the_origin_raises_and_writes_nothing(
    store: PostgresStore, app: Conn
) -> None:
    await store.append("s", work(2), consumers=[])
    await store.clear("s")
    async with app.transaction():
        with pytest.raises(A2Error, match="SESSION_CLEARED"):
            await store.append_in(app, "s", [NewEvent("a")], consumers=[], origin_index=1)
        assert status(app) == TransactionStatus.INTRANS
    assert [e.type for e in await store.read("s")] == ["a2.cleared"]


async def test_an_empty_batch_writes_nothing_and_says_whether_work_is_pending(
    store: PostgresStore, app: Conn
) -> None:
    await store.append("s", work(), consumers=[])
    result = await store.append_in(app, "s", [])
    assert result.events == [] and result.has_pending
    assert not (await store.append_in(app, "s", [], consumers=[])).has_pending
    await app.rollback()
    assert len(await store.read("s")) == 1


async def test_a_closed_store_refuses(postgres_dsn: str, app: Conn) -> None:
    store = await PostgresStore.open(postgres_dsn)
    await store.close()
    with pytest.raises(A2Error, match="STORE_UNAVAILABLE"):
        await store.append_in(app, "s", [NewEvent("a")])
    assert status(app) == TransactionStatus.IDLE


async def test_through_a_transaction_pooler_nothing_breaks(
    store: PostgresStore, pgbouncer: Callable[[str], PgBouncer], postgres_dsn: str
) -> None:
    """Two application connections through PgBouncer in transaction mode (1.18 keeps no
    prepared statement: one prepared in a transaction is missing in the next, which may
    get another server connection), each set to prepare every statement at once: only
    the statements the store leaves unprepared can run there, again and again."""
    await store.register_consumers([Consumer("audit", LogSpec())])
    dsn = pgbouncer("transaction").dsn(postgres_dsn)
    apps = [await psycopg.AsyncConnection.connect(dsn) for _ in range(2)]
    try:
        for conn in apps:
            conn.prepare_threshold = 0
        for round_ in range(4):
            for n, conn in enumerate(apps):
                async with conn.transaction():
                    await store.append_in(conn, f"s{n}", work())
                    await store.append_in(conn, f"s{n}", [NewEvent("a", id=f"e{round_}")])
    finally:
        for conn in apps:
            await conn.close()
    assert [len(await store.read(f"s{n}")) for n in range(2)] == [8, 8]
