"""Claims and attempts on sessions' cursors: claim, renew, release, complete, fail, redrive."""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from dataclasses import replace
from datetime import datetime, timedelta

from ..errors import A2Error, invalid
from ..models import (
    AttemptRef,
    Busy,
    Cause,
    Claimed,
    ClaimRef,
    ClaimResult,
    Completed,
    CompleteResult,
    Completion,
    Consumer,
    FailOutcome,
    FailResult,
    Head,
    RedriveAction,
    ReleaseResult,
    RenewResult,
    Settled,
    StoredEvent,
    Superseded,
)
from ..validation import CheckedEvent
from .cursors import advance, refresh_types
from .log import batch_owners, insert, replay
from .ready import ReadyQueue
from .state import CursorState, Done, SessionState, cursor_key


def head_order(head: Head) -> tuple[int, str, str]:
    """Heads come back by index, then consumer (then lane, for a stable order)."""
    return (head.index, head.consumer, head.lane or "")


def claim_available(
    session: SessionState,
    *,
    holder: str,
    ttl: float,
    now: datetime,
    exclude: Sequence[ClaimRef],
    served: Set[str] | None,
    max_failures: int | None,
    through: int | None,
) -> ClaimResult:
    """Claims every eligible head of the session, by index then consumer."""
    excluded = {(ref.consumer, ref.lane, ref.index) for ref in exclude}
    eligible: list[CursorState] = []
    retry_at: datetime | None = None
    for cursor in session.cursors.values():
        head = cursor.head
        if (
            head is None
            or cursor.dispatch.failed_at is not None
            or (through is not None and head > through)
            or (served is not None and cursor.consumer not in served)
            or (cursor.consumer, cursor.lane, head) in excluded
        ):
            continue
        expiry = cursor.dispatch.claim_expires_at
        if expiry is not None and expiry > now:
            retry_at = expiry if retry_at is None else min(retry_at, expiry)
            continue
        eligible.append(cursor)
    if not eligible:
        return Settled() if retry_at is None else Busy(retry_at)
    eligible.sort(key=lambda cursor: (cursor.head or 0, cursor.consumer, cursor.lane or ""))
    heads = [
        claim_head(session, cursor, holder=holder, now=now, ttl=ttl, max_failures=max_failures)
        for cursor in eligible
    ]
    return Claimed(heads, session.head)


def claim_any(
    ready: ReadyQueue,
    *,
    holder: str,
    ttl: float,
    now: datetime,
    served: Set[str] | None,
    limit: int,
    max_failures: int | None,
) -> list[Head]:
    """Claims the ``limit`` oldest-ready eligible heads of all sessions: by ready time,
    then session id, index, consumer (and lane)."""
    taken = ready.take(now, lambda c: served is None or c.consumer in served, limit)
    return [
        claim_head(session, cursor, holder=holder, now=now, ttl=ttl, max_failures=max_failures)
        for session, cursor in taken
    ]


def claim_head(
    session: SessionState,
    cursor: CursorState,
    *,
    holder: str,
    now: datetime,
    ttl: float,
    max_failures: int | None,
) -> Head:
    """Claims one eligible head. A lapsed claim (holder still set: the worker died) counts a
    failure first; reaching ``max_failures`` dead-letters the head instead."""
    dispatch = cursor.dispatch
    if dispatch.claim_holder is not None:
        dispatch = replace(dispatch, failure_count=dispatch.failure_count + 1)
        if max_failures is not None and dispatch.failure_count >= max_failures:
            cursor.dispatch = replace(
                dispatch,
                attempt_count=dispatch.attempt_count + 1,
                claim_holder=None,
                claim_expires_at=None,
                failed_at=now,
            )
            dead_letter(session, cursor)
            return session.head_of(cursor)
    expires_at = now + timedelta(seconds=ttl)
    cursor.dispatch = replace(
        dispatch,
        attempt_count=dispatch.attempt_count + 1,
        first_claimed_at=dispatch.first_claimed_at or now,
        last_claimed_at=now,
        claim_holder=holder,
        claim_expires_at=expires_at,
    )
    session.set_ready(cursor, expires_at)
    return session.head_of(cursor)


def dead_letter(session: SessionState, cursor: CursorState) -> None:
    session.set_ready(cursor, None)
    session.snapshots.release(ClaimRef(cursor.consumer, cursor.lane, cursor.head or 0))


def assert_current_cause(session: SessionState | None, cause: Cause) -> None:
    """The attempt fence shared by consumer appends and clears."""
    cursor = None
    if session is not None and cause.index > session.clear_index:
        cursor = session.cursors.get(cursor_key(cause.consumer, cause.lane, cause.index))
    if (
        cursor is None
        or cursor.head != cause.index
        or cursor.dispatch.attempt_count != cause.attempt
        or cursor.dispatch.failed_at is not None
    ):
        raise A2Error(
            "SUPERSEDED_ATTEMPT",
            f"attempt {cause.attempt} of {cause.consumer} at index {cause.index} "
            f"is no longer current in session '{session.session_id if session else ''}'",
        )


def live_session(session: SessionState | None, index: int, session_id: str) -> SessionState | None:
    """The session an attempt at ``index`` is judged in: None when the index is at or below
    the clear marker (the attempt is superseded); no event there is ``INVALID_ARGUMENT``."""
    if session is not None and index <= session.clear_index:
        return None
    if session is None or session.row_at(index) is None:
        raise invalid(f"no event at index {index} in session '{session_id}'")
    return session


def complete(
    session: SessionState,
    completion: Completion,
    events: Sequence[CheckedEvent],
    *,
    wake: Sequence[Consumer],
    now: datetime,
    new_id: Callable[[], str],
) -> CompleteResult:
    """Judges one completion (the store has checked the index is live and holds an event)."""
    key = cursor_key(completion.consumer, completion.lane, completion.index)
    cursor = session.cursors.get(key)
    ids = [checked.event.id or "" for checked in events]
    if len(set(ids)) != len(ids):
        raise A2Error(
            "PARTIAL_DUPLICATE_BATCH", "returned event batch contains the same event id twice"
        )
    cause = AttemptRef(completion.consumer, completion.lane, completion.index, completion.attempt)
    if cursor is None or cursor.head != completion.index:
        done = session.finished.get(key) if cursor is None else cursor.completions.get(cause.index)
        if done is None or done.attempt != cause.attempt:
            return Superseded()
        return Completed(replay_completion(session, events, ids, done))
    dispatch = cursor.dispatch
    if (
        dispatch.attempt_count != cause.attempt
        or dispatch.failed_at is not None
        or dispatch.claim_holder is None
    ):
        return Superseded()
    if batch_owners(session, events):
        raise A2Error(
            "PARTIAL_DUPLICATE_BATCH", "returned event batch contains already-appended ids"
        )
    refresh_types(session, wake)
    rows = insert(session, events, now=now, new_id=new_id, wake=wake, cause=cause)
    advance(session, cursor, Done(cause.attempt, tuple(ids)), now)
    return Completed([row.stored() for row in rows])


def replay_completion(
    session: SessionState,
    events: Sequence[CheckedEvent],
    ids: list[str],
    done: Done,
) -> list[StoredEvent]:
    """A retried completion that already committed must return the same ids in the same
    order (else ``PARTIAL_DUPLICATE_BATCH``); it gets the stored events back. Those rows
    are always live: they sit above the completed index, which is above the clear."""
    if list(done.ids) != ids:
        raise A2Error(
            "PARTIAL_DUPLICATE_BATCH", "completed attempt does not match the returned event batch"
        )
    return replay(events, [session.by_id[event_id] for event_id in ids])


def fail(
    session: SessionState,
    ref: AttemptRef,
    *,
    error: str,
    max_failures: int,
    retry_after: float | None,
    now: datetime,
) -> FailResult:
    """Records a failed attempt (the store has checked the index is live and holds an event).

    Repeating the same call answers as the first did; a released or moved-on attempt
    is superseded.
    """
    cursor = session.cursors.get(cursor_key(ref.consumer, ref.lane, ref.index))
    if cursor is None:
        return FailResult("superseded", 0)
    dispatch = cursor.dispatch
    if (
        cursor.head != ref.index
        or dispatch.attempt_count != ref.attempt
        or (dispatch.claim_holder is None and dispatch.last_failed_attempt != ref.attempt)
    ):
        count = dispatch.failure_count if cursor.head == ref.index else 0
        return FailResult("superseded", count)
    if dispatch.claim_holder is None:
        outcome: FailOutcome = "failed" if dispatch.failed_at is None else "dead_lettered"
        return FailResult(outcome, dispatch.failure_count)
    failures = dispatch.failure_count + 1
    dead = failures >= max_failures
    retry_at = None if dead or retry_after is None else now + timedelta(seconds=retry_after)
    cursor.dispatch = replace(
        dispatch,
        failure_count=failures,
        last_error=error,
        last_failed_at=now,
        last_failed_attempt=ref.attempt,
        claim_holder=None,
        claim_expires_at=retry_at,
        failed_at=now if dead else None,
    )
    if dead:
        dead_letter(session, cursor)
        return FailResult("dead_lettered", failures)
    session.set_ready(cursor, retry_at or now)
    session.new_work = session.new_work or retry_at is None
    return FailResult("failed", failures)


def renew(
    session: SessionState | None,
    claims: Sequence[AttemptRef],
    *,
    holder: str,
    now: datetime,
    ttl: float,
) -> RenewResult:
    """Extends live claims of ``holder``; heads that moved on, were cleared or re-attempted
    are superseded; heads not reached yet (or lapsed, failed) are neither."""
    if session is None:
        return RenewResult([], [])
    held, superseded = judge_claims(session, claims, holder=holder)
    renewed: list[ClaimRef] = []
    expires_at = now + timedelta(seconds=ttl)
    for claim, cursor in held:
        expiry = cursor.dispatch.claim_expires_at
        if expiry is not None and expiry > now:
            cursor.dispatch = replace(cursor.dispatch, claim_expires_at=expires_at)
            session.set_ready(cursor, expires_at)
            renewed.append(claim.ref)
    return RenewResult(renewed, superseded)


def release(
    session: SessionState | None,
    claims: Sequence[AttemptRef],
    *,
    holder: str,
    now: datetime,
) -> ReleaseResult:
    """Hands ``holder``'s claims back, lapsed or not: claimable at once, no failure counted.
    The attempt count stays, so the next claim fences the released attempt out."""
    if session is None:
        return ReleaseResult([], [])
    held, superseded = judge_claims(session, claims, holder=holder)
    released: list[ClaimRef] = []
    for claim, cursor in held:
        cursor.dispatch = replace(cursor.dispatch, claim_holder=None, claim_expires_at=None)
        session.set_ready(cursor, now)
        session.new_work = True
        released.append(claim.ref)
    return ReleaseResult(released, superseded)


def judge_claims(
    session: SessionState, claims: Sequence[AttemptRef], *, holder: str
) -> tuple[list[tuple[AttemptRef, CursorState]], list[ClaimRef]]:
    """The claims ``holder`` still holds (lease lapsed or not), with their cursors, and the
    superseded ones (the head moved on, was cleared or re-attempted), by index then
    consumer. The rest (another holder's, released, failed, not reached yet) are neither."""
    held: list[tuple[AttemptRef, CursorState]] = []
    superseded: list[ClaimRef] = []
    for claim in sorted(claims, key=lambda c: (c.index, c.consumer, c.lane or "")):
        if claim.index <= session.clear_index:
            superseded.append(claim.ref)
            continue
        key = cursor_key(claim.consumer, claim.lane, claim.index)
        cursor = session.cursors.get(key)
        if cursor is None:
            if key in session.finished:
                superseded.append(claim.ref)
            continue
        if cursor.head != claim.index and cursor.position < claim.index:
            continue
        dispatch = cursor.dispatch
        if cursor.head != claim.index or dispatch.attempt_count > claim.attempt:
            superseded.append(claim.ref)
        elif (
            dispatch.attempt_count == claim.attempt
            and dispatch.failed_at is None
            and dispatch.claim_holder == holder
        ):
            held.append((claim, cursor))
    return held, superseded


def redrive(
    session: SessionState,
    *,
    consumer: str,
    index: int,
    action: RedriveAction,
    wake: Sequence[Consumer],
    now: datetime,
) -> bool:
    """Retries or skips a dead-lettered head; False when no such head is live."""
    cursor = next(
        (
            cursor
            for cursor in session.cursors.values()
            if cursor.consumer == consumer
            and cursor.head == index
            and cursor.dispatch.failed_at is not None
        ),
        None,
    )
    if cursor is None:
        return False
    refresh_types(session, wake)
    if action == "skip":
        advance(session, cursor, Done(None, ()), now)
    else:
        cursor.dispatch = replace(cursor.dispatch, failed_at=None, failure_count=0)
        session.set_ready(cursor, now)
    session.new_work = True
    return True


def dead_heads(session: SessionState | None) -> list[Head]:
    if session is None:
        return []
    heads = [
        session.head_of(cursor)
        for cursor in session.cursors.values()
        if cursor.head is not None and cursor.dispatch.failed_at is not None
    ]
    return sorted(heads, key=head_order)
