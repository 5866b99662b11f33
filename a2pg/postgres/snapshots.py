"""State snapshots on PostgreSQL: the newest usable fold, and pins that keep history."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ..contract.args import PutSnapshotsArgs, ReadStateArgs
from ..contract.rules import refuse_snapshots_past_head
from ..models import StateRead
from . import codec
from .database import MAX_INDEX, Database, Finish, Tx, finished
from .writes import Columns, columns, push


@dataclass(slots=True)
class SnapshotPlan:
    """What ``put_snapshots`` writes, worked out in Python from what it read (no I/O).

    The newest write becomes the head snapshot; the head it replaces moves to
    history if pinned; a write older than the head is kept only if pinned.
    """

    head: int | None
    pinned: set[int]
    new_head: tuple[int, str] | None = None
    archive_stored_head: int | None = None
    history: dict[int, str] = field(default_factory=dict)
    pins: Columns = field(default_factory=lambda: columns("consumers", "keys", "idxs", "up_to"))

    def put(self, index: int, state: str, pins: Sequence[tuple[str, str, int]]) -> None:
        for consumer, key, event_index in pins:
            push(self.pins, consumer, key, event_index, index)
            self.pinned.add(index)
        current = self.new_head[0] if self.new_head is not None else self.head
        if current is None or index >= current:
            if current is not None and index > current and current in self.pinned:
                if self.new_head is None:
                    self.archive_stored_head = current
                else:
                    self.history[current] = self.new_head[1]
            self.new_head = (index, state)
        elif index in self.pinned:
            self.history[index] = state


async def read_state(db: Database, args: ReadStateArgs) -> StateRead:
    """The newest usable fold at or below ``through`` (default and cap: the head) and the
    events after it, never below the clear marker: one statement."""
    rows = await db.run(
        db.query("read_state"),
        {
            "session_id": args.session_id,
            "reducer": args.reducer,
            "through": None if args.through is None else min(args.through, MAX_INDEX),
        },
    )
    if not rows:
        return StateRead(0, None, [], 0, 0)
    first = rows[0]
    snapshot_index = first["snapshot_index"]
    events = [codec.event(row) for row in rows if row["idx"] is not None]
    return StateRead(
        0 if snapshot_index is None else int(snapshot_index),
        None if snapshot_index is None else first["state"],
        events,
        int(first["head"]),
        int(first["clear_index"]),
    )


async def put_snapshots(tx: Tx, args: PutSnapshotsArgs) -> Finish[None]:
    """Caches folds: writes below the clear index are ignored, one past the head is
    ``INVALID_ARGUMENT``, pins of heads that are not live are ignored."""
    session_id = args.session_id
    keys = columns("session_ids", "consumers", "keys")
    for write in args.writes:
        for pin in write.pins:
            push(keys, session_id, pin.consumer, codec.cursor_key(pin.lane, pin.index))
    params = {"session_id": session_id, "reducer": args.reducer}
    locked = await tx.lock([session_id])
    stored_head = await tx.execute(tx.query("snapshot_head"), params)
    pinned = await tx.execute(tx.query("pinned_checkpoints"), params)
    found = await tx.execute(tx.query("select_cursors"), keys)
    sessions, now = await locked.result()
    session = sessions.get(session_id)
    head = 0 if session is None else session.head
    refuse_snapshots_past_head([write.index for write in args.writes], head, session_id)
    assert session is not None
    row = await stored_head.fetchone()
    plan = SnapshotPlan(
        None if row is None else int(row["up_to_index"]),
        {int(r["up_to_index"]) for r in await pinned.fetchall()},
    )
    cursors = {(r["consumer"], r["cursor_key"]): r for r in await found.fetchall()}
    for write in sorted(args.writes, key=lambda w: w.index):
        if write.index < session.clear_index:
            continue
        live = []
        for pin in write.pins:
            key = codec.cursor_key(pin.lane, pin.index)
            cursor = cursors.get((pin.consumer, key))
            if (
                cursor is not None
                and pin.index > session.clear_index
                and cursor["head"] == pin.index
                and cursor["failed_at"] is None
            ):
                live.append((pin.consumer, key, pin.index))
        plan.put(write.index, write.state_json, live)
    await _queue(tx, plan, params, now)
    return finished(None)


async def _queue(tx: Tx, plan: SnapshotPlan, params: Mapping[str, object], now: datetime) -> None:
    if plan.pins["idxs"]:
        await tx.execute(tx.query("insert_pins"), {**params, **plan.pins})
    if plan.archive_stored_head is not None:
        await tx.execute(
            tx.query("archive_snapshot_head"), {**params, "up_to": plan.archive_stored_head}
        )
    if plan.history:
        history = {"up_to": list(plan.history), "states": list(plan.history.values()), "now": now}
        await tx.execute(tx.query("put_history"), {**params, **history})
    if plan.new_head is not None:
        index, state = plan.new_head
        await tx.execute(
            tx.query("put_snapshot_head"), {**params, "up_to": index, "state": state, "now": now}
        )
