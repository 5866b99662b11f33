"""Test data: files as the JavaScript SQLite store (seed 000, experimental-a2 0.22.0,
``dist/store-sqlite.js``) leaves them, written by that store's own statements.

``SeedStore`` is no store: it runs, in the seed's order, the statements the seed's
``append``, ``claimAvailable``, ``completeAttempt``, ``failAttempt``, ``clear`` and
``presence.write`` run, with the seed's parameters (times in integer milliseconds, JSON
text for payloads, causes, types and returned ids), so that a test can put a file in
any state the seed could leave it in, then migrate it with a2pg. The statements are the
seed's text, quoted as data; three lines that fall between the hunks of the seed's diff
are inferred from the parameters the seed binds and marked so. The schema is migration
0001, the seed's layout table for table.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from a2pg.sqlite import codec
from a2pg.sqlite.migrate import migrations

CLEAR_EVENT_TYPE = "a2.cleared"

FRESH_DISPATCH = """
  attempt_count = 0, first_claimed_at = null, last_claimed_at = null,
  claim_holder = null, claim_expires_at = null, failure_count = 0,
  last_failed_at = null, last_failed_attempt = null, last_error = null,
  failed_at = null"""

INSERT_EVENT = """insert into a2_events
       (session_id, idx, event_type, payload, event_id, created_at, cause)
     values (?, ?, ?, ?, ?, ?, ?)"""

SELECT_HEAD = "select coalesce(max(idx), 0) as max from a2_events where session_id = ?"

SELECT_CLEAR_INDEX = "select clear_index from a2_clears where session_id = ?"

INSERT_EVENT_CURSOR = """insert into a2_cursors
       (session_id, consumer, cursor_key, lane, kind, position, head)
     values (?, ?, ?, null, 'event', ?, ?)"""

INSERT_LANE_EVENT = """insert into a2_lane_events (session_id, consumer, lane, idx)
     values (?, ?, ?, ?)"""

QUEUE_LANE_HEAD = f"""insert into a2_cursors
       (session_id, consumer, cursor_key, lane, kind, position, head)
     values (?, ?, ?, ?, 'lane', ?, ?)
     on conflict (session_id, consumer, cursor_key) do update set
       head = excluded.head,
       position = max(a2_cursors.position, excluded.position),
       {FRESH_DISPATCH}
     where a2_cursors.head is null or a2_cursors.head <= excluded.position"""

SELECT_CURSOR = "select * from a2_cursors where session_id = ? and consumer = ? and cursor_key = ?"

CLAIM_HEAD = """update a2_cursors set
                 attempt_count = attempt_count + 1,
                 failure_count = failure_count
                   + case when claim_holder is null then 0 else 1 end,
                 first_claimed_at = coalesce(first_claimed_at, ?),
                 last_claimed_at = ?,
                 claim_holder = ?,
                 claim_expires_at = ?
               where session_id = ? and consumer = ? and cursor_key = ?"""
"""Its ``first_claimed_at`` line lies between two hunks (inferred: the seed binds
``now, now, holder, expiresAt`` before the key)."""

FAIL_HEAD = """update a2_cursors set
               failure_count = ?,
               last_error = ?,
               last_failed_at = ?,
               last_failed_attempt = ?,
               failed_at = ?,
               claim_holder = null,
               claim_expires_at = ?
             where session_id = ? and consumer = ? and cursor_key = ?"""
"""Its ``last_failed_attempt`` line lies between two hunks (inferred: the seed binds
``nextFailureCount, error, now, attempt, failedAt, expiry`` before the key)."""

FINISH_LANE_EVENT = """update a2_lane_events
        set done = 1, completed_attempt = ?, returned_event_ids = ?
      where session_id = ? and consumer = ? and lane = ? and idx = ?"""

NEXT_LANE_HEAD = """select min(idx) as next from a2_lane_events
      where session_id = ? and consumer = ? and lane = ? and done = 0
        and idx > ?"""

MOVE_CURSOR = f"""update a2_cursors set position = ?, head = ?, {FRESH_DISPATCH}
      where session_id = ? and consumer = ? and cursor_key = ?"""

RELEASE_PINS = """delete from a2_snapshot_pins
        where session_id = ? and consumer = ? and cursor_key = ? and event_index = ?"""

MARK_CLEARED = """insert into a2_clears (session_id, clear_index) values (?, ?)
             on conflict (session_id) do update set clear_index = excluded.clear_index"""

RESTART_LOG_CURSORS = f"""update a2_cursors
                set position = ?, head = null, {FRESH_DISPATCH},
                    completed_idx = null, completed_attempt = null,
                    returned_event_ids = null
              where session_id = ? and kind = 'log'"""

DROP_PINS = "delete from a2_snapshot_pins where session_id = ? and event_index < ?"

UPSERT_PRESENCE = """insert into a2_presence (ns, participant, field, value, seen, at, expires_at)
     values (?, ?, ?, ?, ?, ?, ?)
     on conflict (ns, participant, field) do update set
       value = excluded.value,
       seen = excluded.seen,
       at = excluded.at,
       expires_at = excluded.expires_at
     where a2_presence.at <= excluded.at or a2_presence.expires_at <= ?"""
"""Its ``value`` line lies between two hunks (inferred: the update sets every column)."""

OPEN_LAYOUT = "insert into a2_meta (key, value) values ('layout', ?) on conflict (key) do nothing"
"""What the seed runs at every open, after its schema's ``create ... if not exists``."""

DROP_OLD_ID_INDEX = "drop index if exists a2_events_event_id"
"""The one statement of the seed's SCHEMA migration 0001 leaves out (0.20.0's index)."""

PRE_CONSUMER_CHECK = "select 1 from pragma_table_info('a2_events') where name = ?"

Target = tuple[str, str | None]
"""(consumer, lane): a lane of None makes an event cursor."""


class SeedStore:
    """The seed's writes on one file, at a clock of integer milliseconds (``now``)."""

    def __init__(self, path: Path, now: int) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.row_factory = sqlite3.Row
        self.now = now
        self._ids = 0
        self.conn.execute("pragma journal_mode = wal")
        for statement in migrations()[0].statements:  # the seed's SCHEMA and layout record
            self.conn.execute(statement)

    def close(self) -> None:
        self.conn.close()

    def _tx(self) -> sqlite3.Connection:
        self.conn.execute("begin immediate")
        return self.conn

    def _commit(self) -> None:
        self.conn.execute("commit")

    def _head(self, session_id: str) -> int:
        return int(self.conn.execute(SELECT_HEAD, (session_id,)).fetchone()["max"])

    def _clear_index(self, session_id: str) -> int:
        row = self.conn.execute(SELECT_CLEAR_INDEX, (session_id,)).fetchone()
        return 0 if row is None else int(row["clear_index"])

    def append(self, session_id: str, events: Sequence[tuple[str, Sequence[Target]]]) -> list[int]:
        """``append`` of events (type, targets), without log consumers: ``insertBatch``
        then ``enqueue``. Returns their indexes."""
        conn = self._tx()
        clear_index = self._clear_index(session_id)
        base = self._head(session_id)
        indexes = []
        for offset, (event_type, _) in enumerate(events):
            self._ids += 1
            index = base + 1 + offset
            row = (session_id, index, event_type, "null", f"seed-{self._ids}", self.now, None)
            conn.execute(INSERT_EVENT, row)
            indexes.append(index)
        for offset, (_, targets) in enumerate(events):
            index = base + 1 + offset
            for consumer, lane in targets:
                if lane is None:
                    key = codec.cursor_key(None, index)
                    conn.execute(INSERT_EVENT_CURSOR, (session_id, consumer, key, index - 1, index))
                    continue
                conn.execute(INSERT_LANE_EVENT, (session_id, consumer, lane, index))
                key = codec.cursor_key(lane, index)
                conn.execute(QUEUE_LANE_HEAD, (session_id, consumer, key, lane, clear_index, index))
        self._commit()
        return indexes

    def claim(self, session_id: str, consumer: str, key: str, holder: str, ttl_ms: int) -> int:
        """``claimAvailable``'s claim of one eligible head; returns its attempt."""
        conn = self._tx()
        params = (self.now, self.now, holder, self.now + ttl_ms, session_id, consumer, key)
        conn.execute(CLAIM_HEAD, params)
        cursor = conn.execute(SELECT_CURSOR, (session_id, consumer, key)).fetchone()
        attempt = int(cursor["attempt_count"])
        self._commit()
        return attempt

    def fail(
        self, session_id: str, consumer: str, key: str, attempt: int, max_failures: int
    ) -> None:
        """``failAttempt`` of the current, claimed attempt."""
        conn = self._tx()
        cursor = conn.execute(SELECT_CURSOR, (session_id, consumer, key)).fetchone()
        failures = int(cursor["failure_count"]) + 1
        dead = failures >= max_failures
        params = (
            failures,
            "boom",
            self.now,
            attempt,
            self.now if dead else None,
            None,
            session_id,
            consumer,
            key,
        )
        conn.execute(FAIL_HEAD, params)
        if dead:
            conn.execute(RELEASE_PINS, (session_id, consumer, key, int(cursor["head"])))
        self._commit()

    def complete_lane_head(self, session_id: str, consumer: str, lane: str, attempt: int) -> None:
        """``completeAttempt`` of a lane head returning no events: the lane event finished,
        then ``advance`` to the lane's next unfinished event."""
        conn = self._tx()
        key = codec.cursor_key(lane, 0)
        cursor = conn.execute(SELECT_CURSOR, (session_id, consumer, key)).fetchone()
        done = int(cursor["head"])
        conn.execute(FINISH_LANE_EVENT, (attempt, json.dumps([]), session_id, consumer, lane, done))
        conn.execute(RELEASE_PINS, (session_id, consumer, key, done))
        after = max(done, self._clear_index(session_id))
        following = conn.execute(NEXT_LANE_HEAD, (session_id, consumer, lane, after)).fetchone()
        conn.execute(MOVE_CURSOR, (done, following["next"], session_id, consumer, key))
        self._commit()

    def clear(self, session_id: str) -> int:
        """``clear`` without a condition or cause; returns the marker's index."""
        conn = self._tx()
        marker = self._head(session_id) + 1
        self._ids += 1
        row = (session_id, marker, CLEAR_EVENT_TYPE, "null", f"seed-{self._ids}", self.now, None)
        conn.execute(INSERT_EVENT, row)
        conn.execute(MARK_CLEARED, (session_id, marker))
        conn.execute(RESTART_LOG_CURSORS, (marker, session_id))
        conn.execute(DROP_PINS, (session_id, marker))
        self._commit()
        return marker

    def write_presence(
        self,
        ns: str,
        participant: str,
        values: dict[str, object],
        *,
        seen: str,
        at: int,
        ttl_ms: int,
    ) -> None:
        """``presence.write``: every field upserted (a None value stored as ``'null'``),
        ``seen`` stored as given, unencoded."""
        conn = self._tx()
        expires_at = self.now + ttl_ms
        for field, value in values.items():
            params = (ns, participant, field, json.dumps(value), seen, at, expires_at, self.now)
            conn.execute(UPSERT_PRESENCE, params)
        self._commit()


def seed_opens(path: Path) -> None:
    """What the seed's ``sqlite()`` does to a file at every open, after its pragmas: refuse
    the layout from before consumers, run its schema (every statement ``if not exists``,
    migration 0001's), then record its layout. Raises what the seed would throw."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        if conn.execute(PRE_CONSUMER_CHECK, ("processed_at",)).fetchone():
            raise RuntimeError("STORE_NOT_CONFIGURED: the layout from before consumers")
        for statement in migrations()[0].statements[:-1]:  # its SCHEMA: all but the record
            conn.execute(statement)
        conn.execute(DROP_OLD_ID_INDEX)
        conn.execute(OPEN_LAYOUT, ("cursors-1",))
    finally:
        conn.close()
