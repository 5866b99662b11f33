"""Clear and reclaim in memory: the ``a2.cleared`` marker, and deleting what it hides."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from ..contract.args import CLEAR_MARKER, ClearArgs
from ..contract.rules import clear_decision, fence
from ..models import ClearResult, ReclaimResult
from .log import add_rows, plan_rows
from .state import FRESH, Sessions, SessionState

RECLAIM_BATCH = 256
"""Events ``reclaim`` deletes per call, so no call holds the store for long."""


def clear(
    sessions: Sessions, args: ClearArgs, *, now: datetime, new_id: Callable[[], str]
) -> ClearResult:
    """Appends the marker (stored without a cause): the events below it, every event and
    lane cursor and every pin go; log cursors stay, idle at the marker.

    Without ``if_last_index`` every call appends a new marker, even right after another.
    """
    session_id = args.session_id
    session = sessions.get(session_id)
    head, clear_index = (0, 0) if session is None else (session.head, session.clear_index)
    if args.cause is not None:
        current = None if session is None else session.view_of(args.cause)
        fence(args.cause, current, clear_index, session_id)
    decided = clear_decision(args.if_last_index, head=head, clear_index=clear_index)
    if decided is not None:
        return decided
    session = sessions.writable(session_id)
    (marker,) = plan_rows(session, [CLEAR_MARKER], now=now, new_id=new_id)
    sessions.keep(session)
    add_rows(session, [marker], [CLEAR_MARKER], wake=(), now=now)
    session.clear_index = marker.index
    for key, cursor in list(session.cursors.items()):
        if cursor.kind != "log":
            del session.cursors[key]
            continue
        cursor.position = marker.index
        cursor.head = None
        session.set_ready(cursor, None)
        cursor.dispatch = FRESH
        cursor.completions.clear()
    session.finished.clear()
    session.snapshots.release_all()
    return ClearResult(True, marker.index, marker.index)


def reclaim(session: SessionState | None) -> ReclaimResult:
    """Deletes up to ``RECLAIM_BATCH`` events below the clear marker; once none remain,
    drops the snapshots below it too (cursors below it went at the clear)."""
    if session is None or session.clear_index <= 1:
        return ReclaimResult(0, True)
    count = min(RECLAIM_BATCH, session.clear_index - 1 - session.offset)
    for row in session.rows[:count]:
        if session.by_id.get(row.id) is row:
            del session.by_id[row.id]
    del session.rows[:count]
    session.offset += count
    done = session.offset == session.clear_index - 1
    if done:
        session.snapshots.drop_below(session.clear_index)
    return ReclaimResult(count, done)
