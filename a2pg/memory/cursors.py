"""Cursor mechanics: starting work for new events, waking log cursors, advancing heads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from ..contract.rules import CompletedAttempt, due_at, refuse_non_log_cursor, woken_logs
from ..models import CLEAR_EVENT_TYPE, ClaimRef, Consumer, LogSpec, NewEvent
from .state import FRESH, CursorState, Row, SessionState, cursor_key


def takes(types: tuple[str, ...] | None, event_type: str) -> bool:
    """Whether a log cursor of these types stops at this event (never the clear marker)."""
    return event_type != CLEAR_EVENT_TYPE and (types is None or event_type in types)


def types_of(log: LogSpec) -> tuple[str, ...] | None:
    return None if log.types is None else tuple(log.types)


def next_log_head(session: SessionState, after: int, types: tuple[str, ...] | None) -> int | None:
    """The first event after ``after`` a log cursor of ``types`` takes, or None."""
    for position in range(max(after, session.offset) - session.offset, len(session.rows)):
        row = session.rows[position]
        if takes(types, row.type):
            return row.index
    return None


def set_head(
    session: SessionState,
    cursor: CursorState,
    head: int | None,
    now: datetime,
    due: datetime | None = None,
) -> None:
    """Moves a cursor to a new head (or idle): fresh bookkeeping, ready from ``now``, or
    from ``due`` for a delayed target (held back as a backoff is: see ``rules.due_at``)."""
    cursor.head = head
    if due is None or due <= now:
        cursor.dispatch = FRESH
        session.set_ready(cursor, None if head is None else now)
    else:
        cursor.dispatch = replace(FRESH, claim_expires_at=due)
        session.set_ready(cursor, None if head is None else due)
    if head is not None:
        session.new_work = True


def hold_until(session: SessionState, cursor: CursorState, until: datetime) -> None:
    """Holds a cursor's head back until ``until`` (as a delay does), if it is not already."""
    due = cursor.dispatch.claim_expires_at
    if due is None or due < until:
        cursor.dispatch = replace(cursor.dispatch, claim_expires_at=until)
        session.set_ready(cursor, until)


def open_log_cursor(
    session: SessionState, name: str, log: LogSpec, position: int, now: datetime
) -> CursorState:
    """A new log cursor at ``position``; with backfill it takes its first event at once."""
    cursor = CursorState(name, log.lane, "log", position, types=types_of(log))
    session.cursors[cursor_key(name, log.lane, 0)] = cursor
    if log.backfill:
        set_head(session, cursor, next_log_head(session, position, cursor.types), now)
    return cursor


def wake_idle(session: SessionState, cursor: CursorState, log: LogSpec, now: datetime) -> None:
    """Records the consumer's types; an idle log cursor takes its next event of them."""
    cursor.types = types_of(log)
    if cursor.head is None:
        set_head(session, cursor, next_log_head(session, cursor.position, cursor.types), now)


def enqueue(
    session: SessionState,
    rows: Sequence[Row],
    events: Sequence[NewEvent],
    base: int,
    wake: Sequence[Consumer],
    now: datetime,
) -> None:
    """Starts the cursor work an inserted batch carries: targets, then log consumer wakes.

    A target repeated within one event counts once.
    """
    for row, event in zip(rows, events, strict=True):
        for target in dict.fromkeys(event.targets):
            key = cursor_key(target.consumer, target.lane, row.index)
            due = due_at(target.not_before, now)
            if target.lane is None:
                cursor = CursorState(target.consumer, None, "event", row.index - 1)
                session.cursors[key] = cursor
                set_head(session, cursor, row.index, now, due)
                continue
            lane = session.cursors.get(key)
            if lane is None:
                lane = CursorState(target.consumer, target.lane, "lane", session.clear_index)
                session.cursors[key] = lane
            lane.queue.append(row.index)
            if due is not None:
                lane.due[row.index] = due
            if lane.head is None:
                set_head(session, lane, row.index, now, lane.due.get(row.index))
    for consumer in wake:
        log = consumer.log
        if log is None:
            continue
        types = types_of(log)
        first = next((row.index for row in rows if takes(types, row.type)), None)
        if first is None:
            continue
        existing = session.cursors.get(cursor_key(consumer.name, log.lane, 0))
        if existing is None:
            position = session.clear_index if log.backfill else base
            cursor = open_log_cursor(session, consumer.name, log, position, now)
            if not log.backfill:
                set_head(session, cursor, first, now)
        elif existing.kind == "log":
            wake_idle(session, existing, log, now)


def refuse_targeted_lanes(
    session: SessionState | None, types: Sequence[str], wake: Sequence[Consumer]
) -> None:
    """A batch of these event types may not wake a log consumer on a lane where it has a
    targeted lane cursor (``INVALID_ARGUMENT``); checked before anything is written."""
    if session is None:
        return
    for name, log in woken_logs(types, wake):
        cursor = session.cursors.get(cursor_key(name, log.lane, 0))
        if cursor is not None:
            refuse_non_log_cursor(cursor.kind, name, log.lane)


def refresh_types(session: SessionState, consumers: Sequence[Consumer]) -> None:
    """Records each declared log consumer's current types on its cursor (``refreshLogTypes``)."""
    for consumer in consumers:
        if consumer.log is None:
            continue
        cursor = session.cursors.get(cursor_key(consumer.name, consumer.log.lane, 0))
        if cursor is not None and cursor.kind == "log":
            cursor.types = types_of(consumer.log)


def advance(
    session: SessionState, cursor: CursorState, done: CompletedAttempt, now: datetime
) -> None:
    """Moves a cursor past its head: an event cursor finishes (and leaves ``cursors``), a lane
    takes its next queued event, a log cursor its next event of its types.

    ``done`` is recorded so a retried completion can be recognised; a log cursor keeps
    only its last completion, as the seeds do.
    """
    finished = cursor.head
    assert finished is not None
    session.snapshots.release(ClaimRef(cursor.consumer, cursor.lane, finished))
    cursor.position = finished
    if cursor.kind == "event":
        key = cursor.key
        del session.cursors[key]
        session.finished[key] = done
        return
    if cursor.kind == "lane":
        cursor.queue.popleft()
        cursor.due.pop(finished, None)
        cursor.completions[finished] = done
        following = cursor.queue[0] if cursor.queue else None
        set_head(session, cursor, following, now, cursor.due.get(following or 0))
        return
    if done.attempt is not None:
        cursor.completions = {finished: done}
    set_head(session, cursor, next_log_head(session, finished, cursor.types), now)


def has_pending(session: SessionState | None, consumers: Sequence[Consumer] | None) -> bool:
    """Some served cursor (all when ``consumers`` is None) has a live, not dead-lettered head."""
    if session is None:
        return False
    names = None if consumers is None else {consumer.name for consumer in consumers}
    return any(
        cursor.head is not None
        and cursor.dispatch.failed_at is None
        and (names is None or cursor.consumer in names)
        for cursor in session.cursors.values()
    )


def dead_letter(session: SessionState, cursor: CursorState) -> None:
    """Parks a head that reached its failure limit: not ready, and its pins released."""
    session.set_ready(cursor, None)
    session.snapshots.release(ClaimRef(cursor.consumer, cursor.lane, cursor.head or 0))


def still_ready(session: SessionState, at: datetime) -> bool:
    """Whether a head made claimable at ``at`` is still unclaimed: the rule PostgreSQL's
    NOTIFY follows when the same transaction also claimed."""
    return any(cursor.ready_at == at for cursor in session.cursors.values())


def blocked_behind(session: SessionState, cursor: CursorState) -> int:
    """Events a dead-lettered lane or log head holds back: the lane's queued events after
    it, or the later events the log cursor takes (0 for anything else)."""
    if cursor.dispatch.failed_at is None or cursor.head is None or cursor.kind == "event":
        return 0
    if cursor.kind == "lane":
        return len(cursor.queue) - 1
    rows = session.rows_between(cursor.head, session.head)
    return sum(1 for row in rows if takes(cursor.types, row.type))
