"""Outcomes of attempts in memory: complete, fail, redrive, and the dead letters."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from ..contract.args import CancelArgs, CompletionArgs, CompletionItem, FailArgs, RedriveArgs
from ..contract.rules import (
    CANCELLED_ERROR,
    CompletedAttempt,
    attempt_is_live,
    claim_order,
    held_until,
    judge_completion,
    judge_failure,
    refuse_mismatched_retry,
    refuse_taken_ids,
    replay,
)
from ..models import (
    AnyLane,
    CancelResult,
    ClaimRef,
    Completed,
    CompleteResult,
    Consumer,
    FailResult,
    Head,
    RedriveResult,
    Superseded,
)
from . import attempts as history
from .cursors import (
    advance,
    dead_letter,
    has_pending,
    hold_until,
    refresh_types,
    refuse_targeted_lanes,
)
from .log import insert
from .state import Sessions, SessionState, cursor_key


def complete_all(
    sessions: Sessions,
    batch: Sequence[CompletionItem],
    *,
    now: datetime,
    new_id: Callable[[], str],
) -> list[CompleteResult]:
    """Judges each completion in order, all or nothing.

    For a batch, the touched sessions are copied before the first completion runs; if
    any completion raises, the copies are put back, so nothing of the batch remains.
    """
    copies = _copies(sessions, [item.args.completion.session_id for item in batch])
    try:
        return [_complete(sessions, item.args, item.wake, now, new_id) for item in batch]
    except BaseException:
        sessions.restore(copies)
        raise


def _copies(sessions: Sessions, touched: Sequence[str]) -> dict[str, SessionState]:
    """Copies of the sessions a batch touches (a completion in a session that does not
    exist raises before anything is written). A lone completion needs no copy: it
    raises, if at all, before it writes anything."""
    if len(touched) < 2:
        return {}
    found = [session for sid in set(touched) if (session := sessions.get(sid)) is not None]
    return {session.session_id: session.copy() for session in found}


def _live(session: SessionState | None, session_id: str, index: int) -> SessionState | None:
    """The session an attempt at ``index`` is judged in: None when a clear superseded it."""
    head, clear_index = (0, 0) if session is None else (session.head, session.clear_index)
    live = attempt_is_live(index, head=head, clear_index=clear_index, session_id=session_id)
    return session if live else None


def _complete(
    sessions: Sessions,
    args: CompletionArgs,
    wake: Sequence[Consumer],
    now: datetime,
    new_id: Callable[[], str],
) -> CompleteResult:
    cause, session_id = args.cause, args.completion.session_id
    session = _live(sessions.get(session_id), session_id, cause.index)
    if session is None:
        return Superseded()
    key = cursor_key(cause.consumer, cause.lane, cause.index)
    cursor = session.cursors.get(key)
    recorded = session.finished.get(key) if cursor is None else cursor.completions.get(cause.index)
    view = None if cursor is None else cursor.view()
    known = cursor is not None or key in session.finished
    verdict = judge_completion(view, cause, recorded, known=known, ids=args.ids)
    if verdict == "unknown":
        return Superseded()
    # Whatever the verdict, the declared log types are recorded (``refreshLogTypes``), once
    # nothing can raise any more: a lone completion is not copied to roll back to.
    if verdict == "fresh" and cursor is not None:
        refuse_taken_ids(any(session.owner_of(event_id) is not None for event_id in args.ids))
        refuse_targeted_lanes(session, [checked.event.type for checked in args.events], wake)
        refresh_types(session, wake)
        rows = insert(
            session,
            args.events,
            now=now,
            new_id=new_id,
            wake=wake,
            cause=cause,
            trace_parent=args.completion.trace_parent,
        )
        history.record(session, cursor, "completed", now)
        advance(session, cursor, CompletedAttempt(cause.attempt, tuple(args.ids)), now)
        return Completed([row.stored() for row in rows])
    if verdict == "replay" and recorded is not None:
        # The rows of a completed attempt sit above its index, so above the clear: live.
        refuse_mismatched_retry(recorded, args.ids)
        replayed = replay(args.events, [session.by_id[i].stored() for i in args.ids])
        refresh_types(session, wake)
        return Completed(replayed)
    refresh_types(session, wake)
    return Superseded()


def fail(session: SessionState | None, args: FailArgs, *, now: datetime) -> FailResult:
    """Records a failed attempt; ``retry_after`` holds the head back meanwhile."""
    ref = args.attempt
    session = _live(session, args.session_id, ref.index)
    if session is None:
        return FailResult("superseded", 0)
    cursor = session.cursor_of(ref)
    view = None if cursor is None else cursor.view()
    result, record = judge_failure(view, ref, args.max_failures)
    if not record or cursor is None:
        return result
    dead = result.outcome == "dead_lettered"
    delay = None if dead else args.retry_after
    retry_at = None if delay is None else now + timedelta(seconds=delay)
    history.record(session, cursor, "dead_lettered" if dead else "failed", now, error=args.error)
    cursor.dispatch = replace(
        cursor.dispatch,
        failure_count=result.failure_count,
        last_error=args.error,
        last_failed_at=now,
        last_failed_attempt=ref.attempt,
        claim_holder=None,
        claim_expires_at=retry_at,
        failed_at=now if dead else None,
    )
    if dead:
        dead_letter(session, cursor)
    else:
        session.set_ready(cursor, retry_at or now)
        session.new_work = session.new_work or retry_at is None
    return result


def redrive(
    session: SessionState | None, args: RedriveArgs, wake: Sequence[Consumer], *, now: datetime
) -> RedriveResult:
    """Retries or skips a dead-lettered head; not redriven when no such head is live.
    ``args.lane`` picks the cursor: ``ANY_LANE`` any of the consumer's, ``None`` the event
    cursor, a string that lane's (or log's) cursor."""
    if session is None:
        return RedriveResult(False, False)
    lane = args.lane
    dead = [
        cursor
        for cursor in session.cursors.values()
        if cursor.consumer == args.consumer
        and cursor.head == args.index
        and cursor.dispatch.failed_at is not None
        and (isinstance(lane, AnyLane) or cursor.lane == lane)
    ]
    # The consumer's dead event head and a dead lane head may share the index: without a
    # lane, take the one ``dead_letters`` lists first (the event cursor before named lanes).
    cursor = min(
        dead, key=lambda c: claim_order(ClaimRef(c.consumer, c.lane, args.index)), default=None
    )
    if cursor is None:
        return RedriveResult(False, has_pending(session, args.consumers))
    refresh_types(session, wake)
    # Wakes only when a head becomes claimable: a retried one, or the next head a skip
    # exposes (``advance`` announces that); a skip leaving the cursor idle wakes nobody.
    if args.action == "skip":
        advance(session, cursor, CompletedAttempt(None, ()), now)
    else:
        cursor.dispatch = replace(cursor.dispatch, failed_at=None, failure_count=0)
        session.set_ready(cursor, now)
        session.new_work = True
    return RedriveResult(True, has_pending(session, args.consumers))


def dead_heads(session: SessionState | None) -> list[Head]:
    if session is None:
        return []
    heads = [
        session.head_of(cursor)
        for cursor in session.cursors.values()
        if cursor.head is not None and cursor.dispatch.failed_at is not None
    ]
    return sorted(heads, key=lambda head: claim_order(head.ref))


def cancel_head(
    session: SessionState | None, args: CancelArgs, wake: Sequence[Consumer], *, now: datetime
) -> CancelResult:
    """Skips or dead-letters the consumer's live head at ``args.index`` (see
    ``CheckedStore.cancel_head``); ``ANY_LANE`` takes the first in claim order."""
    if session is None:
        return CancelResult(False, None, False)
    lane = args.lane
    live = [
        cursor
        for cursor in session.cursors.values()
        if cursor.consumer == args.consumer
        and cursor.head == args.index
        and args.index > session.clear_index
        and cursor.dispatch.failed_at is None
        and (isinstance(lane, AnyLane) or cursor.lane == lane)
    ]
    cursor = min(
        live, key=lambda c: claim_order(ClaimRef(c.consumer, c.lane, args.index)), default=None
    )
    if cursor is None:
        return CancelResult(False, None, has_pending(session, args.consumers))
    dispatch = cursor.dispatch
    lease_end = held_until(dispatch.claim_holder, dispatch.claim_expires_at, now)
    if lease_end is not None:
        history.record(session, cursor, "cancelled", now)
    if args.action == "dead_letter":
        cursor.dispatch = replace(
            dispatch,
            claim_holder=None,
            claim_expires_at=None,
            failed_at=now,
            last_error=CANCELLED_ERROR,
        )
        dead_letter(session, cursor)
    else:
        refresh_types(session, wake)
        advance(session, cursor, CompletedAttempt(None, ()), now)
        if lease_end is not None and cursor.kind != "event" and cursor.head is not None:
            hold_until(session, cursor, lease_end)
    return CancelResult(True, lease_end, has_pending(session, args.consumers))
