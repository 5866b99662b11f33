"""complete_attempts on PostgreSQL: one transaction of one or two round trips, any size.

The fast path (``complete_fenced``) takes batches that return no events, each on its
own cursor, which is what workers mostly send: session locks, the advance fenced
in SQL on each exact attempt, and the commit go in one round trip; if any completion
misses its fence the statement fails, nothing is written, and the batch is judged.

Judged (``complete_batch``): the first round trip locks the sessions (sorted) and
reads every cursor (locked), lane record and stored id the batch names; each
completion is then judged in Python, in order, exactly as ``complete_attempt`` would
judge it after the ones before it (a ``WritePlan`` tracks heads and the ids this
batch appended); the second round trip sends the writes of all fresh completions
with the commit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg.rows import DictRow

from ..errors import A2Error, invalid
from ..models import (
    AttemptRef,
    Completed,
    CompleteResult,
    Completion,
    Consumer,
    StoredEvent,
    Superseded,
)
from ..validation import CheckedEvent, same_json
from . import codec
from .base import Committed, Conn, Finish, StoreBase, execute, finished
from .queries import query
from .writes import SessionHead, WritePlan, columns, push


@dataclass(frozen=True, slots=True)
class Item:
    """One checked completion, with the log consumers its writes wake."""

    completion: Completion
    wake: Sequence[Consumer]
    events: list[CheckedEvent]


@dataclass(frozen=True, slots=True)
class Done:
    """A completion made earlier in this batch, so a repeat of it replays."""

    index: int
    attempt: int
    ids: tuple[str, ...]


def replay(events: Sequence[CheckedEvent], stored: Sequence[StoredEvent]) -> list[StoredEvent]:
    """The stored events of an idempotent replay, in request order; a differing type or
    payload under the same id is an ``IDEMPOTENCY_CONFLICT``."""
    by_id = {event.id: event for event in stored}
    replayed = []
    for checked in events:
        found = by_id[checked.event.id or ""]
        same = same_json(found.payload, json.loads(checked.payload_json))
        if found.type != checked.event.type or not same:
            raise A2Error(
                "IDEMPOTENCY_CONFLICT",
                f"event id '{found.id}' is stored at index {found.index} "
                "with another type or payload",
            )
        replayed.append(found)
    return replayed


FENCE_MISSED = "a2pg: a completion missed its fence"
"""The error text ``complete_fenced`` fails with when the fast path does not apply."""


def fits_fast_path(items: Sequence[Item]) -> bool:
    """Completions returning no events, each on its own cursor: the common case, which
    ``complete_fenced`` settles in one round trip when every one is fresh."""
    keys = {
        (i.completion.session_id, i.completion.consumer, cursor_key_of(i.completion)) for i in items
    }
    return len(keys) == len(items) and not any(item.events for item in items)


def missed_fence(exc: Exception) -> bool:
    return FENCE_MISSED in str(exc)


def cursor_key_of(completion: Completion) -> str:
    return codec.cursor_key(completion.lane, completion.index)


async def complete_fenced(
    store: StoreBase, conn: Conn, committed: Committed, items: Sequence[Item]
) -> Finish[list[CompleteResult]]:
    """The whole batch in one round trip, every completion fenced in SQL: session locks,
    type refreshes, the fenced advance, pin releases, NOTIFY and the commit travel
    together. Fails with ``FENCE_MISSED`` (nothing written) unless every completion is a
    fresh one; the caller then runs ``complete_batch``."""
    await execute(
        conn,
        query("lock_sessions"),
        {"session_ids": sorted({item.completion.session_id for item in items})},
    )
    refreshes: dict[tuple[str, str, str], str | None] = {}
    fenced = columns("session_ids", "consumers", "keys", "heads", "attempts")
    releases = columns("session_ids", "consumers", "keys", "idxs")
    touched: set[str] = set()
    for item in items:
        c = item.completion
        for consumer in item.wake:
            if consumer.log is not None:
                log_key = codec.cursor_key(consumer.log.lane, 0)
                refreshes[(c.session_id, consumer.name, log_key)] = codec.types_json(
                    consumer.log.types
                )
        push(fenced, c.session_id, c.consumer, cursor_key_of(c), c.index, c.attempt)
        push(releases, c.session_id, c.consumer, cursor_key_of(c), c.index)
        if c.lane is not None:  # a lane or log cursor may take its next head
            touched.add(c.session_id)
    if refreshes:
        refresh = columns("session_ids", "consumers", "keys", "types")
        for (session_id, consumer_name, log_key), types in refreshes.items():
            push(refresh, session_id, consumer_name, log_key, types)
        await execute(conn, query("refresh_log_types"), refresh)
    now = store._now_param()
    await execute(conn, query("complete_fenced"), {**fenced, "count": len(items), "now": now})
    await execute(conn, query("release_pins"), releases)
    if touched:
        committed.notify = await execute(
            conn,
            query("notify_ready"),
            {
                "channel": store._channel,
                "session_ids": sorted(touched),
                "now": now,
                "forced": [],
            },
        )
    return finished([Completed([]) for _ in items])


def _mismatch() -> A2Error:
    return A2Error(
        "PARTIAL_DUPLICATE_BATCH", "completed attempt does not match the returned event batch"
    )


class Batch:
    """Judges the completions of one transaction against what the first round trip read."""

    def __init__(
        self,
        plan: WritePlan,
        cursors: dict[tuple[str, str, str], DictRow],
        lanes: dict[tuple[str, str, str, int], DictRow],
        owners: dict[tuple[str, str], StoredEvent],
    ) -> None:
        self.plan = plan
        self.cursors = cursors
        self.lanes = lanes
        self.owners = owners
        self.done: dict[tuple[str, str, str], Done] = {}

    def judge(self, item: Item) -> CompleteResult:
        c = item.completion
        session = self.plan.sessions.get(c.session_id)
        if session is not None and c.index <= session.clear_index:
            return Superseded()
        if session is None or c.index > session.head:
            raise invalid(f"no event at index {c.index} in session '{c.session_id}'")
        ids = [checked.event.id or "" for checked in item.events]
        if len(set(ids)) != len(ids):
            raise A2Error(
                "PARTIAL_DUPLICATE_BATCH", "returned event batch contains the same event id twice"
            )
        cause = AttemptRef(c.consumer, c.lane, c.index, c.attempt)
        key = (c.session_id, c.consumer, codec.cursor_key(c.lane, c.index))
        row = self.cursors.get(key)
        if row is None:
            return Superseded()
        done = self.done.get(key)
        if done is not None or row["head"] != c.index:
            return self._replay(item, row, done, cause, ids)
        if (
            row["attempt_count"] != c.attempt
            or row["failed_at"] is not None
            or row["claim_holder"] is None
        ):
            return Superseded()
        self._claim_ids(c.session_id, session.clear_index, ids)
        self.plan.refresh(c.session_id, item.wake)
        stored = self.plan.add_batch(c.session_id, item.events, wake=item.wake, cause=cause)
        for event in stored:
            self.owners[(c.session_id, event.id)] = event
        self.plan.finish(
            c.session_id,
            consumer=c.consumer,
            lane=c.lane,
            kind=row["kind"],
            index=c.index,
            attempt=c.attempt,
            ids=ids,
        )
        self.done[key] = Done(c.index, c.attempt, tuple(ids))
        return Completed(stored)

    def _replay(
        self,
        item: Item,
        row: DictRow,
        done: Done | None,
        cause: AttemptRef,
        ids: list[str],
    ) -> CompleteResult:
        """The head moved on: a retry of the completion that moved it replays, else superseded."""
        recorded: tuple[int | None, Sequence[str] | None] | None = None
        if done is not None and done.index == cause.index:
            recorded = (done.attempt, done.ids)
        elif row["kind"] == "lane":
            lane_key = (item.completion.session_id, cause.consumer, row["lane"], cause.index)
            lane = self.lanes.get(lane_key)
            if lane is not None and lane["done"]:
                recorded = (lane["completed_attempt"], lane["returned_event_ids"])
        elif done is None and row["completed_idx"] == cause.index:
            recorded = (row["completed_attempt"], row["returned_event_ids"])
        if recorded is None or recorded[0] != cause.attempt:
            return Superseded()
        if list(recorded[1] or ()) != ids:
            raise _mismatch()
        session_id = item.completion.session_id
        clear_index = self.plan.sessions[session_id].clear_index
        owned = []
        for event_id in ids:
            event = self.owners.get((session_id, event_id))
            if event is None or event.index < clear_index or event.cause != cause:
                raise _mismatch()
            owned.append(event)
        return Completed(replay(item.events, owned))

    def _claim_ids(self, session_id: str, clear_index: int, ids: list[str]) -> None:
        """Fresh ids must be free: one stored live (or by this batch) refuses the batch; one
        stored only below the clear marker is given up by its old event (``free_stale_ids``)."""
        for event_id in ids:
            owner = self.owners.get((session_id, event_id))
            if owner is not None and owner.index >= clear_index:
                raise A2Error(
                    "PARTIAL_DUPLICATE_BATCH", "returned event batch contains already-appended ids"
                )


async def complete_batch(
    store: StoreBase, conn: Conn, committed: Committed, items: Sequence[Item]
) -> Finish[list[CompleteResult]]:
    """Runs the whole batch in the caller's transaction (see the module docstring)."""
    locked = await store._lock(conn, [item.completion.session_id for item in items])
    keys = columns("session_ids", "consumers", "keys")
    lanes = columns("session_ids", "consumers", "lanes", "idxs")
    ids = columns("session_ids", "event_ids")
    for item in items:
        c = item.completion
        push(keys, c.session_id, c.consumer, codec.cursor_key(c.lane, c.index))
        if c.lane is not None:
            push(lanes, c.session_id, c.consumer, c.lane, c.index)
        for checked in item.events:
            push(ids, c.session_id, checked.event.id)
    cursors_cur = await execute(conn, query("select_cursors"), keys)
    lanes_cur = await execute(conn, query("select_lane_events"), lanes) if lanes["idxs"] else None
    ids_cur = await execute(conn, query("select_events_by_ids"), ids) if ids["event_ids"] else None
    sessions, now = await locked.result()
    cursors = {
        (r["session_id"], r["consumer"], r["cursor_key"]): r for r in await cursors_cur.fetchall()
    }
    lane_rows: dict[tuple[str, str, str, int], DictRow] = {}
    if lanes_cur is not None:
        for r in await lanes_cur.fetchall():
            lane_rows[(r["session_id"], r["consumer"], r["lane"], int(r["idx"]))] = r
    owners: dict[tuple[str, str], StoredEvent] = {}
    if ids_cur is not None:
        for r in await ids_cur.fetchall():
            owners[(r["session_id"], r["event_id"])] = codec.event(r)
    plan = store._plan(now, sessions)
    batch = Batch(plan, cursors, lane_rows, owners)
    results = [batch.judge(item) for item in items]
    committed.plan = plan
    committed.notify = await plan.apply(conn, channel=store._channel)
    return finished(results)


def fence(
    session_id: str,
    session: SessionHead,
    cursors: dict[tuple[str, str], Any],
    cause: AttemptRef,
) -> None:
    """The attempt fence of consumer appends and clears: the cause names the current attempt
    of a live head, else ``SUPERSEDED_ATTEMPT``."""
    row = None
    if cause.index > session.clear_index:
        row = cursors.get((cause.consumer, codec.cursor_key(cause.lane, cause.index)))
    if (
        row is None
        or row["head"] != cause.index
        or row["attempt_count"] != cause.attempt
        or row["failed_at"] is not None
    ):
        raise A2Error(
            "SUPERSEDED_ATTEMPT",
            f"attempt {cause.attempt} of {cause.consumer} at index {cause.index} "
            f"is no longer current in session '{session_id}'",
        )
