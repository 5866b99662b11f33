"""Cursor mechanics inside a write transaction: append a batch and start its cursor work,
wake log cursors, advance a cursor past its head, release a head's snapshot pins.

The order of writes is MemoryStore's (``a2pg.memory.cursors``), statement by statement:
a batch's events, then its targets in event order, then the log consumers it wakes.
Each function notes in the ``Tx`` what to announce (sessions appended to, heads made
claimable); indexes are allocated under the write lock the transaction holds.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import replace

from ..contract.rules import CompletedAttempt, refuse_non_log_cursor
from ..contract.values import CheckedEvent
from ..models import Cause, Consumer, LogSpec, StoredEvent
from . import codec
from .database import SessionHead, Tx, one


def insert_batch(
    tx: Tx,
    session: SessionHead,
    events: Sequence[CheckedEvent],
    *,
    wake: Sequence[Consumer],
    cause: Cause | None = None,
    trace_parent: str | None = None,
) -> tuple[list[StoredEvent], SessionHead]:
    """Appends a batch at ``head + 1 ...`` with one ``created_at`` and starts its cursor
    work: targets (event cursors, lane queues), then the log consumers of ``wake`` that
    take one of its events. Missing ids are generated; an id already live (a generated
    one that collides) fails the transaction with ``PARTIAL_DUPLICATE_BATCH``. ``cause``
    (a completion's) overrides the events' own; ``trace_parent`` (an append's trace
    context) is stored with each event. Returns the stored events and the session as it
    is now."""
    sid, base = session.session_id, session.head
    ids = [checked.event.id or tx.new_id() for checked in events]
    if session.clear_index > 0:
        params = {"session_id": sid, "ids": json.dumps(ids), "clear_index": session.clear_index}
        tx.run("retire_ids", params)
    stored: list[StoredEvent] = []
    for offset, (checked, event_id) in enumerate(zip(events, ids, strict=True)):
        event = checked.event
        index = base + 1 + offset
        event_cause = cause or event.cause
        tx.run(
            "insert_event",
            {
                "session_id": sid,
                "idx": index,
                "event_type": event.type,
                "payload": checked.payload_json,
                "event_id": event_id,
                "created_at": tx.now_us,
                "cause": codec.cause_json(event_cause),
                "trace_parent": trace_parent,
            },
        )
        payload = json.loads(checked.payload_json)
        stored.append(
            StoredEvent(
                event_id, event.type, payload, index, sid, tx.now, event_cause, trace_parent
            )
        )
    if events:
        tx.appended.add(sid)
    for offset, checked in enumerate(events):
        _start_targets(tx, session, checked, base + 1 + offset)
    types = [checked.event.type for checked in events]
    for consumer in wake:
        log = consumer.log
        if log is None:
            continue
        first = next((base + 1 + i for i, t in enumerate(types) if log.takes(t)), None)
        if first is not None:
            _wake_log(tx, session, consumer.name, log, base=base, first=first)
    return stored, replace(session, head=base + len(events))


def _start_targets(tx: Tx, session: SessionHead, checked: CheckedEvent, index: int) -> None:
    """An event's targets (each once): an event cursor per consumer, or the event queued on
    the consumer's lane (an idle or new lane cursor takes it as its head)."""
    sid = session.session_id
    for target in dict.fromkeys(checked.event.targets):
        due = tx.due_us(target.not_before)
        params = {
            "session_id": sid,
            "consumer": target.consumer,
            "idx": index,
            "now": tx.now_us,
            "due": due,
        }
        if target.lane is None:
            tx.run("insert_event_cursor", {**params, "cursor_key": codec.cursor_key(None, index)})
            tx.work.add(sid)
            continue
        tx.run("insert_lane_event", {**params, "lane": target.lane})
        queued = {
            **params,
            "lane": target.lane,
            "cursor_key": codec.cursor_key(target.lane, 0),
            "clear_index": session.clear_index,
        }
        if tx.run("queue_lane_head", queued):
            tx.work.add(sid)


def _wake_log(
    tx: Tx, session: SessionHead, name: str, log: LogSpec, *, base: int, first: int
) -> None:
    """A log consumer woken by a batch whose first event it takes is ``first``: a missing
    cursor opens (at the clear marker with backfill, else at ``base`` with ``first`` as its
    head); an idle log cursor takes its next event of its (newly recorded) types."""
    sid = session.session_id
    key = codec.cursor_key(log.lane, 0)
    existing = select_cursor(tx.conn, sid, name, key)
    if existing is None:
        position = session.clear_index if log.backfill else base
        head = next_log_head(tx.conn, sid, position, log.types) if log.backfill else first
        open_log_cursor(tx, sid, name, log, position, head)
        return
    refuse_non_log_cursor(existing["kind"], name, log.lane)  # the transaction rolls back
    wake_idle(tx, sid, existing, log)


def open_log_cursor(
    tx: Tx, session_id: str, name: str, log: LogSpec, position: int, head: int | None
) -> None:
    tx.run(
        "open_log_cursor",
        {
            "session_id": session_id,
            "consumer": name,
            "cursor_key": codec.cursor_key(log.lane, 0),
            "lane": log.lane,
            "position": position,
            "head": head,
            "types": codec.types_json(log.types),
            "now": tx.now_us,
        },
    )
    if head is not None:
        tx.work.add(session_id)


def wake_idle(tx: Tx, session_id: str, cursor: sqlite3.Row, log: LogSpec) -> None:
    """Records the consumer's types on its log cursor; an idle one takes its next event."""
    key = cursor["cursor_key"]
    types = codec.types_json(log.types)
    params = {"session_id": session_id, "consumer": cursor["consumer"], "cursor_key": key}
    tx.run("set_log_types", {**params, "types": types})
    if cursor["head"] is None:
        head = next_log_head(tx.conn, session_id, int(cursor["position"]), log.types)
        set_head(tx, session_id, cursor["consumer"], key, head)


def set_head(tx: Tx, session_id: str, consumer: str, key: str, head: int | None) -> None:
    """Moves a cursor to a new head (or idle): fresh bookkeeping, ready from now."""
    params = {"session_id": session_id, "consumer": consumer, "cursor_key": key}
    tx.run("set_head", {**params, "head": head, "now": tx.now_us})
    if head is not None:
        tx.work.add(session_id)


def refresh_types(tx: Tx, session_id: str, wake: Sequence[Consumer]) -> None:
    """Records each declared log consumer's types on its log cursor (``refreshLogTypes``)."""
    for consumer in wake:
        if consumer.log is not None:
            params = {
                "session_id": session_id,
                "consumer": consumer.name,
                "cursor_key": codec.cursor_key(consumer.log.lane, 0),
                "types": codec.types_json(consumer.log.types),
            }
            tx.run("set_log_types", params)


def select_cursor(
    conn: sqlite3.Connection, session_id: str, consumer: str, key: str
) -> sqlite3.Row | None:
    params = {"session_id": session_id, "consumer": consumer, "cursor_key": key}
    return one(conn, "select_cursor", params)


def next_log_head(
    conn: sqlite3.Connection, session_id: str, after: int, types: Sequence[str] | None
) -> int | None:
    """The first event after ``after`` a log cursor of ``types`` takes, or None."""
    params = {"session_id": session_id, "after": after, "types": codec.types_json(types)}
    row = one(conn, "next_log_head", params)
    return None if row is None or row["next"] is None else int(row["next"])


def advance(tx: Tx, session: SessionHead, cursor: sqlite3.Row, done: CompletedAttempt) -> None:
    """Moves a cursor past its head: an event cursor goes idle, a lane takes its next queued
    event, a log cursor its next event of its types. A completion (``done.attempt`` set) is
    recorded so a retry of it is recognised; a skip records nothing on event and log
    cursors and marks the lane event finished without an attempt."""
    sid = session.session_id
    consumer, key, kind = cursor["consumer"], cursor["cursor_key"], cursor["kind"]
    finished = int(cursor["head"])
    release_pins(tx, sid, consumer, key, finished)
    returned = None if done.attempt is None else codec.ids_json(done.ids)
    params = {"session_id": sid, "consumer": consumer, "cursor_key": key}
    following: int | None = None
    due: int | None = None
    if kind == "lane":
        lane = cursor["lane"]
        lane_params = {"session_id": sid, "consumer": consumer, "lane": lane, "idx": finished}
        tx.run("finish_lane_event", {**lane_params, "attempt": done.attempt, "returned": returned})
        after = max(finished, session.clear_index)
        row = tx.one("next_lane_head", {**lane_params, "after": after})
        following = None if row is None or row["next"] is None else int(row["next"])
        if row is not None and row["due"] is not None and int(row["due"]) > tx.now_us:
            due = int(row["due"])
    else:
        if kind == "log":  # its types as they are now: the caller may have refreshed them
            current = select_cursor(tx.conn, sid, consumer, key)
            types = codec.types_of(None if current is None else current["types"])
            following = next_log_head(tx.conn, sid, finished, types)
        if done.attempt is not None:
            record = {"idx": finished, "attempt": done.attempt, "returned": returned}
            tx.run("record_completion", {**params, **record})
    tx.run("move_cursor", {**params, "next": following, "now": tx.now_us, "due": due})
    if following is not None:
        tx.work.add(sid)


def release_pins(tx: Tx, session_id: str, consumer: str, key: str, index: int) -> None:
    """A finished, skipped or dead head's snapshot pins go, and the history they alone kept."""
    params = {"session_id": session_id, "consumer": consumer, "cursor_key": key, "idx": index}
    released = {(r["reducer_name"], int(r["up_to_index"])) for r in tx.rows("release_pins", params)}
    for reducer, up_to in sorted(released):
        tx.run(
            "drop_unpinned_history", {"session_id": session_id, "reducer": reducer, "up_to": up_to}
        )


def has_pending(
    conn: sqlite3.Connection, session: SessionHead, consumers: Sequence[Consumer] | None
) -> bool:
    """Some served cursor (all when ``consumers`` is None) has a live head, not dead."""
    params = {
        "session_id": session.session_id,
        "clear_index": session.clear_index,
        "names": codec.names_json(consumers),
    }
    row = one(conn, "has_pending", params)
    return bool(row and row["has_pending"])
