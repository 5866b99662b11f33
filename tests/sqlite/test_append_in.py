"""append_in on SQLite: the append inside the application's own sqlite3 transaction.

The events commit or roll back with the application's rows; other stores' wakeups and
streams see them only after the commit; bad connections and bad arguments write nothing
and leave the caller's transaction as it was; the store's own connections are not used.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from a2pg import A2Error, Consumer, LogSpec, NewEvent, Target
from a2pg.sqlite import SqliteStore
from tests.backends import SqliteTemplate

from ..worker.helpers import bounded

HOUR = 3600.0


def work(count: int = 1) -> list[NewEvent]:
    return [NewEvent("work", {"n": n}, targets=[Target("worker")]) for n in range(count)]


@pytest.fixture
def path(sqlite_template: SqliteTemplate, tmp_path: Path) -> Path:
    """A migrated file with an ``orders`` table of the application's beside the store's."""
    copied = sqlite_template.copy(tmp_path)
    with sqlite3.connect(copied) as conn:
        conn.execute("create table orders (id text primary key)")
    return copied


@pytest.fixture
async def store(path: Path) -> AsyncIterator[SqliteStore]:
    opened = await SqliteStore.open(path, poll_interval=HOUR)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def app(path: Path) -> Iterator[sqlite3.Connection]:
    """The application's connection, in Python's default mode (not autocommit: a write
    begins a transaction, which ``commit()`` ends)."""
    conn = sqlite3.connect(path)
    try:
        yield conn
    finally:
        conn.close()


def orders(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("select id from orders order by id")]


async def nothing_stored(store: SqliteStore) -> None:
    """Nothing of session ``s`` was committed."""
    assert await store.read("s") == []
    assert await store.cursors("s") == []
    assert "s" not in [info.session_id for info in await store.sessions()]


def in_transaction(conn: sqlite3.Connection) -> bool:
    """Read through a call, so that mypy narrows nothing between two reads."""
    return conn.in_transaction


# -- commit and rollback ---------------------------------------------------------------


async def test_commit_keeps_the_rows_and_the_events_together(
    store: SqliteStore, app: sqlite3.Connection, path: Path
) -> None:
    app.execute("insert into orders values ('o1')")
    result = await store.append_in(app, "s", work(2))
    assert [event.index for event in result.events] == [1, 2]
    assert result.has_pending
    assert await store.read("s") == []  # not committed: the store's reader sees nothing
    assert orders(path) == []
    app.commit()
    assert orders(path) == ["o1"]
    assert await store.read("s") == result.events
    assert [(c.consumer, c.head) for c in await store.cursors("s")] == [
        ("worker", 1),
        ("worker", 2),
    ]


async def test_an_idle_connection_gets_a_transaction_begun_and_the_caller_commits(
    store: SqliteStore, app: sqlite3.Connection
) -> None:
    assert not in_transaction(app)
    await store.append_in(app, "s", [NewEvent("a")], consumers=[])
    assert in_transaction(app)
    other = sqlite3.connect(store.path, timeout=0)
    with pytest.raises(sqlite3.OperationalError, match="locked"):  # the write lock is held
        other.execute("begin immediate")
    other.close()
    app.commit()
    assert [event.type for event in await store.read("s")] == ["a"]


async def test_rollback_drops_the_rows_events_and_cursors(
    store: SqliteStore, app: sqlite3.Connection, path: Path
) -> None:
    await store.register_consumers([Consumer("audit", LogSpec())])
    app.execute("insert into orders values ('o1')")
    await store.append_in(
        app, "s", [NewEvent("a", targets=[Target("worker"), Target("mailer", "m")])]
    )
    app.rollback()
    assert orders(path) == []
    await nothing_stored(store)
    later = await store.append("s", [NewEvent("b")], consumers=[])
    assert [event.index for event in later.events] == [1]


async def test_a_savepoint_rolled_back_drops_only_what_it_appended(
    store: SqliteStore, app: sqlite3.Connection, path: Path
) -> None:
    app.execute("insert into orders values ('o1')")
    await store.append_in(app, "s", [NewEvent("kept")], consumers=[])
    app.execute("savepoint mine")
    app.execute("insert into orders values ('o2')")
    await store.append_in(app, "s", work(), consumers=[])
    app.execute("rollback to savepoint mine")
    app.execute("release savepoint mine")
    await store.append_in(app, "s", [NewEvent("after")], consumers=[])
    app.commit()
    assert orders(path) == ["o1"]
    assert [(e.index, e.type) for e in await store.read("s")] == [(1, "kept"), (2, "after")]
    assert await store.cursors("s") == []


# -- wakeups and streams ---------------------------------------------------------------


async def test_another_stores_wakeups_see_the_events_only_after_the_commit(
    store: SqliteStore, app: sqlite3.Connection, path: Path
) -> None:
    # Looks every 50 ms whatever the change signal says: ten looks find nothing claimable.
    watching = await SqliteStore.open(path, poll_interval=0.05)
    wakeups = watching.wakeups()
    try:
        assert await bounded(anext(wakeups)) is None  # the first look
        await store.append_in(app, "s", work(), consumers=[])
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(anext(wakeups), 0.5)
        app.commit()
        assert await bounded(anext(wakeups)) == "s"
    finally:
        await wakeups.aclose()
        await watching.close()


async def test_a_stream_never_sees_a_rolled_back_append(
    store: SqliteStore, app: sqlite3.Connection, path: Path
) -> None:
    watching = await SqliteStore.open(path, poll_interval=HOUR)
    stream = watching.stream("s")
    try:
        await store.append_in(app, "s", [NewEvent("rolled back")], consumers=[])
        app.rollback()
        await store.append_in(app, "s", [NewEvent("committed")], consumers=[])
        app.commit()
        first = await bounded(anext(stream))
        assert (first.index, first.type) == (1, "committed")
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
        await watching.close()


# -- duplicate ids ---------------------------------------------------------------------


async def test_stored_ids_replay_within_the_transaction_and_after_it(
    store: SqliteStore, app: sqlite3.Connection
) -> None:
    batch = [NewEvent("a", id="e1"), NewEvent("b", id="e2")]
    first = await store.append_in(app, "s", batch, consumers=[])
    assert (await store.append_in(app, "s", batch, consumers=[])).events == first.events
    app.commit()
    assert (await store.append_in(app, "s", batch, consumers=[])).events == first.events
    app.commit()  # the replay began a transaction (BEGIN IMMEDIATE): until then append() waits
    assert (await store.append("s", batch, consumers=[])).events == first.events
    assert [e.id for e in await store.read("s")] == ["e1", "e2"]


async def test_a_partial_duplicate_raises_and_leaves_the_callers_transaction_usable(
    store: SqliteStore, app: sqlite3.Connection, path: Path
) -> None:
    app.execute("insert into orders values ('o1')")
    await store.append_in(app, "s", [NewEvent("a", id="e1")], consumers=[])
    with pytest.raises(A2Error) as caught:
        await store.append_in(
            app, "s", [NewEvent("a", id="e1"), NewEvent("b", id="e2")], consumers=[]
        )
    assert caught.value.code == "PARTIAL_DUPLICATE_BATCH"
    assert in_transaction(app)
    app.execute("insert into orders values ('o2')")
    app.commit()
    assert orders(path) == ["o1", "o2"]
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
    store: SqliteStore, app: sqlite3.Connection, path: Path, bad: dict[str, Any], code: str
) -> None:
    call: dict[str, Any] = {
        "session_id": "s",
        "events": [NewEvent("a")],
        "consumers": [Consumer("audit", LogSpec())],
        **bad,
    }
    app.execute("insert into orders values ('o1')")
    with pytest.raises(A2Error) as caught:
        await store.append_in(app, **call)
    assert caught.value.code == code
    assert in_transaction(app)
    app.commit()
    assert orders(path) == ["o1"]
    await nothing_stored(store)


async def test_bad_arguments_on_an_idle_connection_leave_it_idle(
    store: SqliteStore, app: sqlite3.Connection
) -> None:
    await store.register_consumers([Consumer("audit", LogSpec())])
    with pytest.raises(A2Error, match="INVALID_ARGUMENT"):
        await store.append_in(app, "s", [NewEvent("a", targets=[Target("audit")])])
    assert not in_transaction(app)
    with pytest.raises(A2Error, match="PARTIAL_DUPLICATE_BATCH"):  # raised by the statements
        await store.append_in(app, "s", [NewEvent("a", id="x"), NewEvent("b", id="x")])
    assert not in_transaction(app)
    await nothing_stored(store)


async def refused(store: SqliteStore, conn: Any, words: str) -> None:
    """``append_in`` on ``conn`` is ``INVALID_ARGUMENT``, saying ``words``."""
    with pytest.raises(A2Error) as caught:
        await store.append_in(conn, "s", [NewEvent("a", targets=[Target("worker")])])
    assert caught.value.code == "INVALID_ARGUMENT"
    assert words in caught.value.message


async def test_connections_that_cannot_take_the_append_are_refused(
    store: SqliteStore, path: Path
) -> None:
    for value in (None, str(path), path, store._db.writer):
        await refused(store, value, "conn must be a sqlite3.Connection")
    auto = sqlite3.connect(path, isolation_level=None)
    await refused(store, auto, "autocommit mode outside a transaction")
    assert not in_transaction(auto)
    auto.execute("begin immediate")  # in an explicit transaction, autocommit is fine
    await store.append_in(auto, "ok", [NewEvent("a")])
    auto.commit()
    auto.close()
    if sys.version_info >= (3, 12):
        modern = sqlite3.connect(path, autocommit=True)
        await refused(store, modern, "autocommit mode outside a transaction")
        modern.close()
    closed = sqlite3.connect(path)
    closed.close()
    await refused(store, closed, "conn is closed")
    made: list[sqlite3.Connection] = []
    maker = threading.Thread(target=lambda: made.append(sqlite3.connect(path)))
    maker.start()
    maker.join()
    await refused(store, made[0], "thread")
    await nothing_stored(store)
    assert [e.type for e in await store.read("ok")] == ["a"]


async def test_a_file_without_the_layout_is_store_not_configured(
    store: SqliteStore, tmp_path: Path
) -> None:
    empty = sqlite3.connect(tmp_path / "app.db")
    memory = sqlite3.connect(":memory:")
    choices: list[list[Consumer] | None] = [[], None]
    for conn in (empty, memory):
        for consumers in choices:
            with pytest.raises(A2Error) as caught:
                await store.append_in(conn, "s", work(), consumers=consumers)
            assert caught.value.code == "STORE_NOT_CONFIGURED"
            assert "has no a2pg tables" in caught.value.message
            assert not in_transaction(conn)
        conn.close()
    await nothing_stored(store)


async def test_another_a2pg_file_is_refused(
    store: SqliteStore, sqlite_template: SqliteTemplate, tmp_path: Path
) -> None:
    (tmp_path / "other").mkdir()
    other = sqlite3.connect(sqlite_template.copy(tmp_path / "other"))
    with pytest.raises(A2Error) as caught:
        await store.append_in(other, "s", [NewEvent("a")], consumers=[])
    assert caught.value.code == "INVALID_ARGUMENT"
    assert "not on the store's" in caught.value.message
    other.close()


async def test_the_same_file_by_another_path_is_the_store_file(
    store: SqliteStore, path: Path, tmp_path: Path
) -> None:
    link = tmp_path / "link.db"
    link.symlink_to(path)
    conn = sqlite3.connect(link)
    await store.append_in(conn, "s", [NewEvent("a")], consumers=[])
    conn.commit()
    conn.close()
    assert len(await store.read("s")) == 1


# -- the caller's connection, not the store's -------------------------------------------


async def test_the_callers_row_factory_is_left_alone(
    store: SqliteStore, app: sqlite3.Connection
) -> None:
    def strange(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> str:
        return "not a row"

    await store.register_consumers([Consumer("audit", LogSpec())])
    app.row_factory = strange
    result = await store.append_in(app, "s", [*work(2), NewEvent("a", id="e1")])
    assert (await store.append_in(app, "s", [NewEvent("a", id="e1")])).events == [result.events[2]]
    assert app.row_factory is strange
    app.commit()
    assert len(await store.read("s")) == 3
    assert app.execute("select 1").fetchone() == "not a row"


async def test_the_stores_own_connections_are_not_used(
    store: SqliteStore, app: sqlite3.Connection
) -> None:
    await store.register_consumers([Consumer("audit", LogSpec())])
    release = threading.Event()
    held = [
        asyncio.ensure_future(connection.call(lambda conn: release.wait(30)))
        for connection in (store._db.writer, store._db.reader)
    ]
    try:
        await asyncio.sleep(0.05)
        result = await asyncio.wait_for(store.append_in(app, "s", work()), 5)
        assert [e.index for e in result.events] == [1]
        assert all(not task.done() for task in held)  # both threads were busy throughout
    finally:
        release.set()
        await asyncio.gather(*held)
    app.commit()
    assert {c.consumer for c in await store.cursors("s")} == {"audit", "worker"}


async def test_a_plain_append_waits_for_the_commit_and_takes_the_next_indexes(
    store: SqliteStore, app: sqlite3.Connection
) -> None:
    await store.append_in(app, "s", work(2), consumers=[])
    waiting = asyncio.ensure_future(store.append("s", work(), consumers=[]))
    await asyncio.sleep(0.3)
    assert not waiting.done()  # the caller's transaction holds the file's write lock
    app.commit()
    later = await asyncio.wait_for(waiting, 10)
    assert [e.index for e in later.events] == [3]
    assert [e.index for e in await store.read("s")] == [1, 2, 3]


async def test_a_deferred_transaction_older_than_another_commit_cannot_append(
    store: SqliteStore, app: sqlite3.Connection
) -> None:
    app.execute("begin")  # deferred: a read snapshot, no write lock
    assert app.execute("select count(*) from a2_events").fetchone() == (0,)
    await store.append("s", [NewEvent("elsewhere")], consumers=[])
    with pytest.raises(A2Error) as caught:
        await store.append_in(app, "s", [NewEvent("a")], consumers=[])
    assert caught.value.code == "STORE_UNAVAILABLE"
    assert "BEGIN IMMEDIATE" in caught.value.message
    assert in_transaction(app)  # the caller's to roll back and run again
    app.rollback()
    await store.append_in(app, "s", [NewEvent("a")], consumers=[])
    app.commit()
    assert [e.index for e in await store.read("s")] == [1, 2]


async def test_a_session_cleared_below_the_origin_raises_and_writes_nothing(
    store: SqliteStore, app: sqlite3.Connection
) -> None:
    await store.append("s", work(2), consumers=[])
    await store.clear("s")
    app.execute("insert into orders values ('o1')")
    with pytest.raises(A2Error, match="SESSION_CLEARED"):
        await store.append_in(app, "s", [NewEvent("a")], consumers=[], origin_index=1)
    assert in_transaction(app)
    app.commit()
    assert [e.type for e in await store.read("s")] == ["a2.cleared"]


async def test_an_empty_batch_writes_nothing_and_says_whether_work_is_pending(
    store: SqliteStore, app: sqlite3.Connection
) -> None:
    await store.append("s", work(), consumers=[])
    result = await store.append_in(app, "s", [])
    assert result.events == [] and result.has_pending
    assert not (await store.append_in(app, "s", [], consumers=[])).has_pending
    assert not in_transaction(app)
    assert len(await store.read("s")) == 1


async def test_a_closed_store_refuses(path: Path, app: sqlite3.Connection) -> None:
    store = await SqliteStore.open(path)
    await store.close()
    with pytest.raises(A2Error, match="STORE_UNAVAILABLE"):
        await store.append_in(app, "s", [NewEvent("a")])
    assert not in_transaction(app)
