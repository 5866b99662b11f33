"""The contract's judgements that need no I/O, written once and applied by every backend.

A backend reads what it holds (cursors as ``Cursor`` values, the session's head and
clear index, stored events) and asks these functions what the contract says; it
then writes (or not) in its own way. Each raises the contract's ``A2Error`` where the
contract says the call fails.
"""

from __future__ import annotations

import json
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from ..errors import A2Error, invalid
from ..models import (
    JSON,
    AttemptRef,
    ClaimRef,
    ClearResult,
    Consumer,
    Cursor,
    FailOutcome,
    FailResult,
    LogSpec,
    StoredEvent,
)
from .values import CheckedEvent, log_consumer_names

# -- the log --------------------------------------------------------------------------


def same_json(a: JSON, b: JSON) -> bool:
    """Whether two JSON values mean the same: key order ignored, ``True`` is not ``1``,
    and ``1 == 1.0`` as in JSON numbers; used by idempotent replays."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


def replay(requested: Sequence[CheckedEvent], stored: Sequence[StoredEvent]) -> list[StoredEvent]:
    """The stored events of an idempotent replay, in request order; a differing type or
    payload under the same id is an ``IDEMPOTENCY_CONFLICT``."""
    by_id = {event.id: event for event in stored}
    replayed = []
    for checked in requested:
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


def refuse_repeated_ids(ids: Sequence[str], what: str) -> None:
    """The same id twice in one batch is ``PARTIAL_DUPLICATE_BATCH``."""
    if len(set(ids)) != len(ids):
        raise A2Error(
            "PARTIAL_DUPLICATE_BATCH", f"{what} contains the same event id more than once"
        )


def is_replay(stored: int, requested: int) -> bool:
    """Whether an append replays: every event of a non-empty batch is stored already (live).

    A batch mixing stored and fresh ids is ``PARTIAL_DUPLICATE_BATCH``.
    """
    if stored and stored != requested:
        raise A2Error(
            "PARTIAL_DUPLICATE_BATCH",
            f"batch mixes {stored} already-appended and {requested - stored} fresh events",
        )
    return stored > 0


def refuse_log_targets(events: Sequence[CheckedEvent], wake: Sequence[Consumer]) -> None:
    """A consumer is either targeted or a log consumer: a target naming one of the log
    consumers this write wakes is ``INVALID_ARGUMENT``."""
    names = log_consumer_names(wake)
    if not names:
        return
    for checked in events:
        for target in checked.event.targets:
            if target.consumer in names:
                raise invalid(
                    f"event targets log consumer '{target.consumer}': a consumer is either "
                    "targeted or a log consumer, never both"
                )


def refuse_cleared_origin(origin_index: int | None, clear_index: int, session_id: str) -> None:
    """Scheduled work born from an event at or below the clear marker is ``SESSION_CLEARED``."""
    if origin_index is not None and origin_index <= clear_index:
        raise cleared_origin(origin_index, session_id)


def cleared_origin(origin_index: int, session_id: str) -> A2Error:
    """The error of ``refuse_cleared_origin``, for a backend that compared in SQL."""
    return A2Error(
        "SESSION_CLEARED",
        f"scheduled work from event {origin_index} was cleared in session '{session_id}'",
    )


def refuse_non_log_cursor(kind: str, consumer: str, lane: str) -> None:
    """Waking a log consumer (``wake_log``, or a write's wake) on a lane where it has a
    targeted lane cursor is ``INVALID_ARGUMENT``; the seeds made the lane cursor's head a
    log cursor's."""
    if kind != "log":
        raise invalid(
            f"consumer '{consumer}' has a {kind} cursor on lane '{lane}': a consumer is "
            "either targeted or a log consumer, never both"
        )


def woken_logs(types: Iterable[str], wake: Sequence[Consumer]) -> list[tuple[str, LogSpec]]:
    """The log consumers of ``wake`` that a batch of events of ``types`` wakes (those taking
    one of them), as (name, spec): whose cursors a backend checks with
    ``refuse_non_log_cursor`` before it writes the batch."""
    kinds = set(types)
    return [
        (consumer.name, consumer.log)
        for consumer in wake
        if consumer.log is not None and any(consumer.log.takes(t) for t in kinds)
    ]


def refuse_snapshots_past_head(indexes: Sequence[int], head: int, session_id: str) -> None:
    """A snapshot of an index past the session head folds events that do not exist."""
    for index in indexes:
        if index > head:
            raise invalid(f"snapshot index {index} is past head {head} of session '{session_id}'")


# -- attempts -------------------------------------------------------------------------


def fence(cause: AttemptRef, cursor: Cursor | None, clear_index: int, session_id: str) -> None:
    """The attempt fence of consumer appends and clears: ``cause`` must name the current
    attempt of a live head (``cursor`` is its cursor, if any), else ``SUPERSEDED_ATTEMPT``."""
    if (
        cause.index <= clear_index
        or cursor is None
        or cursor.head != cause.index
        or cursor.dispatch.attempt_count != cause.attempt
        or cursor.dispatch.failed_at is not None
    ):
        raise A2Error(
            "SUPERSEDED_ATTEMPT",
            f"attempt {cause.attempt} of {cause.consumer} at index {cause.index} "
            f"is no longer current in session '{session_id}'",
        )


def attempt_is_live(index: int, *, head: int, clear_index: int, session_id: str) -> bool:
    """Whether an attempt at ``index`` is judged at all: False at or below the clear marker
    (the attempt is superseded); an index past the head (no event) is ``INVALID_ARGUMENT``."""
    if index <= clear_index:
        return False
    if index > head:
        raise invalid(f"no event at index {index} in session '{session_id}'")
    return True


Standing = Literal["current", "superseded", "unreached"]


def claim_standing(
    claim: AttemptRef, cursor: Cursor | None, clear_index: int, *, finished: bool = False
) -> Standing:
    """Where a claim named to ``renew_claims`` or ``release_claims`` stands.

    ``superseded``: its head moved on, was cleared, or was re-attempted; ``unreached``:
    its cursor has not reached it (nothing to say); ``current``: the head is still at
    this index and this or an earlier attempt (the caller checks the holder and the
    exact attempt). ``finished`` says an event cursor that no longer exists finished.
    """
    if claim.index <= clear_index:
        return "superseded"
    if cursor is None:
        return "superseded" if finished else "unreached"
    if cursor.head != claim.index and cursor.position < claim.index:
        return "unreached"
    if cursor.head != claim.index or cursor.dispatch.attempt_count > claim.attempt:
        return "superseded"
    return "current"


def holds(cursor: Cursor, claim: AttemptRef, holder: str) -> bool:
    """Whether ``holder`` still holds this attempt (its lease may have lapsed)."""
    d = cursor.dispatch
    return (
        cursor.head == claim.index
        and d.attempt_count == claim.attempt
        and d.failed_at is None
        and d.claim_holder == holder
    )


def claim_order(ref: ClaimRef | AttemptRef) -> tuple[int, str, str]:
    """Claims and heads come back by index, then consumer (then lane, for a stable order)."""
    return (ref.index, ref.consumer, ref.lane or "")


def judge_failure(
    cursor: Cursor | None, attempt: AttemptRef, max_failures: int
) -> tuple[FailResult, bool]:
    """The answer to a failure report, and whether to record it (count it, keep the error,
    release the claim, dead-letter at ``max_failures``).

    Repeating a recorded failure answers as the first call did and records nothing. The
    current attempt of a dead-lettered head (the claim that dead-lettered it took that
    attempt) is ``dead_lettered``, as in seed 000; a released or moved-on attempt is
    superseded.
    """
    if cursor is None or cursor.head != attempt.index:
        return FailResult("superseded", 0), False
    d = cursor.dispatch
    count = d.failure_count
    if d.attempt_count != attempt.attempt:
        return FailResult("superseded", count), False
    if d.claim_holder is None and d.last_failed_attempt == attempt.attempt:
        outcome: FailOutcome = "failed" if d.failed_at is None else "dead_lettered"
        return FailResult(outcome, count), False
    if d.failed_at is not None:
        return FailResult("dead_lettered", count), False
    if d.claim_holder is None:
        return FailResult("superseded", count), False
    failures = count + 1
    return FailResult("dead_lettered" if failures >= max_failures else "failed", failures), True


@dataclass(frozen=True, slots=True)
class CompletedAttempt:
    """How a head was finished: the attempt that completed it (``None`` when skipped) and
    the ids of the events it returned, in order: what a retried completion must match."""

    attempt: int | None
    ids: tuple[str, ...]


Verdict = Literal["fresh", "replay", "superseded", "unknown"]


def judge_completion(
    cursor: Cursor | None,
    cause: AttemptRef,
    recorded: CompletedAttempt | None,
    *,
    known: bool,
    ids: Sequence[str],
) -> Verdict:
    """How a completion at a live index is judged, in seed 000's order.

    ``known`` says the cursor it names exists (an event cursor's, also once finished):
    without one it is ``unknown``, superseded before anything else is looked at. Then the
    same returned id twice is ``PARTIAL_DUPLICATE_BATCH``. Then ``fresh``: the current
    attempt of a live, held head completes now; ``replay``: this attempt already
    completed the head (``recorded``), the call is a retry; else ``superseded`` (stale,
    lapsed and re-claimed, released, dead-lettered). On every verdict but ``unknown``
    the caller records the log types the completion declares (the seeds'
    ``refreshLogTypes``), unless the call raises.
    """
    if not known:
        return "unknown"
    refuse_repeated_ids(ids, "returned event batch")
    if cursor is None or cursor.head != cause.index:
        if recorded is None or recorded.attempt != cause.attempt:
            return "superseded"
        return "replay"
    d = cursor.dispatch
    if d.attempt_count != cause.attempt or d.failed_at is not None or d.claim_holder is None:
        return "superseded"
    return "fresh"


def mismatched_retry() -> A2Error:
    return A2Error(
        "PARTIAL_DUPLICATE_BATCH", "completed attempt does not match the returned event batch"
    )


def refuse_mismatched_retry(recorded: CompletedAttempt, ids: Sequence[str]) -> None:
    """A retried completion must return the same ids in the same order as the first."""
    if list(recorded.ids) != list(ids):
        raise mismatched_retry()


def refuse_taken_ids(taken: bool) -> None:
    """A completion's fresh ids must be free in the session (live ids, or this batch's)."""
    if taken:
        raise A2Error(
            "PARTIAL_DUPLICATE_BATCH", "returned event batch contains already-appended ids"
        )


# -- clear ----------------------------------------------------------------------------


def clear_decision(if_last_index: int | None, *, head: int, clear_index: int) -> ClearResult | None:
    """The answer of a conditional clear that appends nothing, or ``None`` to clear now.

    Repeating a clear that already happened right after ``if_last_index`` reports
    ``cleared=True`` without a second marker; a head other than ``if_last_index``
    reports ``cleared=False``.
    """
    if if_last_index is None:
        return None
    if clear_index == if_last_index + 1:
        return ClearResult(True, head, clear_index)
    if head != if_last_index:
        return ClearResult(False, head, clear_index)
    return None


# -- monitoring -----------------------------------------------------------------------

_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)

HeadState = Literal["ready", "claimed", "backing_off"]


def head_state(ready_at: datetime, claim_holder: str | None, now: datetime) -> HeadState:
    """Where a live head (not dead-lettered, above the clear index) stands at ``now``: ready
    from its ``ready_at`` on (a lapsed lease included), else leased while a holder is set,
    else backing off until its retry time."""
    if ready_at <= now:
        return "ready"
    return "claimed" if claim_holder is not None else "backing_off"


def error_matches(last_error: str | None, needle: str) -> bool:
    """Whether ``needle`` is in ``last_error``, ignoring the case of ASCII letters only:
    what PostgreSQL's ``lower`` does under ``collate "C"``, whatever the database's locale."""
    if last_error is None:
        return False
    return needle.translate(_ASCII_LOWER) in last_error.translate(_ASCII_LOWER)


def backfill_restarts(old: Consumer | None, new: Consumer) -> bool:
    """Whether registering ``new`` (over ``old``, the registered spec) starts its backfill
    over: a log consumer with ``backfill`` that is new, or whose lane, types or backfill
    flag changed. Registering the same spec again keeps the progress."""
    log = new.log
    return log is not None and log.backfill and (old is None or old.log != log)


CANCELLED_ERROR = "dead-lettered by cancel_head"
"""The ``last_error`` of a head ``cancel_head`` dead-lettered (no failure is counted)."""


def held_until(
    claim_holder: str | None, claim_expires_at: datetime | None, now: datetime
) -> datetime | None:
    """The lease end of a head under a live claim at ``now`` (its attempt may still run),
    else None: what ``cancel_head`` holds a cursor's next head back until."""
    if claim_holder is None or claim_expires_at is None or claim_expires_at <= now:
        return None
    return claim_expires_at


def due_at(not_before: datetime | timedelta | None, now: datetime) -> datetime | None:
    """When a target's head becomes claimable, if later than ``now`` (the store's clock at
    the append): None means at once. A ``timedelta`` counts from the append. A delayed
    head is held back as a failure's backoff is: no holder, ``claim_expires_at`` and
    ``ready_at`` at the due time (so ``claim_available`` answers ``Busy`` until then)."""
    if not_before is None:
        return None
    due = now + not_before if isinstance(not_before, timedelta) else not_before
    return due if due > now else None
