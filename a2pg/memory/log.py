"""The session log in memory: append, read, wake a log consumer, list cursors and sessions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from ..contract.args import AppendArgs, ReadArgs, SessionsArgs, WakeLogArgs
from ..contract.rules import (
    fence,
    is_replay,
    refuse_cleared_origin,
    refuse_non_log_cursor,
    replay,
)
from ..contract.values import CheckedEvent
from ..errors import A2Error
from ..models import AppendResult, Cause, Consumer, Cursor, SessionInfo, StoredEvent, WakeLogResult
from .cursors import (
    blocked_behind,
    enqueue,
    has_pending,
    open_log_cursor,
    refuse_targeted_lanes,
    wake_idle,
)
from .state import Row, Sessions, SessionState, cursor_key

STREAM_BATCH = 256
"""Events a stream reads per look at the log."""


def append(
    sessions: Sessions,
    args: AppendArgs,
    wake: Sequence[Consumer],
    *,
    now: datetime,
    new_id: Callable[[], str],
) -> AppendResult:
    """Appends a batch atomically; a batch of only stored ids replays them.

    Generated ids are refused like supplied ones if they collide with a live id.
    """
    session_id = args.session_id
    session = sessions.get(session_id)
    stored = [] if session is None else session.owners(args.supplied_ids)
    if is_replay(len(stored), len(args.events)):
        return AppendResult(replay(args.events, stored), has_pending(session, args.consumers))
    if not args.events:
        return AppendResult([], has_pending(session, args.consumers))
    clear_index = 0 if session is None else session.clear_index
    refuse_cleared_origin(args.origin_index, clear_index, session_id)
    for checked in args.events:
        cause = checked.event.cause
        if cause is not None:
            cursor = None if session is None else session.view_of(cause)
            fence(cause, cursor, clear_index, session_id)
    refuse_targeted_lanes(session, [checked.event.type for checked in args.events], wake)
    session = sessions.writable(session_id)
    rows = plan_rows(session, args.events, now=now, new_id=new_id, trace_parent=args.trace_parent)
    sessions.keep(session)
    add_rows(session, rows, args.events, wake=wake, now=now)
    return AppendResult([row.stored() for row in rows], has_pending(session, args.consumers))


def plan_rows(
    session: SessionState,
    events: Sequence[CheckedEvent],
    *,
    now: datetime,
    new_id: Callable[[], str],
    cause: Cause | None = None,
    trace_parent: str | None = None,
) -> list[Row]:
    """The rows a batch becomes at ``head + 1 ...``, with one ``created_at``; writes nothing.

    Missing ids are generated; a generated id that collides with a live one (or one
    of the batch) refuses the batch. ``cause`` (a completion's) overrides the events'.
    ``trace_parent``: the append's trace context, kept on each row.
    """
    base = session.head
    rows: list[Row] = []
    taken: set[str] = set()
    for offset, checked in enumerate(events):
        event = checked.event
        event_id = event.id if event.id is not None else new_id()
        if event_id in taken or session.owner_of(event_id) is not None:
            raise A2Error("PARTIAL_DUPLICATE_BATCH", f"event id '{event_id}' already exists")
        taken.add(event_id)
        index = base + 1 + offset
        rows.append(
            Row(
                event_id,
                event.type,
                checked.payload_json,
                index,
                session.session_id,
                now,
                cause or event.cause,
                trace_parent,
            )
        )
    return rows


def add_rows(
    session: SessionState,
    rows: Sequence[Row],
    events: Sequence[CheckedEvent],
    *,
    wake: Sequence[Consumer],
    now: datetime,
) -> None:
    """Writes planned rows (the session must be kept by the store by now, so the readiness
    queue sees its cursors as live) and starts their cursor work."""
    base = session.head
    session.rows.extend(rows)
    session.by_id.update((row.id, row) for row in rows)
    session.new_events = True
    enqueue(session, rows, [checked.event for checked in events], base, wake, now)


def insert(
    session: SessionState,
    events: Sequence[CheckedEvent],
    *,
    now: datetime,
    new_id: Callable[[], str],
    wake: Sequence[Consumer],
    cause: Cause | None = None,
    trace_parent: str | None = None,
) -> list[Row]:
    """Plans and writes a batch in a kept session."""
    rows = plan_rows(
        session, events, now=now, new_id=new_id, cause=cause, trace_parent=trace_parent
    )
    add_rows(session, rows, events, wake=wake, now=now)
    return rows


def read(session: SessionState | None, args: ReadArgs) -> list[StoredEvent]:
    if session is None:
        return []
    end = session.head if args.through is None else args.through
    if args.types is None:
        return [row.stored() for row in session.rows_between(args.after, end, args.limit)]
    wanted = frozenset(args.types)
    picked = [row for row in session.rows_between(args.after, end) if row.type in wanted]
    return [row.stored() for row in picked[: args.limit]]


def stream_batch(session: SessionState | None, after: int, *, visible: bool) -> list[StoredEvent]:
    """What a stream reads per look: at most ``STREAM_BATCH`` events after ``after``;
    ``visible`` (the first look) starts at the clear marker at the latest."""
    if session is None:
        return []
    rows = session.rows_between(after, session.head, STREAM_BATCH, visible=visible)
    return [row.stored() for row in rows]


def wake_log(sessions: Sessions, args: WakeLogArgs, *, now: datetime) -> WakeLogResult:
    """Brings a log consumer's cursor up to date, creating it as an append would.

    A session with nothing after its clear marker and no cursor gets an idle,
    unstored cursor at the marker.
    """
    name, log = args.consumer.name, args.log
    session = sessions.get(args.session_id)
    cursor = None if session is None else session.cursors.get(cursor_key(name, log.lane, 0))
    if session is None or (cursor is None and session.head == session.clear_index):
        marker = 0 if session is None else session.clear_index
        return WakeLogResult(Cursor(name, log.lane, "log", marker, None), marker)
    if cursor is None:
        position = session.clear_index if log.backfill else session.head
        cursor = open_log_cursor(session, name, log, position, now)
    else:
        refuse_non_log_cursor(cursor.kind, name, log.lane)
        wake_idle(session, cursor, log, now)
    return WakeLogResult(cursor.view(), session.head)


def list_cursors(session: SessionState | None) -> list[Cursor]:
    """By consumer, then named lanes by name, then event cursors by head."""
    views = [] if session is None else [cursor.view() for cursor in session.cursors.values()]
    return sorted(views, key=lambda c: (c.consumer, c.lane is None, c.lane or "", c.head or 0))


def list_sessions(sessions: Sessions, args: SessionsArgs) -> list[SessionInfo]:
    after = args.after
    names = sorted(name for name in sessions.by_id if after is None or name > after)
    return [_info(sessions.by_id[name]) for name in names[: args.limit]]


def _info(session: SessionState) -> SessionInfo:
    live = [cursor for cursor in session.cursors.values() if cursor.head is not None]
    dead = [cursor for cursor in live if cursor.dispatch.failed_at is not None]
    last = session.row_at(session.head)
    return SessionInfo(
        session.session_id,
        session.head,
        session.clear_index,
        len(live) - len(dead),
        len(dead),
        sum(blocked_behind(session, cursor) for cursor in dead),
        None if last is None else last.created_at,
    )
