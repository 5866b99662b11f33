"""Claims in memory: claim a session's heads, claim across sessions, renew, release."""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from ..contract.args import ClaimAnyArgs, ClaimArgs, HeldClaimsArgs
from ..contract.rules import claim_order, claim_standing, holds
from ..models import (
    AttemptRef,
    Busy,
    Claimed,
    ClaimRef,
    ClaimResult,
    Consumer,
    Head,
    ReleaseResult,
    RenewResult,
    Settled,
)
from . import attempts as history
from .cursors import dead_letter, refresh_types
from .ready import ReadyQueue
from .state import CursorState, SessionState, cursor_key


def claim_available(
    session: SessionState | None,
    args: ClaimArgs,
    wake: Sequence[Consumer],
    *,
    now: datetime,
    paused: Container[str] = (),
) -> ClaimResult:
    """Claims every eligible head of the session, by index then consumer. ``exclude`` names
    exact heads: a lane whose head has moved past an excluded index is eligible again.
    The heads of ``paused`` consumers are passed over whole: neither claimed nor counted
    for ``Busy``, so a session holding nothing else is ``Settled``."""
    if session is None:
        return Settled()
    refresh_types(session, wake)
    served, through = args.served, args.through
    excluded = set(args.exclude)
    eligible: list[tuple[ClaimRef, CursorState]] = []
    retry_at: datetime | None = None
    for cursor in session.cursors.values():
        if cursor.head is None or cursor.dispatch.failed_at is not None:
            continue
        ref = ClaimRef(cursor.consumer, cursor.lane, cursor.head)
        if (
            (through is not None and ref.index > through)
            or (served is not None and ref.consumer not in served)
            or ref in excluded
            or ref.consumer in paused
        ):
            continue
        expiry = cursor.dispatch.claim_expires_at
        if expiry is not None and expiry > now:
            retry_at = expiry if retry_at is None else min(retry_at, expiry)
            continue
        eligible.append((ref, cursor))
    if not eligible:
        return Settled() if retry_at is None else Busy(retry_at)
    eligible.sort(key=lambda pair: claim_order(pair[0]))
    heads = [
        claim_head(session, cursor, args.holder, args.ttl, args.max_failures, now)
        for _, cursor in eligible
    ]
    return Claimed(heads, session.head)


def claim_any(
    ready: ReadyQueue, args: ClaimAnyArgs, *, now: datetime, paused: Container[str] = ()
) -> list[Head]:
    """Claims the ``limit`` oldest-ready eligible heads of all sessions: by ready time,
    then session id, index, consumer (and lane). Heads of ``paused`` consumers stay
    queued, unclaimed.

    Unlike ``claim_available`` it refreshes no log types (as on PostgreSQL): a new
    registration reaches a cursor at its session's next write naming no consumers.
    """
    served = args.served

    def wanted(cursor: CursorState) -> bool:
        return (served is None or cursor.consumer in served) and cursor.consumer not in paused

    taken = ready.take(now, wanted, args.limit)
    return [
        claim_head(session, cursor, args.holder, args.ttl, args.max_failures, now)
        for session, cursor in taken
    ]


def ready_sessions(
    sessions: Iterable[SessionState], consumers: Container[str], *, now: datetime
) -> list[str]:
    """The sessions where one of ``consumers`` has a head claimable at ``now`` (what a
    resume announces to wakeups), by id."""
    return sorted(
        session.session_id
        for session in sessions
        if any(
            cursor.consumer in consumers
            and cursor.head is not None
            and cursor.ready_at is not None
            and cursor.ready_at <= now
            for cursor in session.cursors.values()
        )
    )


def claim_head(
    session: SessionState,
    cursor: CursorState,
    holder: str,
    ttl: float,
    max_failures: int | None,
    now: datetime,
) -> Head:
    """Claims one eligible head. A lapsed claim (holder still set: the worker died) counts a
    failure first; reaching ``max_failures`` dead-letters the head instead."""
    dispatch = cursor.dispatch
    if dispatch.claim_holder is not None:
        exhausted = max_failures is not None and dispatch.failure_count + 1 >= max_failures
        history.record(session, cursor, "dead_lettered" if exhausted else "lapsed", now)
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
        last_ready_at=cursor.ready_at,
        claim_holder=holder,
        claim_expires_at=expires_at,
    )
    session.set_ready(cursor, expires_at)
    return session.head_of(cursor)


def renew(session: SessionState | None, args: HeldClaimsArgs, *, now: datetime) -> RenewResult:
    """Extends the live leases ``holder`` holds; a lapsed lease is not renewed."""
    if session is None:
        return RenewResult([], [])
    held, superseded = _judge(session, args.claims, args.holder)
    renewed: list[ClaimRef] = []
    expires_at = now + timedelta(seconds=args.ttl)
    for claim, cursor in held:
        expiry = cursor.dispatch.claim_expires_at
        if expiry is not None and expiry > now:
            cursor.dispatch = replace(cursor.dispatch, claim_expires_at=expires_at)
            session.set_ready(cursor, expires_at)
            renewed.append(claim.ref)
    return RenewResult(renewed, superseded)


def release(session: SessionState | None, args: HeldClaimsArgs, *, now: datetime) -> ReleaseResult:
    """Hands ``holder``'s claims back, lapsed or not: claimable at once, no failure counted.
    The attempt count stays, so the next claim fences the released attempt out."""
    if session is None:
        return ReleaseResult([], [])
    held, superseded = _judge(session, args.claims, args.holder)
    released: list[ClaimRef] = []
    for claim, cursor in held:
        history.record(session, cursor, "released", now)
        cursor.dispatch = replace(cursor.dispatch, claim_holder=None, claim_expires_at=None)
        session.set_ready(cursor, now)
        session.new_work = True
        released.append(claim.ref)
    return ReleaseResult(released, superseded)


def _judge(
    session: SessionState, claims: Sequence[AttemptRef], holder: str
) -> tuple[list[tuple[AttemptRef, CursorState]], list[ClaimRef]]:
    """The claims ``holder`` still holds (lease lapsed or not), with their cursors, and the
    superseded ones, by index then consumer; the rest are neither."""
    held: list[tuple[AttemptRef, CursorState]] = []
    superseded: list[ClaimRef] = []
    for claim in sorted(claims, key=claim_order):
        cursor = session.cursor_of(claim)
        view = None if cursor is None else cursor.view()
        finished = cursor_key(claim.consumer, claim.lane, claim.index) in session.finished
        standing = claim_standing(claim, view, session.clear_index, finished=finished)
        if standing == "superseded":
            superseded.append(claim.ref)
        elif standing == "current" and cursor is not None and holds(cursor.view(), claim, holder):
            held.append((claim, cursor))
    return held, superseded
