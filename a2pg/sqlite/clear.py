"""Clear and reclaim on SQLite: the clear marker hides the past; reclaim deletes it."""

from __future__ import annotations

from ..contract.args import CLEAR_MARKER, ClearArgs
from ..contract.rules import clear_decision, fence
from ..models import ClearResult, ReclaimResult
from . import codec
from .cursors import insert_batch, select_cursor
from .database import Tx

RECLAIM_BATCH = 256
"""Events ``reclaim`` deletes per call, so no call holds the write lock for long."""


def clear(tx: Tx, args: ClearArgs) -> ClearResult:
    """Appends the ``a2.cleared`` marker (stored without a cause) and hides what is below:
    log cursors restart at the marker, lane cursors and every pin go, event heads are
    parked (their rows wait for reclaim)."""
    sid, cause = args.session_id, args.cause
    session = tx.session(sid)
    if cause is not None:
        row = select_cursor(tx.conn, sid, cause.consumer, codec.cursor_key(cause.lane, cause.index))
        fence(cause, None if row is None else codec.cursor(row), session.clear_index, sid)
    decided = clear_decision(args.if_last_index, head=session.head, clear_index=session.clear_index)
    if decided is not None:
        return decided
    (marker,), _ = insert_batch(tx, session, [CLEAR_MARKER], wake=())
    params = {"session_id": sid, "marker": marker.index}
    tx.run("mark_cleared", params)
    tx.run("restart_log_cursors", params)
    tx.run("drop_lane_cursors", params)
    tx.run("park_cursors", params)
    tx.run("drop_pins", params)
    tx.run("drop_history", params)
    return ClearResult(True, marker.index, marker.index)


def reclaim(tx: Tx, session_id: str) -> ReclaimResult:
    """Deletes up to ``RECLAIM_BATCH`` events below the clear marker; once none remain, the
    dead cursors, snapshots, history and pins below it go too."""
    session = tx.session(session_id)
    if session.clear_index <= 1:
        return ReclaimResult(0, True)
    params = {"session_id": session_id, "clear_index": session.clear_index, "batch": RECLAIM_BATCH}
    gone = [int(row["idx"]) for row in tx.rows("reclaim_events", params)]
    if gone:
        through = {"session_id": session_id, "through": max(gone)}
        tx.run("reclaim_lane_events", through)
        tx.run("reclaim_event_cursors", through)
    left = tx.one("events_below", params)
    done = not (left and left["left_below"])
    if done:
        tx.run("reclaim_cursors", params)
        tx.run("reclaim_pins", params)
        tx.run("reclaim_history", params)
        tx.run("reclaim_snapshots", params)
    return ReclaimResult(len(gone), done)
