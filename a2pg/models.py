"""The contract's value types: what callers pass in and what every backend hands back.

All are frozen dataclasses so results can be compared, hashed where their fields
allow, and shared between tasks without defensive copies. Times are aware UTC
``datetime``; durations (``ttl``, ``retry_after``) are seconds as ``float``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Literal, TypeAlias, final

JSON: TypeAlias = Any
"""Any JSON value: ``None``, ``bool``, ``int``, ``float``, ``str``, lists and str-keyed dicts."""

CLEAR_EVENT_TYPE = "a2.cleared"
"""The type of the marker event ``clear`` appends."""

CursorKind = Literal["event", "lane", "log"]
FailOutcome = Literal["failed", "dead_lettered", "superseded"]
RedriveAction = Literal["retry", "skip"]
CancelAction = Literal["skip", "dead_letter"]
"""What ``cancel_head`` does with a live head: skip it as if completed with no events,
or dead-letter it now."""
CursorState = Literal["idle", "BLOCKED", "dead-letter", "held", "backoff", "ready"]
"""What a cursor is doing, as listings say it (``Cursor.state``); blocked lanes shout."""


@final
class AnyLane:
    """The type of ``ANY_LANE``, the default ``lane`` of ``redrive``: whichever of the
    consumer's cursors is dead at that index (the one ``dead_letters`` lists first),
    where ``None`` names the event cursor and a string that lane. Compare with
    ``isinstance(lane, AnyLane)``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ANY_LANE"

    def __reduce__(self) -> str:
        """Pickled and copied as the module constant, so it stays the one instance."""
        return "ANY_LANE"


ANY_LANE: Final = AnyLane()
"""``redrive(..., lane=ANY_LANE)`` (the default): no particular cursor; see ``AnyLane``."""


@dataclass(frozen=True, slots=True)
class Target:
    """A consumer an event is addressed to: alone (``lane=None``) or queued on a lane FIFO.

    ``not_before`` delays the work: the head is not claimable before that time (an aware
    ``datetime``, or a ``timedelta`` from the append by the store's clock). On a lane the
    event holds the lane when it reaches the head (FIFO: later events wait behind it).
    """

    consumer: str
    lane: str | None = None
    not_before: datetime | timedelta | None = None


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """Names one cursor's head: the cursor ``(consumer, lane)`` at ``index``."""

    consumer: str
    lane: str | None
    index: int


@dataclass(frozen=True, slots=True)
class AttemptRef:
    """Names one attempt of a head; the attempt number is the fencing token."""

    consumer: str
    lane: str | None
    index: int
    attempt: int

    @property
    def ref(self) -> ClaimRef:
        return ClaimRef(self.consumer, self.lane, self.index)


Cause = AttemptRef
"""The consumer attempt whose completion appended an event."""


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append. A missing ``id`` is generated (time-ordered)."""

    type: str
    payload: JSON = None
    id: str | None = None
    cause: Cause | None = None
    targets: Sequence[Target] = ()


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as stored: its place in the session log and when the batch committed."""

    id: str
    type: str
    payload: JSON
    index: int
    session_id: str
    created_at: datetime
    cause: Cause | None = None
    trace_parent: str | None = None
    """The W3C trace context of the append that stored it (``traceparent``, then a space
    and ``tracestate`` when there is one), or None: appended with no span current."""


@dataclass(frozen=True, slots=True)
class LogSpec:
    """How a log consumer follows a session: which lane, which types, from where."""

    lane: str = "log"
    types: tuple[str, ...] | None = None
    backfill: bool = False

    def takes(self, event_type: str) -> bool:
        """Whether the log cursor stops at events of this type (never the clear marker)."""
        return event_type != CLEAR_EVENT_TYPE and (self.types is None or event_type in self.types)


@dataclass(frozen=True, slots=True)
class Consumer:
    """A named consumer: targeted (``log=None``) or a log consumer."""

    name: str
    log: LogSpec | None = None


@dataclass(frozen=True, slots=True)
class Dispatch:
    """The bookkeeping of one head's attempts; reset whenever the head moves."""

    attempt_count: int = 0
    first_claimed_at: datetime | None = None
    last_claimed_at: datetime | None = None
    last_ready_at: datetime | None = None
    """When the head became claimable for its latest attempt (appended, due, backed off,
    released or its lease lapsed): that attempt's wait is ``last_claimed_at`` minus it."""
    claim_holder: str | None = None
    claim_expires_at: datetime | None = None
    failure_count: int = 0
    last_failed_at: datetime | None = None
    last_failed_attempt: int | None = None
    last_error: str | None = None
    failed_at: datetime | None = None

    def error_line(self, width: int = 80) -> str:
        """The line of ``last_error`` that says what went wrong: a traceback's last line."""
        lines = [line.strip() for line in (self.last_error or "").splitlines() if line.strip()]
        return lines[-1][:width] if lines else ""


@dataclass(frozen=True, slots=True)
class Cursor:
    """One unit of consumer work: where it is (``position``) and what it does now (``head``)."""

    consumer: str
    lane: str | None
    kind: CursorKind
    position: int
    head: int | None
    dispatch: Dispatch = field(default_factory=Dispatch)

    @property
    def dead_lettered(self) -> bool:
        return self.dispatch.failed_at is not None

    @property
    def blocked(self) -> bool:
        """A dead-lettered lane or log head holds back every later event of its cursor."""
        return self.dead_lettered and self.kind != "event"

    def state(self, now: datetime) -> CursorState:
        """One word for what it does at ``now``: the CLI and the dashboard both show it."""
        d = self.dispatch
        if self.head is None:
            return "idle"
        if self.blocked:
            return "BLOCKED"
        if self.dead_lettered:
            return "dead-letter"
        if d.claim_expires_at is not None and d.claim_expires_at > now:
            return "held" if d.claim_holder is not None else "backoff"
        return "ready"


@dataclass(frozen=True, slots=True)
class Head:
    """What a claim hands a worker: the event at a cursor's head and its dispatch state."""

    event: StoredEvent
    consumer: str
    lane: str | None
    dispatch: Dispatch
    clear_index: int | None = None

    @property
    def session_id(self) -> str:
        return self.event.session_id

    @property
    def index(self) -> int:
        return self.event.index

    @property
    def attempt(self) -> int:
        """The attempt this claim is; pass it back to complete, fail or renew."""
        return self.dispatch.attempt_count

    @property
    def failure_count(self) -> int:
        return self.dispatch.failure_count

    @property
    def ref(self) -> ClaimRef:
        return ClaimRef(self.consumer, self.lane, self.event.index)

    @property
    def attempt_ref(self) -> AttemptRef:
        return AttemptRef(self.consumer, self.lane, self.event.index, self.dispatch.attempt_count)

    @property
    def dead_lettered(self) -> bool:
        return self.dispatch.failed_at is not None


@dataclass(frozen=True, slots=True)
class AppendResult:
    events: list[StoredEvent]
    has_pending: bool


@dataclass(frozen=True, slots=True)
class WakeLogResult:
    cursor: Cursor
    head: int


@dataclass(frozen=True, slots=True)
class Claimed:
    """Heads claimed (or dead-lettered by this claim), and the session head."""

    heads: list[Head]
    head: int


@dataclass(frozen=True, slots=True)
class Busy:
    """Nothing claimable now; the earliest held or backing-off head frees at ``retry_at``."""

    retry_at: datetime


@dataclass(frozen=True, slots=True)
class Settled:
    """Nothing left to do for the served consumers."""


ClaimResult: TypeAlias = Claimed | Busy | Settled


@dataclass(frozen=True, slots=True)
class RenewResult:
    renewed: list[ClaimRef]
    superseded: list[ClaimRef]


@dataclass(frozen=True, slots=True)
class ReleaseResult:
    """Claims handed back without a failure, and those no longer current."""

    released: list[ClaimRef]
    superseded: list[ClaimRef]


@dataclass(frozen=True, slots=True)
class Completed:
    events: list[StoredEvent]


@dataclass(frozen=True, slots=True)
class Superseded:
    """The attempt is no longer current: its result must be discarded."""


CompleteResult: TypeAlias = Completed | Superseded


@dataclass(frozen=True, slots=True)
class CompletedAndClaimed:
    """What ``complete_and_claim`` did: each completion's outcome, in order, then the heads
    its claim took (as ``claim_any`` lists them)."""

    completed: list[CompleteResult]
    heads: list[Head]


@dataclass(frozen=True, slots=True)
class Completion:
    """One completion of a ``complete_attempts`` batch."""

    session_id: str
    consumer: str
    lane: str | None
    index: int
    attempt: int
    events: Sequence[NewEvent] = ()
    consumers: Sequence[Consumer] | None = None
    trace_parent: str | None = None
    """The W3C trace context stored with the returned events (as an append's): the
    worker gives its attempt span's, so the next consumer's trace follows from it."""


@dataclass(frozen=True, slots=True)
class FailResult:
    outcome: FailOutcome
    failure_count: int


@dataclass(frozen=True, slots=True)
class RedriveResult:
    redriven: bool
    has_pending: bool


@dataclass(frozen=True, slots=True)
class CancelResult:
    """What ``cancel_head`` did. ``held_until``: the head was under a live lease, so its
    attempt may still be running: that attempt is fenced out at once (its completion,
    failure and renewals are superseded), and a lane or log cursor's next head is held
    back until the lease would have lapsed, so two heads of a cursor never run at once."""

    cancelled: bool
    held_until: datetime | None
    has_pending: bool


@dataclass(frozen=True, slots=True)
class SnapshotWrite:
    """A reducer fold through ``index``; ``pins`` keep it while those heads are unfinished."""

    index: int
    state: JSON
    pins: Sequence[ClaimRef] = ()


@dataclass(frozen=True, slots=True)
class StateRead:
    """The newest usable snapshot (``snapshot_index`` 0 and ``state`` None when none) and the
    events after it through the requested index."""

    snapshot_index: int
    state: JSON
    events: list[StoredEvent]
    head: int
    clear_index: int


@dataclass(frozen=True, slots=True)
class ClearResult:
    cleared: bool
    index: int
    clear_index: int


@dataclass(frozen=True, slots=True)
class ReclaimResult:
    deleted: int
    done: bool


@dataclass(frozen=True, slots=True)
class PresenceRow:
    participant: str
    field: str
    value: JSON
    seen: JSON
    at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A session as listings show it."""

    session_id: str
    head: int
    clear_index: int
    pending: int
    """Heads above the clear index that are not dead-lettered (ready, leased, backing off
    or scheduled): one per cursor with work, not events (a lane's queued events behind its
    head are not counted). A session whose only work is blocked has ``pending`` 0."""
    dead_letters: int
    blocked: int = 0
    """Lane and log events held back behind a dead-lettered head (not counted in ``pending``)."""
    last_event_at: datetime | None = None
    """When the session's newest event was appended (``None`` for none): for retention."""


@dataclass(frozen=True, slots=True)
class BackfillProgress:
    """How far a log consumer's backfill has brought existing sessions' cursors into being.

    A registration with ``backfill`` (new, or with other types or lane) starts one; it
    goes through the sessions in id order (``C``), a batch per ``Store.backfill`` call,
    and is recorded in the registry, so a killed worker's successor resumes after
    ``after``.
    """

    started_at: datetime
    sessions: int
    """Sessions done so far."""
    after: str | None
    """The last session id done (None before the first batch)."""
    done_at: datetime | None
    """When the last batch found no more sessions (None while it runs)."""

    @property
    def running(self) -> bool:
        return self.done_at is None


@dataclass(frozen=True, slots=True)
class ConsumerStats:
    """One consumer's work across every session, as monitoring and the dashboard show it.

    Counted over heads above their session's clear index. ``oldest_ready_age`` is the
    lag: seconds (by the store's clock) since the longest-waiting ready head became
    claimable, ``None`` when nothing is ready.
    """

    consumer: str
    ready: int
    """Heads claimable now (never failed or retry due, no live lease)."""
    claimed: int
    """Heads under a live lease."""
    backing_off: int
    """Failed heads waiting for their retry time."""
    dead_letters: int
    """Dead-lettered heads, event cursors and lanes alike."""
    blocked_lanes: int
    """Lane and log cursors stopped at a dead-lettered head."""
    blocked: int
    """Events queued behind those heads."""
    oldest_ready_age: float | None
    registered: bool
    """Whether the consumer registry holds it (``register_consumers``)."""
    scheduled: int = 0
    """Heads held back by a target's ``not_before``, never failed (counted apart from
    ``backing_off``)."""
    paused: bool = False
    """Whether an operator paused it (``pause_consumers``): claims skip its heads."""
    backfill: BackfillProgress | None = None
    """Its registry backfill, for a registered log consumer with ``backfill`` (else None)."""
    oldest_blocked_age: float | None = None
    """The lag of blocked work: seconds (by the store's clock) since the head of the
    longest-blocked lane or log cursor was dead-lettered; ``None`` when none is blocked.
    ``oldest_ready_age`` never sees that work (a dead head is not ready)."""
    served_by: int = 0
    """Live workers (``WorkerInfo.stale`` false) whose last heartbeat names it."""


AttemptOutcome = Literal["completed", "failed", "dead_lettered", "released", "lapsed", "cancelled"]
"""How an attempt ended: completed; failed (to be retried) or dead-lettered by
``fail_attempt``; released (handed back: shutdown); lapsed (its lease ran out, found by
the next claim; ``dead_lettered`` when that claim dead-lettered the head); cancelled
(``cancel_head`` while it ran)."""


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One finished attempt of a head, from the attempt history (``Store.attempts``)."""

    consumer: str
    lane: str | None
    index: int
    attempt: int
    holder: str | None
    started_at: datetime | None
    """When it was claimed (the cursor's ``last_claimed_at`` then)."""
    ended_at: datetime
    outcome: AttemptOutcome
    error: str | None = None
    ready_at: datetime | None = None
    """When the head became claimable for this attempt (``Dispatch.last_ready_at``)."""

    @property
    def duration(self) -> float | None:
        """Seconds from its claim to its end."""
        if self.started_at is None:
            return None
        return (self.ended_at - self.started_at).total_seconds()

    @property
    def wait(self) -> float | None:
        """Seconds it waited to be claimed, from when its head became claimable."""
        if self.started_at is None or self.ready_at is None:
            return None
        return max(0.0, (self.started_at - self.ready_at).total_seconds())


@dataclass(frozen=True, slots=True)
class WorkerBeat:
    """What a live worker reports about itself each heartbeat (``Store.heartbeat``)."""

    holder: str
    host: str
    pid: int
    consumers: tuple[str, ...]
    concurrency: int
    started_at: datetime
    """When the worker started, by its own clock. A store keeps instead its own clock's time
    of the first beat of ``holder`` (of this host and pid), so every time of a worker row
    comes from one clock: ``WorkerInfo.beat.started_at`` is that time."""
    in_flight: int
    version: str
    interval: float
    """Seconds between its heartbeats: a row unseen for three intervals is stale."""
    completed: int = 0
    """Attempts it completed since it started (throughput is the change over time)."""
    failed: int = 0
    """Attempts that failed since it started, retried or dead-lettered."""


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A worker's last heartbeat and how long ago (by the store's clock) it was seen."""

    beat: WorkerBeat
    last_seen: datetime
    seen_ago: float

    @property
    def stale(self) -> bool:
        """Missed three heartbeats: killed, hung or cut off from the database."""
        return self.seen_ago > 3 * self.beat.interval


AuditAction = Literal[
    "redrive.retry",
    "redrive.skip",
    "cancel.skip",
    "cancel.dead_letter",
    "pause",
    "resume",
    "clear",
    "reclaim",
    "register",
    "unregister",
    "backfill",
    "forget_workers",
]
"""What an operator did, one per write the dashboard or the CLI offers: ``redrive`` (one
head or a bulk selection), ``cancel_head``, ``pause_consumers``/``resume_consumers``,
``clear``, ``reclaim``, ``register_consumers``/``unregister_consumers``, a registry
``backfill`` run by hand, ``forget_workers`` (``a2pg workers --forget-stale``)."""

AUDIT_ACTIONS: tuple[AuditAction, ...] = (
    "redrive.retry",
    "redrive.skip",
    "cancel.skip",
    "cancel.dead_letter",
    "pause",
    "resume",
    "clear",
    "reclaim",
    "register",
    "unregister",
    "backfill",
    "forget_workers",
)
"""Every ``AuditAction``, in that order (what ``record_audit`` accepts)."""


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One operator action in the audit log (``Store.record_audit``, ``Store.audit_log``).

    The caller says who (``actor``: the dashboard's authenticated login, ``cli:user@host``
    for the command line), what (``action``, and the head or consumer it touched, when
    it touched one) and how it went (``detail``: a small JSON object of counts, filters
    and outcome). The store sets ``id`` (a time-ordered id from its id generator) and
    ``at`` (its clock's time): leave both None when recording.
    """

    actor: str
    action: AuditAction
    session_id: str | None = None
    consumer: str | None = None
    lane: str | None = None
    index: int | None = None
    detail: dict[str, JSON] = field(default_factory=dict)
    id: str | None = None
    at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ActivityPoint:
    """One consumer's finished attempts in one time bucket (``Store.activity``), from the
    attempt history: what the dashboard's charts draw, kept by the database."""

    consumer: str
    at: datetime
    """The bucket's start (a multiple of the bucket size since the epoch, UTC)."""
    completed: int
    failed: int
    """Failed and to be retried."""
    dead_lettered: int
    other: int
    """Released, lapsed or cancelled."""
    mean_duration: float | None
    """Mean seconds from claim to end, of the attempts with a claim time."""
    max_duration: float | None
    mean_wait: float | None
    """Mean seconds these attempts waited to be claimed once claimable
    (``AttemptRecord.wait``): the consumer's latency."""
    max_wait: float | None
    """The longest of those waits: how far behind the consumer ran (its lag in time)."""


@dataclass(frozen=True, slots=True)
class DeadLetterQuery:
    """A filter over every session's dead letters (``Store.find_dead_letters``).

    ``error`` matches as a substring of the last error, ignoring the case of ASCII letters
    (as PostgreSQL's ``lower`` under ``collate "C"``, so every backend agrees); the
    filters are ANDed, ``None`` filters nothing. Pages are in
    ``(session_id, consumer, lane, index)`` order (code points); ``after`` is the last
    head's ``DeadLetterKey.of(head)`` of the previous page. ``limit`` is at most
    ``Limits.max_page_size``.
    """

    consumer: str | None = None
    error: str | None = None
    session_prefix: str | None = None
    after: DeadLetterKey | None = None
    limit: int = 100


@dataclass(frozen=True, slots=True, order=True)
class DeadLetterKey:
    """Where a page of ``find_dead_letters`` ends: the last head's cursor and index.
    ``lane`` is ``""`` for an event cursor (event cursors sort before lanes)."""

    session_id: str
    consumer: str
    lane: str
    index: int

    @classmethod
    def of(cls, head: Head) -> DeadLetterKey:
        """The key of a head ``find_dead_letters`` returned: pass the last one as ``after``."""
        return cls(head.session_id, head.consumer, head.lane or "", head.index)


WorkState = Literal["ready", "held", "backing_off", "scheduled"]
"""Where a live head stands now (``Store.find_heads``): ready (claimable: its ``ready_at``
has passed, a lapsed lease's and a paused consumer's included), held (under a running
lease), backing off (failed, waiting for its retry) or scheduled (waiting for its
target's ``not_before``, or for a cancelled lease's end, never having failed)."""

WORK_STATES: tuple[WorkState, ...] = ("ready", "held", "backing_off", "scheduled")
"""Every ``WorkState``, in that order (what ``find_heads`` accepts)."""


@dataclass(frozen=True, slots=True, order=True)
class HeadKey:
    """Where a page of ``find_heads`` ends: the last head's ``since`` and its place in claim
    order (``claim_any``'s: time, session, index, consumer, lane; ``lane`` is ``""`` for an
    event cursor)."""

    ready_at: datetime
    session_id: str
    index: int
    consumer: str
    lane: str

    @classmethod
    def of(cls, found: FoundHead) -> HeadKey:
        """The key of a head ``find_heads`` returned: pass the last one as ``after``."""
        head = found.head
        return cls(found.since, head.session_id, head.index, head.consumer, head.lane or "")


@dataclass(frozen=True, slots=True)
class HeadQuery:
    """A filter over every session's live heads in one state (``Store.find_heads``).

    ``event_type`` is the head event's exact type; ``error`` matches as
    ``DeadLetterQuery.error`` does (a substring of the last error, ASCII case ignored);
    the filters are ANDed, ``None`` filters nothing. Pages are in claim order, oldest
    ``since`` first; ``after`` is ``HeadKey.of(last)`` of the previous page. ``limit`` is
    at most ``Limits.max_page_size``.
    """

    state: WorkState = "ready"
    consumer: str | None = None
    event_type: str | None = None
    error: str | None = None
    session_prefix: str | None = None
    after: HeadKey | None = None
    limit: int = 100


@dataclass(frozen=True, slots=True)
class FoundHead:
    """A live head ``find_heads`` listed, and since when it is (or until when it is not)
    claimable: its ``ready_at``. Ready: when it became claimable (its wait is now minus
    ``since``); held: its lease's end; backing off: its retry time; scheduled: its due time."""

    head: Head
    since: datetime

    @property
    def key(self) -> HeadKey:
        return HeadKey.of(self)
