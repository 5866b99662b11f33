"""The session log on SQLite: append, read, wake a log consumer, list cursors and sessions."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from ..contract.args import AppendArgs, ReadArgs, SessionsArgs, WakeLogArgs
from ..contract.rules import fence, is_replay, refuse_cleared_origin, refuse_non_log_cursor, replay
from ..models import AppendResult, Consumer, Cursor, SessionInfo, StoredEvent, WakeLogResult
from . import codec
from .cursors import (
    has_pending,
    insert_batch,
    next_log_head,
    open_log_cursor,
    select_cursor,
    wake_idle,
)
from .database import MAX_INDEX, SessionHead, Tx, rows, session_head

STREAM_BATCH = 256
"""Events a stream reads per look at the table."""


def live_owners(
    conn: sqlite3.Connection, session: SessionHead, ids: Sequence[str]
) -> list[StoredEvent]:
    """The live events holding any of ``ids`` (ids below the clear marker are free again)."""
    if not ids:
        return []
    params = {
        "session_id": session.session_id,
        "ids": json.dumps(list(ids)),
        "clear_index": session.clear_index,
    }
    return [codec.event(row) for row in rows(conn, "live_owners", params)]


def append(tx: Tx, args: AppendArgs, wake: Sequence[Consumer]) -> AppendResult:
    """Appends a batch atomically; a batch of only stored ids replays them."""
    session = tx.session(args.session_id)
    stored = live_owners(tx.conn, session, args.supplied_ids)
    if is_replay(len(stored), len(args.events)):
        return AppendResult(
            replay(args.events, stored), has_pending(tx.conn, session, args.consumers)
        )
    refuse_cleared_origin(args.origin_index, session.clear_index, args.session_id)
    for checked in args.events:
        cause = checked.event.cause
        if cause is not None:
            key = codec.cursor_key(cause.lane, cause.index)
            row = select_cursor(tx.conn, args.session_id, cause.consumer, key)
            fence(
                cause,
                None if row is None else codec.cursor(row),
                session.clear_index,
                args.session_id,
            )
    inserted, session = insert_batch(
        tx, session, args.events, wake=wake, trace_parent=args.trace_parent
    )
    return AppendResult(inserted, has_pending(tx.conn, session, args.consumers))


def pending_now(
    conn: sqlite3.Connection, session_id: str, consumers: Sequence[Consumer] | None
) -> bool:
    """``has_pending`` on its own (an append of nothing)."""
    return has_pending(conn, session_head(conn, session_id), consumers)


def wake_log(tx: Tx, args: WakeLogArgs) -> WakeLogResult:
    """Brings a log consumer's cursor up to date, creating it as an append would; a session
    with nothing after its clear marker and no cursor gets an idle, unstored cursor."""
    sid, name, log = args.session_id, args.consumer.name, args.log
    session = tx.session(sid)
    key = codec.cursor_key(log.lane, 0)
    cursor = select_cursor(tx.conn, sid, name, key) if session.exists else None
    if not session.exists or (cursor is None and session.head == session.clear_index):
        idle = Cursor(name, log.lane, "log", session.clear_index, None)
        return WakeLogResult(idle, session.clear_index)
    if cursor is None:
        position = session.clear_index if log.backfill else session.head
        head = next_log_head(tx.conn, sid, position, log.types) if log.backfill else None
        open_log_cursor(tx, sid, name, log, position, head)
    else:
        refuse_non_log_cursor(cursor["kind"], name, log.lane)
        wake_idle(tx, sid, cursor, log)
    woken = select_cursor(tx.conn, sid, name, key)
    assert woken is not None
    return WakeLogResult(codec.cursor(woken), session.head)


def read(conn: sqlite3.Connection, args: ReadArgs) -> list[StoredEvent]:
    return events_after(
        conn,
        args.session_id,
        after=args.after,
        through=args.through,
        types=args.types,
        limit=args.limit,
    )


def events_after(
    conn: sqlite3.Connection,
    session_id: str,
    *,
    after: int,
    through: int | None = None,
    types: Sequence[str] | None = None,
    limit: int | None = None,
    visible: bool = True,
) -> list[StoredEvent]:
    """Events after ``after`` in index order; ``visible`` hides those below the clear marker."""
    params = {
        "session_id": session_id,
        "visible": visible,
        "after": min(after, MAX_INDEX),
        "through": MAX_INDEX if through is None else min(through, MAX_INDEX),
        "types": codec.types_json(types),
        "limit": -1 if limit is None else min(limit, MAX_INDEX),
    }
    return [codec.event(row) for row in rows(conn, "read_events", params)]


def list_cursors(conn: sqlite3.Connection, session_id: str) -> list[Cursor]:
    """By consumer, then named lanes by name, then event cursors by head."""
    clear_index = session_head(conn, session_id).clear_index
    params = {"session_id": session_id, "clear_index": clear_index}
    return [codec.cursor(row) for row in rows(conn, "list_cursors", params)]


def list_sessions(conn: sqlite3.Connection, args: SessionsArgs) -> list[SessionInfo]:
    found = rows(conn, "sessions_page", {"after": args.after or "", "limit": args.limit})
    return [
        SessionInfo(
            row["session_id"],
            int(row["head"]),
            int(row["clear_index"]),
            int(row["pending"]),
            int(row["dead_letters"]),
            int(row["blocked"]),
            codec.maybe_time(row["last_event_at"]),
        )
        for row in found
    ]
