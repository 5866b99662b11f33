"""Files the JavaScript SQLite store (seed 000) wrote, migrated by a2pg: what they hold
afterwards, and what the seed's store does with a file a2pg migrated.

Each file is built by the seed's own statements (``seed_store``), in states only the
seed leaves: a clear the seed made while a lane head was pending, claimed or dead (the
seed keeps that lane cursor below its marker, where a2pg's clear drops it), presence
rows in its formats. Migrating is one way: the seed's store refuses the file after.
"""

from __future__ import annotations

import inspect
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from a2pg import Completed, Consumer, LogSpec, NewEvent, Target
from a2pg.ids import FakeClock
from a2pg.sqlite import SqliteStore, codec, upgrade
from a2pg.sqlite.connection import connect
from a2pg.sqlite.layout import inspect_file

from .seed_store import SeedStore, seed_opens

SEED_MS = 1_767_225_600_000
"""2026-01-01T00:00:00Z, as the seed's clock gives it (milliseconds)."""
SEED_TIME = datetime(2026, 1, 1, tzinfo=UTC)
LANE_KEY = codec.cursor_key("x", 0)
MAIL = ("mail", "x")


def seed_lane_cleared_behind(path: Path, state: str) -> None:
    """Session "s": events 1-3 on lane "x" of "mail", 1 completed, then a clear (marker 4)
    while head 2 is ``pending``, ``claimed`` (its lease running) or ``dead``."""
    seed = SeedStore(path, SEED_MS)
    try:
        seed.append("s", [("mail.send", [MAIL])] * 3)
        first = seed.claim("s", "mail", LANE_KEY, "w1", 30_000)
        seed.complete_lane_head("s", "mail", "x", first)
        if state != "pending":
            attempt = seed.claim("s", "mail", LANE_KEY, "w1", 30_000)
            if state == "dead":
                seed.fail("s", "mail", LANE_KEY, attempt, max_failures=1)
        assert seed.clear("s") == 4
        left = seed.conn.execute("select position, head, failed_at from a2_cursors").fetchall()
        assert [tuple(row)[:2] for row in left] == [(1, 2)]  # the seed keeps it below 4
        assert (left[0]["failed_at"] is not None) == (state == "dead")
    finally:
        seed.close()


async def open_migrated(path: Path) -> SqliteStore:
    assert upgrade(path).is_current
    return await SqliteStore.open(path, clock=FakeClock(SEED_TIME + timedelta(days=1)))


def mail_event() -> NewEvent:
    return NewEvent("mail.send", targets=(Target("mail", "x"),))


async def drain(store: SqliteStore) -> list[int]:
    """Claims and completes until nothing is ready: the indexes in the order delivered."""
    delivered: list[int] = []
    for _ in range(10):
        heads = await store.claim_any(holder="w2", ttl=30)
        if not heads:
            break
        for head in heads:
            delivered.append(head.index)
            result = await store.complete_attempt(
                head.session_id,
                consumer=head.consumer,
                lane=head.lane,
                index=head.index,
                attempt=head.attempt,
            )
            assert isinstance(result, Completed)
    return delivered


@pytest.mark.parametrize("state", ["pending", "claimed", "dead"])
async def test_a_lane_the_seed_cleared_behind_its_head_delivers_in_order(
    tmp_path: Path, state: str
) -> None:
    """Issue 18, F1: the lane's next events after the clear, one before reclaim and one
    after, are delivered in index order; none is skipped."""
    path = tmp_path / "seed.db"
    seed_lane_cleared_behind(path, state)
    store = await open_migrated(path)
    try:
        await store.append("s", [mail_event()])
        while not (await store.reclaim("s")).done:
            pass
        await store.append("s", [mail_event()])
        assert await drain(store) == [5, 6]
        assert await store.dead_letters("s") == []
        [lane] = await store.cursors("s")
        assert (lane.consumer, lane.lane, lane.kind, lane.position, lane.head) == (
            "mail",
            "x",
            "lane",
            6,
            None,
        )
    finally:
        await store.close()


async def test_a_lane_cursor_left_below_the_clear_takes_the_lanes_next_event(
    tmp_path: Path,
) -> None:
    """A file migrated before 0002 dropped such cursors still holds one below the clear
    marker: the lane's next event revives it, as the seed's ``queueLaneHead`` does (and
    PostgreSQL's ``queue_lane_heads``)."""
    path = tmp_path / "seed.db"
    seed_lane_cleared_behind(path, "dead")
    assert upgrade(path).is_current
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(  # what the earlier 0002 left: the seed's cursor, its times in microseconds
        "insert into a2_cursors (session_id, consumer, cursor_key, lane, kind, position, head,"
        " attempt_count, failure_count, last_failed_attempt, failed_at)"
        " values ('s', 'mail', ?, 'x', 'lane', 1, 2, 2, 1, 2, ?)",
        (LANE_KEY, SEED_MS * 1000),
    )
    conn.close()
    store = await SqliteStore.open(path, clock=FakeClock(SEED_TIME + timedelta(days=1)))
    try:
        await store.append("s", [mail_event()])
        await store.append("s", [mail_event()])
        assert await drain(store) == [5, 6]
    finally:
        await store.close()


async def test_a_log_consumer_may_follow_a_lane_the_seed_cleared(tmp_path: Path) -> None:
    """The migration drops what a2pg's clear drops, the lane cursors below a clear marker:
    a log consumer on that lane is then no targeted consumer's (no ``INVALID_ARGUMENT``)."""
    path = tmp_path / "seed.db"
    seed_lane_cleared_behind(path, "claimed")
    store = await open_migrated(path)
    try:
        woken = await store.wake_log("s", Consumer("mail", LogSpec(lane="x")))
        assert (woken.cursor.kind, woken.cursor.position, woken.cursor.head) == ("log", 4, None)
    finally:
        await store.close()


# -- presence (F2/F3) -------------------------------------------------------------------


async def test_presence_rows_survive_the_migration(tmp_path: Path) -> None:
    """The seed's presence rows are kept: times from milliseconds to microseconds, its
    unencoded ``seen`` text read back as that string; a tombstone stays one (kept for
    ordering, never read) and an expired row is swept as usual."""
    path = tmp_path / "seed.db"
    seed = SeedStore(path, SEED_MS)
    try:
        seed.write_presence(
            "room",
            "ann",
            {"cursor": {"x": 1}, "typing": None},
            seen="tab-1",
            at=SEED_MS + 5,
            ttl_ms=10 * 86_400_000,
        )
        seed.write_presence("room", "bob", {"cursor": 2}, seen="7", at=SEED_MS, ttl_ms=1_000)
    finally:
        seed.close()
    store = await open_migrated(path)
    try:
        rows = await store.presence.read("room")
        assert [(r.participant, r.field, r.value, r.seen) for r in rows] == [
            ("ann", "cursor", {"x": 1}, "tab-1")
        ]
        [row] = rows
        assert row.at == SEED_TIME + timedelta(milliseconds=5)
        assert row.expires_at == SEED_TIME + timedelta(days=10)
        # The tombstone still orders writes: an older write of "typing" does not win.
        older = SEED_TIME + timedelta(milliseconds=1)
        assert (
            await store.presence.write("room", "ann", {"typing": 1}, at=older, seen=0, ttl=60) == {}
        )
    finally:
        await store.close()


# -- one way (F2/F3) -----------------------------------------------------------------------


@pytest.mark.parametrize("made_by", ["seed", "a2pg"])
def test_the_seeds_store_refuses_a_file_a2pg_migrated(tmp_path: Path, made_by: str) -> None:
    """The seed's store would read a2pg's microseconds as milliseconds (every lease for
    millennia, every head missed) and write rows a2pg's ``claim_any`` cannot see: so an
    a2pg file refuses the seed's open, at its first write (its layout record), naming
    a2pg. Nothing is written: a2pg opens the file as before."""
    path = tmp_path / "a2.db"
    if made_by == "seed":
        seed_lane_cleared_behind(path, "pending")
    upgrade(path)
    before = sqlite3.connect(path).execute("select * from a2_meta order by key").fetchall()
    with pytest.raises(sqlite3.IntegrityError) as refused:
        seed_opens(path)
    assert "a2pg" in str(refused.value) and "JavaScript" in str(refused.value)
    conn = sqlite3.connect(path)
    assert conn.execute("select * from a2_meta order by key").fetchall() == before
    conn.close()
    assert inspect_file(path).is_current


def test_the_seeds_store_opens_its_own_file(tmp_path: Path) -> None:
    """Before a2pg migrates it, the seed's file opens in the seed's store as ever."""
    path = tmp_path / "seed.db"
    seed_lane_cleared_behind(path, "pending")
    seed_opens(path)
    assert inspect_file(path).revision == "0001"


# -- the seed's settings -----------------------------------------------------------------


async def test_a_write_waits_ten_seconds_for_the_lock_not_the_seeds_five(tmp_path: Path) -> None:
    """The seed set ``busy_timeout`` to 5000 ms; a2pg's connections wait 10 s by default
    (``busy_timeout=`` of ``open`` sets it)."""
    path = tmp_path / "a2.db"
    upgrade(path)
    conn = connect(path)
    assert conn.execute("pragma busy_timeout").fetchone()[0] == 10_000
    conn.close()
    assert inspect.signature(SqliteStore.open).parameters["busy_timeout"].default == 10.0
    conn = connect(path, busy_timeout=0.25)
    assert conn.execute("pragma busy_timeout").fetchone()[0] == 250
    conn.close()
