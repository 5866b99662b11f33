"""The SQLite layout: what ``open`` refuses, what ``migrate`` makes, and the seed's files.

A file the JavaScript SQLite store (seed 000) wrote has the ``cursors-1`` layout and
no a2pg revision: it is recognised as revision 0001 and migrated on, its data kept
(times from milliseconds to microseconds). The layout from before consumers is refused
by both, as the seed refused it. Nothing here writes a file it refuses.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from a2pg import A2Error, Completed, NewEvent
from a2pg.sqlite import SqliteStore, upgrade
from a2pg.sqlite.layout import HEAD_REVISION, LAYOUT, TABLES, inspect_file
from a2pg.sqlite.migrate import migrations

SEED_MS = 1_767_225_600_123
"""2026-01-01T00:00:00.123Z as the seed stores it (milliseconds)."""
SEED_TIME = datetime(2026, 1, 1, 0, 0, 0, 123_000, tzinfo=UTC)


def seed_database(path: Path) -> None:
    """A file as the seed's SQLite store leaves it: its schema (migration 0001 is that
    schema, statement for statement), its layout record, and rows in its formats: times
    in milliseconds, causes and types as JSON text."""
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in migrations()[0].statements:
        conn.execute(statement)
    conn.execute("pragma journal_mode = wal")
    cause = json.dumps({"consumer": "job", "lane": None, "index": 1, "attempt": 1})
    conn.executemany(
        "insert into a2_events (session_id, idx, event_type, payload, event_id, created_at,"
        " cause) values (?, ?, ?, ?, ?, ?, ?)",
        [
            ("s", 1, "order.placed", '{"total": 1e300}', "e1", SEED_MS, None),
            ("s", 2, "order.paid", '{"n": 12345678901234567890}', "e2", SEED_MS, cause),
        ],
    )
    # Event 1 completed by attempt 1 of "job"; event 2 waits for "mail", claimed once and
    # its lease long lapsed.
    conn.execute(
        "insert into a2_cursors (session_id, consumer, cursor_key, lane, kind, position, head,"
        " completed_idx, completed_attempt, returned_event_ids)"
        " values ('s', 'job', '#1', null, 'event', 1, null, 1, 1, '[\"e2\"]')"
    )
    conn.execute(
        "insert into a2_cursors (session_id, consumer, cursor_key, lane, kind, position, head,"
        " attempt_count, first_claimed_at, last_claimed_at, claim_holder, claim_expires_at)"
        f" values ('s', 'mail', '#2', null, 'event', 1, 2, 1, {SEED_MS}, {SEED_MS}, 'w1',"
        f" {SEED_MS + 30_000})"
    )
    conn.execute(
        "insert into a2_snapshots (session_id, reducer_name, up_to_index, state, updated_at)"
        f" values ('s', 'total', 1, '{{\"sum\": 3}}', {SEED_MS})"
    )
    conn.close()


async def test_a_file_the_seed_wrote_migrates_on_with_its_data(tmp_path: Path) -> None:
    path = tmp_path / "seed.db"
    seed_database(path)
    status = inspect_file(path)
    assert (status.state, status.revision) == ("older", "0001")
    assert "JavaScript SQLite store" in status.describe()
    with pytest.raises(A2Error) as refused:
        await SqliteStore.open(path)
    assert refused.value.code == "STORE_NOT_CONFIGURED"
    assert "a2pg migrate --sqlite" in refused.value.message

    assert upgrade(path).is_current
    store = await SqliteStore.open(path)
    try:
        first, second = await store.read("s")
        assert (first.id, first.payload, first.created_at) == ("e1", {"total": 1e300}, SEED_TIME)
        assert second.payload == {"n": 12345678901234567890}
        assert second.cause is not None and second.cause.consumer == "job"
        state = await store.read_state("s", "total")
        assert (state.snapshot_index, state.state) == (1, {"sum": 3})
        # The lapsed lease is claimable: the claim counts the failure, as on any backend.
        (head,) = await store.claim_any(holder="w2", ttl=30)
        assert (head.consumer, head.index, head.attempt, head.failure_count) == ("mail", 2, 2, 1)
        assert head.dispatch.first_claimed_at == SEED_TIME
        # A retry of the seed's completion of event 1 replays what it returned.
        retry = NewEvent("order.paid", {"n": 12345678901234567890}, id="e2")
        replayed = await store.complete_attempt(
            "s", consumer="job", lane=None, index=1, attempt=1, events=[retry]
        )
        assert replayed == Completed([second])
        (third,) = (await store.append("s", [NewEvent("note", id="e3")])).events
        assert (third.index, third.created_at > SEED_TIME) == (3, True)
    finally:
        await store.close()


def test_the_layout_from_before_consumers_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("create table a2_events (session_id text, idx integer, processed_at integer)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    assert inspect_file(path).state == "pre-consumer"
    with pytest.raises(A2Error) as refused:
        upgrade(path)
    assert refused.value.code == "STORE_NOT_CONFIGURED"
    assert "before consumers" in refused.value.message
    with pytest.raises(A2Error):
        asyncio.run(SqliteStore.open(path))
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("setup", "state"),
    [
        ("create table a2_events (x integer)", "unknown"),
        ("create table other (x integer)", "empty"),
    ],
)
def test_files_without_an_a2pg_record(tmp_path: Path, setup: str, state: str) -> None:
    path = tmp_path / "x.db"
    conn = sqlite3.connect(path)
    conn.execute(setup)
    conn.commit()
    conn.close()
    status = inspect_file(path)
    assert status.state == state
    assert "a2pg migrate --sqlite" in status.fix()
    with pytest.raises(A2Error):
        asyncio.run(SqliteStore.open(path))
    if state == "unknown":
        with pytest.raises(A2Error):
            upgrade(path)
    else:
        assert upgrade(path).is_current


def test_a_newer_revision_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    upgrade(path)
    conn = sqlite3.connect(path)
    conn.execute("update a2_meta set value = '0099' where key = 'revision'")
    conn.commit()
    conn.close()
    status = inspect_file(path)
    assert (status.state, status.revision) == ("newer", "0099")
    with pytest.raises(A2Error) as refused:
        upgrade(path)
    assert "newer a2pg" in refused.value.message
    with pytest.raises(A2Error):
        asyncio.run(SqliteStore.open(path))


def test_open_never_creates_a_file_and_names_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "nothing.db"
    with pytest.raises(A2Error) as refused:
        asyncio.run(SqliteStore.open(path))
    assert refused.value.code == "STORE_NOT_CONFIGURED"
    assert f"a2pg migrate --sqlite {path}" in refused.value.message
    assert not path.exists()
    assert inspect_file(path).state == "missing"


def test_a_file_that_is_not_sqlite_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello, not a database\n" * 100)
    for attempt in (lambda: upgrade(path), lambda: asyncio.run(SqliteStore.open(path))):
        with pytest.raises(A2Error) as refused:
            attempt()
        assert refused.value.code == "STORE_NOT_CONFIGURED"
        assert "not a SQLite database" in refused.value.message
    assert path.read_text() == "hello, not a database\n" * 100


def test_migrations_make_every_table_in_wal_mode_and_repeat_as_no_ops(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "folder" / "a2.db"
    assert upgrade(path).is_current  # the folder is made too
    conn = sqlite3.connect(path)
    tables = {r[0] for r in conn.execute("select name from sqlite_master where type = 'table'")}
    meta = dict(conn.execute("select key, value from a2_meta").fetchall())
    mode = conn.execute("pragma journal_mode").fetchone()[0]
    conn.close()
    assert tables == set(TABLES)
    assert meta == {"layout": LAYOUT, "revision": HEAD_REVISION}
    assert mode == "wal"
    assert upgrade(path).revision == HEAD_REVISION


def test_migrators_started_at_once_take_turns(tmp_path: Path) -> None:
    path = tmp_path / "a2.db"
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def migrate() -> None:
        start.wait()
        try:
            upgrade(path)
        except BaseException as exc:  # collected: the assertion below shows it
            errors.append(exc)

    threads = [threading.Thread(target=migrate) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert inspect_file(path).is_current


def test_bad_paths_are_invalid_arguments(tmp_path: Path) -> None:
    for bad in ("", ":memory:", "a\x00b", 42):
        with pytest.raises(A2Error) as refused:
            asyncio.run(SqliteStore.open(bad))  # type: ignore[arg-type]
        assert refused.value.code == "INVALID_ARGUMENT"
    settings: list[dict[str, object]] = [
        {"synchronous": "off"},
        {"busy_timeout": 0},
        {"poll_interval": float("inf")},
        {"change_interval": -1},
        {"registry_ttl": "1"},
    ]
    for setting in settings:
        with pytest.raises(A2Error) as refused:
            asyncio.run(SqliteStore.open(tmp_path / "a2.db", migrate=True, **setting))  # type: ignore[arg-type]
        assert refused.value.code == "INVALID_ARGUMENT", setting
    assert not (tmp_path / "a2.db").exists()  # refused before anything was made


def test_an_old_sqlite_library_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 31, 1))
    monkeypatch.setattr(sqlite3, "sqlite_version", "3.31.1")
    with pytest.raises(A2Error) as refused:
        upgrade(tmp_path / "a2.db")
    assert "needs SQLite 3.37.0 or newer" in refused.value.message
    assert "3.31.1" in refused.value.message
    assert not (tmp_path / "a2.db").exists()
