"""Outcomes of attempts on SQLite: complete (in batches), fail, dead letters, redrive.

A batch of completions is one transaction: each completion is judged against what
the completions before it wrote, exactly as ``complete_attempt`` one by one would
judge it, and any error rolls the whole batch back. No round trips to save here:
each statement is a call into the library, so the code reads as MemoryStore's does.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import timedelta

from ..contract.args import CancelArgs, ClaimAnyArgs, CompletionItem, FailArgs, RedriveArgs
from ..contract.rules import (
    CANCELLED_ERROR,
    CompletedAttempt,
    attempt_is_live,
    claim_order,
    held_until,
    judge_completion,
    judge_failure,
    mismatched_retry,
    refuse_mismatched_retry,
    refuse_taken_ids,
    replay,
)
from ..models import (
    AnyLane,
    CancelResult,
    ClaimRef,
    Completed,
    CompletedAndClaimed,
    CompleteResult,
    Consumer,
    FailResult,
    Head,
    RedriveResult,
    StoredEvent,
    Superseded,
)
from . import attempts as history
from . import codec
from .claims import claim_any
from .cursors import advance, has_pending, insert_batch, refresh_types, release_pins, select_cursor
from .database import SessionHead, Tx, rows
from .log import live_owners


def complete_all(tx: Tx, items: Sequence[CompletionItem]) -> list[CompleteResult]:
    """Judges each completion in order (see the module docstring)."""
    return [_complete(tx, item) for item in items]


def _recorded(tx: Tx, row: sqlite3.Row | None, item: CompletionItem) -> CompletedAttempt | None:
    """How the head at this index was finished, if it was: a lane's record of it, or an
    event or log cursor's record of its last completion."""
    index = item.args.completion.index
    if row is None or row["head"] == index:
        return None
    if row["kind"] == "lane":
        c = item.args.completion
        lane = tx.one(
            "select_lane_event",
            {"session_id": c.session_id, "consumer": c.consumer, "lane": row["lane"], "idx": index},
        )
        if lane is None or not lane["done"]:
            return None
        return CompletedAttempt(lane["completed_attempt"], codec.ids_of(lane["returned_event_ids"]))
    if row["completed_idx"] != index:
        return None
    return CompletedAttempt(row["completed_attempt"], codec.ids_of(row["returned_event_ids"]))


def _complete(tx: Tx, item: CompletionItem) -> CompleteResult:
    cause, c = item.args.cause, item.args.completion
    session = tx.session(c.session_id)
    live = attempt_is_live(
        cause.index, head=session.head, clear_index=session.clear_index, session_id=c.session_id
    )
    if not live:
        return Superseded()
    ids = item.args.ids
    row = select_cursor(tx.conn, c.session_id, c.consumer, codec.cursor_key(c.lane, c.index))
    recorded = _recorded(tx, row, item)
    view = None if row is None else codec.cursor(row)
    verdict = judge_completion(view, cause, recorded, known=row is not None, ids=ids)
    if verdict == "unknown":
        return Superseded()
    # Whatever the verdict, the declared log types are recorded (``refreshLogTypes``); a
    # call that raises rolls them back with the rest.
    refresh_types(tx, c.session_id, item.wake)
    if verdict == "fresh" and row is not None:
        refuse_taken_ids(bool(live_owners(tx.conn, session, ids)))
        stored, session = insert_batch(
            tx,
            session,
            item.args.events,
            wake=item.wake,
            cause=cause,
            trace_parent=item.args.completion.trace_parent,
        )
        history.record(tx, c.session_id, row, "completed")
        advance(tx, session, row, CompletedAttempt(cause.attempt, tuple(ids)))
        return Completed(stored)
    if verdict == "replay" and recorded is not None:
        refuse_mismatched_retry(recorded, ids)
        return Completed(_replayed(tx, session, item))
    return Superseded()


def _replayed(tx: Tx, session: SessionHead, item: CompletionItem) -> list[StoredEvent]:
    """A retry of the completion that moved the head: the same ids, stored events back."""
    ids = item.args.ids
    owners = {event.id: event for event in live_owners(tx.conn, session, ids)}
    found = []
    for event_id in ids:
        event = owners.get(event_id)
        if event is None or event.cause != item.args.cause:
            raise mismatched_retry()
        found.append(event)
    return replay(item.args.events, found)


def complete_and_claim(
    tx: Tx, items: Sequence[CompletionItem], claim: ClaimAnyArgs
) -> CompletedAndClaimed:
    """The completions, then ``claim_any``, at one time in one transaction. Only sessions
    where a head made ready here is still unclaimed are announced as work."""
    results = complete_all(tx, items)
    heads = claim_any(tx, claim)
    made_ready, tx.work = tx.work, set()
    for session_id in made_ready:
        row = tx.one("still_ready", {"session_id": session_id, "now": tx.now_us})
        if row is not None and row["ready"]:
            tx.work.add(session_id)
    return CompletedAndClaimed(results, heads)


def fail_attempt(tx: Tx, args: FailArgs) -> FailResult:
    """Records a failed attempt; ``retry_after`` holds the head back meanwhile."""
    sid, ref = args.session_id, args.attempt
    session = tx.session(sid)
    if not attempt_is_live(
        ref.index, head=session.head, clear_index=session.clear_index, session_id=sid
    ):
        return FailResult("superseded", 0)
    key = codec.cursor_key(ref.lane, ref.index)
    row = select_cursor(tx.conn, sid, ref.consumer, key)
    result, record = judge_failure(
        None if row is None else codec.cursor(row), ref, args.max_failures
    )
    if not record:
        return result
    dead = result.outcome == "dead_lettered"
    delay = None if dead else args.retry_after
    retry_at = None if delay is None else codec.micros(tx.now + timedelta(seconds=delay))
    assert row is not None
    history.record(tx, sid, row, "dead_lettered" if dead else "failed", error=args.error)
    tx.run(
        "fail_head",
        {
            "session_id": sid,
            "consumer": ref.consumer,
            "cursor_key": key,
            "idx": ref.index,
            "attempt": ref.attempt,
            "failure_count": result.failure_count,
            "error": args.error,
            "now": tx.now_us,
            "dead": dead,
            "retry_at": retry_at,
        },
    )
    if dead:
        release_pins(tx, sid, ref.consumer, key, ref.index)
    elif retry_at is None:
        tx.work.add(sid)
    return result


def dead_letters(conn: sqlite3.Connection, session_id: str) -> list[Head]:
    return [codec.head(row) for row in rows(conn, "dead_letters", {"session_id": session_id})]


def redrive(tx: Tx, args: RedriveArgs, wake: Sequence[Consumer]) -> RedriveResult:
    """Retries or skips a dead-lettered head; not redriven when no such head is live.
    ``args.lane`` picks the cursor: ``ANY_LANE`` the one ``dead_letters`` lists first,
    ``None`` the event cursor, a string that lane's (or log's) cursor."""
    sid = args.session_id
    session = tx.session(sid)
    if not session.exists:
        return RedriveResult(False, False)
    dead = [
        row
        for row in tx.rows(
            "dead_cursors_at", {"session_id": sid, "consumer": args.consumer, "idx": args.index}
        )
        if args.index > session.clear_index
        and (isinstance(args.lane, AnyLane) or row["lane"] == args.lane)
    ]
    row = min(
        dead,
        key=lambda r: claim_order(ClaimRef(r["consumer"], r["lane"], args.index)),
        default=None,
    )
    if row is None:
        return RedriveResult(False, has_pending(tx.conn, session, args.consumers))
    refresh_types(tx, sid, wake)
    if args.action == "skip":
        advance(tx, session, row, CompletedAttempt(None, ()))
    else:
        key = {"session_id": sid, "consumer": args.consumer, "cursor_key": row["cursor_key"]}
        tx.run("retry_head", {**key, "idx": args.index, "now": tx.now_us})
        tx.work.add(sid)
    return RedriveResult(True, has_pending(tx.conn, session, args.consumers))


def cancel_head(tx: Tx, args: CancelArgs, wake: Sequence[Consumer]) -> CancelResult:
    """Skips or dead-letters a live head (see ``CheckedStore.cancel_head``); ``ANY_LANE``
    takes the first in claim order."""
    sid = args.session_id
    session = tx.session(sid)
    if not session.exists:
        return CancelResult(False, None, False)
    live = [
        row
        for row in tx.rows(
            "live_cursors_at", {"session_id": sid, "consumer": args.consumer, "idx": args.index}
        )
        if args.index > session.clear_index
        and (isinstance(args.lane, AnyLane) or row["lane"] == args.lane)
    ]
    row = min(
        live,
        key=lambda r: claim_order(ClaimRef(r["consumer"], r["lane"], args.index)),
        default=None,
    )
    if row is None:
        return CancelResult(False, None, has_pending(tx.conn, session, args.consumers))
    key = {"session_id": sid, "consumer": args.consumer, "cursor_key": row["cursor_key"]}
    lease_end = held_until(row["claim_holder"], codec.maybe_time(row["claim_expires_at"]), tx.now)
    if lease_end is not None:
        history.record(tx, sid, row, "cancelled")
    if args.action == "dead_letter":
        dead = {**key, "idx": args.index, "now": tx.now_us, "error": CANCELLED_ERROR}
        tx.run("cancel_dead_letter", dead)
        release_pins(tx, sid, args.consumer, row["cursor_key"], args.index)
    else:
        refresh_types(tx, sid, wake)
        advance(tx, session, row, CompletedAttempt(None, ()))
        if lease_end is not None and row["kind"] != "event":
            tx.run("hold_cursor_until", {**key, "until": codec.micros(lease_end)})
    return CancelResult(True, lease_end, has_pending(tx.conn, session, args.consumers))
