"""The session log on PostgreSQL: append, read, wake a log consumer, list cursors and sessions."""

from __future__ import annotations

import json
from collections.abc import Sequence

import psycopg
from psycopg import AsyncCursor
from psycopg.rows import DictRow

from ..contract.args import AppendArgs, ReadArgs, SessionsArgs, WakeLogArgs
from ..contract.rules import (
    cleared_origin,
    fence,
    is_replay,
    refuse_cleared_origin,
    refuse_non_log_cursor,
    replay,
    woken_logs,
)
from ..ids import IdGenerator
from ..models import AppendResult, Consumer, Cursor, SessionInfo, StoredEvent, WakeLogResult
from . import codec
from .database import MAX_INDEX, Database, Finish, Tx, finished
from .errors import violated
from .queries import Positional
from .writes import columns, push

STREAM_BATCH = 256
"""Events a stream reads per look at the table."""


def names_of(consumers: Sequence[Consumer] | None) -> list[str] | None:
    """The served consumers as a SQL filter: None serves every consumer."""
    return None if consumers is None else [consumer.name for consumer in consumers]


def has_pending(session_id: str, consumers: Sequence[Consumer] | None) -> dict[str, object]:
    """The parameters of ``has_pending`` for the consumers a call serves."""
    return {"session_id": session_id, "names": names_of(consumers)}


async def pending_flag(cur: AsyncCursor[DictRow]) -> bool:
    row = await cur.fetchone()
    return bool(row and row["has_pending"])


APPEND_DECLINED = "a2pg: an append must take the transaction"
"""The error text ``append_fresh`` fails with when the batch needs ``append``'s transaction."""


def fits_one_statement(args: AppendArgs) -> bool:
    """Whether ``append_fresh`` can take the batch: no event names a cause (its attempt
    fence reads the cursor first), no target is delayed (its due time is read against the
    transaction's clock) and no origin could be at the clear index of a new session
    (``append_fresh`` compares it only on a stored session row)."""
    if args.origin_index is not None and args.origin_index < 1:
        return False
    return all(
        item.event.cause is None and all(target.not_before is None for target in item.event.targets)
        for item in args.events
    )


def _declined(exc: psycopg.Error) -> bool:
    """What ``append_fresh`` leaves to ``append``: a supplied id taken (the transaction
    tells a replay from a partial duplicate) and its own marker (see the statement)."""
    return violated(exc) == "a2_events_event_id" or APPEND_DECLINED in str(exc)


def event_ids(args: AppendArgs, new_id: IdGenerator) -> list[str]:
    """The batch's ids, supplied or generated: made once per append, so a statement that
    declines and the transaction after it give the events the same ids."""
    return [item.event.id if item.event.id is not None else new_id() for item in args.events]


async def append_fresh(
    db: Database, args: AppendArgs, wake: Sequence[Consumer], ids: Sequence[str]
) -> AppendResult | None:
    """The append as one autocommit statement (``append_fresh`` in ``sql/log.sql``): one
    round trip. None when the statement declined the batch, having written nothing: a
    supplied id is taken, the session was cleared and ids are supplied, an append of
    the session committed while it waited for the session row and log consumers wake,
    or a log consumer it wakes has a targeted lane cursor there (``append`` refuses it)."""
    session_id = args.session_id
    events: list[str] = []
    targets: list[str] = []
    types: set[str] = set()
    lanes = False
    for offset, (event_id, checked) in enumerate(zip(ids, args.events, strict=True), start=1):
        event = checked.event
        types.add(event.type)
        events.append(
            f'{{"i":{codec.quoted(event_id)},"t":{codec.quoted(event.type)},"p":{checked.payload_json}}}'
        )
        for target in dict.fromkeys(event.targets):
            lanes = lanes or target.lane is not None
            lane = "null" if target.lane is None else codec.quoted(target.lane)
            targets.append(f'{{"n":{offset},"c":{codec.quoted(target.consumer)},"l":{lane}}}')
    wakes: list[str] = []
    for consumer in wake:
        spec = consumer.log
        if spec is None or not any(spec.takes(event_type) for event_type in types):
            continue
        key = codec.quoted(codec.cursor_key(spec.lane, 0))
        wakes.append(
            f'{{"c":{codec.quoted(consumer.name)},"k":{key},"l":{codec.quoted(spec.lane)},'
            f'"y":{codec.types_json(spec.types) or "null"},'
            f'"b":{"true" if spec.backfill else "false"}}}'
        )
    params = {
        "session_id": session_id,
        "n": len(args.events),
        "now": db.now_param(),
        "origin": args.origin_index,
        "events": f"[{','.join(events)}]",
        "targets": f"[{','.join(targets)}]",
        "wakes": f"[{','.join(wakes)}]",
        "event_key": codec.EVENT_KEY_PREFIX,
        "lane_key": codec.LANE_KEY_PREFIX,
        "channel": db.channel,
        "names": names_of(args.consumers),
        "supplied": any(item.event.id is not None for item in args.events),
        "trace_parent": args.trace_parent,
    }
    rows = await db.write_one(
        _statement(db, lanes=lanes, wakes=bool(wakes)),
        params,
        idempotent=len(args.supplied_ids) == len(args.events),
        declined=_declined,
        session=session_id,
    )
    if rows is None:
        return None
    if not rows:
        assert args.origin_index is not None
        raise cleared_origin(args.origin_index, session_id)
    row = rows[0]
    base, now = int(row["base"]), codec.utc(row["now"])
    stored = [
        StoredEvent(
            event_id,
            checked.event.type,
            json.loads(checked.payload_json),
            base + offset,
            session_id,
            now,
            None,
            args.trace_parent,
        )
        for offset, (event_id, checked) in enumerate(zip(ids, args.events, strict=True), 1)
    ]
    db.announce([session_id], [session_id] if row["notified"] else [])
    return AppendResult(stored, bool(row["has_pending"]))


def _statement(db: Database, *, lanes: bool, wakes: bool) -> Positional:
    """The shape of ``append_fresh`` that runs only what the batch needs."""
    statements = db.statements
    if wakes and lanes:
        return statements.positional("append_fresh")
    if wakes:
        return statements.positional("append_wakes")
    if lanes:
        return statements.positional("append_lanes")
    return statements.positional("append_events")


async def append(
    tx: Tx, args: AppendArgs, wake: Sequence[Consumer], ids: Sequence[str]
) -> Finish[AppendResult]:
    """Appends a batch atomically in two round trips; a batch of only stored ids replays.
    ``ids`` are the events' (``event_ids``)."""
    session_id = args.session_id
    supplied = args.supplied_ids
    causes = [item.event.cause for item in args.events if item.event.cause is not None]
    pending = has_pending(session_id, args.consumers)
    locked = await tx.lock([session_id], ensure=True)
    owned = {"session_ids": [session_id] * len(supplied), "event_ids": supplied}
    owners = await tx.execute(tx.query("select_events_by_ids"), owned) if supplied else None
    keys = columns("session_ids", "consumers", "keys")
    for cause in causes:
        push(keys, session_id, cause.consumer, codec.cursor_key(cause.lane, cause.index))
    woken = woken_logs([checked.event.type for checked in args.events], wake)
    for name, log in woken:  # the cursors the batch wakes: none may be a targeted lane's
        push(keys, session_id, name, codec.cursor_key(log.lane, 0))
    fences = await tx.execute(tx.query("select_cursors"), keys) if keys["keys"] else None
    sessions, now = await locked.result()
    session = sessions[session_id]
    stored = [] if owners is None else [codec.event(r) for r in await owners.fetchall()]
    live = [event for event in stored if event.index >= session.clear_index]
    if is_replay(len(live), len(args.events)):
        replayed = replay(args.events, live)
        flag = await tx.execute(tx.query("has_pending"), pending)
        return _appended(replayed, flag)
    refuse_cleared_origin(args.origin_index, session.clear_index, session_id)
    rows = [] if fences is None else await fences.fetchall()
    cursors = {(r["consumer"], r["cursor_key"]): codec.cursor(r) for r in rows}
    for cause in causes:
        cursor = cursors.get((cause.consumer, codec.cursor_key(cause.lane, cause.index)))
        fence(cause, cursor, session.clear_index, session_id)
    for name, log in woken:
        cursor = cursors.get((name, codec.cursor_key(log.lane, 0)))
        if cursor is not None:
            refuse_non_log_cursor(cursor.kind, name, log.lane)
    plan = tx.new_plan(now, sessions)
    inserted = plan.add_batch(
        session_id, args.events, wake=wake, ids=ids, trace_parent=args.trace_parent
    )
    await tx.apply(plan)
    flag = await tx.execute(tx.query("has_pending"), pending)
    return _appended(inserted, flag)


def _appended(events: list[StoredEvent], pending: AsyncCursor[DictRow]) -> Finish[AppendResult]:
    async def finish() -> AppendResult:
        return AppendResult(events, await pending_flag(pending))

    return finish


async def wake_log(tx: Tx, args: WakeLogArgs) -> Finish[WakeLogResult]:
    """Brings a log consumer's cursor up to date, creating it as an append would; a session
    with nothing after its clear marker and no cursor gets an idle, unstored cursor."""
    session_id, consumer, log = args.session_id, args.consumer, args.log
    keys = {
        "session_ids": [session_id],
        "consumers": [consumer.name],
        "keys": [codec.cursor_key(log.lane, 0)],
    }
    locked = await tx.lock([session_id])
    found = await tx.execute(tx.query("select_cursors"), keys)
    sessions, now = await locked.result()
    row = await found.fetchone()
    session = sessions.get(session_id)
    if session is None or (row is None and session.head == session.clear_index):
        marker = 0 if session is None else session.clear_index
        idle = Cursor(consumer.name, log.lane, "log", marker, None)
        return finished(WakeLogResult(idle, marker))
    if row is not None:
        refuse_non_log_cursor(row["kind"], consumer.name, log.lane)
    plan = tx.new_plan(now, sessions)
    plan.wake(session_id, consumer, session.clear_index if log.backfill else session.head)
    await tx.apply(plan)
    woken = await tx.execute(tx.query("select_cursors"), keys)

    async def finish() -> WakeLogResult:
        row = await woken.fetchone()
        assert row is not None
        return WakeLogResult(codec.cursor(row), session.head)

    return finish


async def read(db: Database, args: ReadArgs) -> list[StoredEvent]:
    return await events_after(
        db,
        args.session_id,
        after=args.after,
        through=args.through,
        types=None if args.types is None else list(args.types),
        limit=args.limit,
    )


async def events_after(
    db: Database,
    session_id: str,
    *,
    after: int,
    through: int | None = None,
    types: Sequence[str] | None = None,
    limit: int | None = None,
    visible: bool = True,
) -> list[StoredEvent]:
    """Events after ``after`` in index order; ``visible`` hides those below the clear marker."""
    rows = await db.run(
        db.query("read_events"),
        {
            "session_id": session_id,
            "visible": visible,
            "after": min(after, MAX_INDEX),
            "through": MAX_INDEX if through is None else min(through, MAX_INDEX),
            "types": None if types is None else list(types),
            "limit": None if limit is None else min(limit, MAX_INDEX),
        },
    )
    return [codec.event(row) for row in rows]


async def stream_batch(
    db: Database, session_id: str, last: int, *, visible: bool
) -> list[StoredEvent]:
    return await events_after(db, session_id, after=last, limit=STREAM_BATCH, visible=visible)


async def cursors(db: Database, session_id: str) -> list[Cursor]:
    rows = await db.run(db.query("list_cursors"), {"session_id": session_id})
    return [codec.cursor(row) for row in rows]


async def sessions(db: Database, args: SessionsArgs) -> list[SessionInfo]:
    rows = await db.run(db.query("sessions_page"), {"after": args.after or "", "limit": args.limit})
    return [
        SessionInfo(
            row["session_id"],
            int(row["head"]),
            int(row["clear_index"]),
            int(row["pending"]),
            int(row["dead_letters"]),
            int(row["blocked"]),
            codec.maybe_utc(row["last_event_at"]),
        )
        for row in rows
    ]


async def pending_now(db: Database, session_id: str, consumers: Sequence[Consumer] | None) -> bool:
    """``has_pending`` on its own (an append of nothing)."""
    rows = await db.run(db.query("has_pending"), has_pending(session_id, consumers))
    return bool(rows[0]["has_pending"])
