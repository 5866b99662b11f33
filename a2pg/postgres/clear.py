"""Clear and reclaim on PostgreSQL: the clear marker hides the past; reclaim deletes it."""

from __future__ import annotations

from psycopg.errors import SerializationFailure

from ..contract.args import CLEAR_MARKER, ClearArgs
from ..contract.rules import clear_decision, fence
from ..models import ClearResult, ReclaimResult
from . import codec
from .database import Finish, Tx, finished
from .writes import SessionHead

RECLAIM_BATCH = 256
"""Events ``reclaim`` deletes per call, so no call holds the session for long."""


async def clear(tx: Tx, args: ClearArgs) -> Finish[ClearResult]:
    """Appends the ``a2.cleared`` marker (stored without a cause) and hides what is below:
    log cursors restart at the marker, lane cursors and every pin go, event heads are
    parked (their rows wait for reclaim)."""
    session_id, cause = args.session_id, args.cause
    locked = await tx.lock([session_id])
    found = None
    if cause is not None:
        key = codec.cursor_key(cause.lane, cause.index)
        found = await tx.execute(
            tx.query("select_cursors"),
            {"session_ids": [session_id], "consumers": [cause.consumer], "keys": [key]},
        )
    sessions, now = await locked.result()
    session = sessions.get(session_id) or SessionHead(session_id, 0, 0)
    if cause is not None:
        assert found is not None
        row = await found.fetchone()
        fence(cause, None if row is None else codec.cursor(row), session.clear_index, session_id)
    decided = clear_decision(args.if_last_index, head=session.head, clear_index=session.clear_index)
    if decided is not None:
        return finished(decided)
    if session_id not in sessions:
        # First write of this session: create its row, then judge again under it.
        sessions, _ = await (await tx.lock([session_id], ensure=True)).result()
        if sessions[session_id].head != session.head:
            raise SerializationFailure("session created concurrently; retry the clear")
    plan = tx.new_plan(now, sessions)
    (marker,) = plan.add_batch(session_id, [CLEAR_MARKER], wake=())
    await tx.apply(plan, notify=False)
    params = {"session_id": session_id, "marker": marker.index}
    await tx.execute(tx.query("mark_cleared"), params)
    await tx.execute(tx.query("restart_log_cursors"), params)
    await tx.execute(tx.query("drop_lane_cursors"), params)
    await tx.execute(tx.query("park_cursors"), params)
    await tx.execute(tx.query("drop_pins"), params)
    return finished(ClearResult(True, marker.index, marker.index))


async def reclaim(tx: Tx, session_id: str) -> Finish[ReclaimResult]:
    """Deletes up to ``RECLAIM_BATCH`` events below the clear marker; once none remain, the
    dead cursors, snapshots, history and pins below it go too."""
    sessions, _ = await (await tx.lock([session_id])).result()
    session = sessions.get(session_id)
    if session is None or session.clear_index <= 1:
        return finished(ReclaimResult(0, True))
    params = {"session_id": session_id, "clear_index": session.clear_index, "batch": RECLAIM_BATCH}
    batch = await tx.execute(tx.query("reclaim_batch"), params)
    row = await batch.fetchone()
    assert row is not None
    done = bool(row["done"])
    if done:
        await tx.execute(tx.query("reclaim_finish"), params)
    return finished(ReclaimResult(int(row["deleted"]), done))
