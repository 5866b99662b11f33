"""MemoryStore: the reference model of the store contract (SPEC.md section 2), in memory."""

from __future__ import annotations

import json
from collections.abc import Sequence

from .. import validation as check
from ..errors import A2Error, invalid
from ..models import (
    CLEAR_EVENT_TYPE,
    AppendResult,
    AttemptRef,
    ClaimRef,
    ClaimResult,
    ClearResult,
    CompleteResult,
    Completion,
    Consumer,
    Cursor,
    FailResult,
    Head,
    LogSpec,
    NewEvent,
    ReclaimResult,
    RedriveAction,
    RedriveResult,
    ReleaseResult,
    RenewResult,
    Settled,
    SnapshotWrite,
    StateRead,
    Superseded,
    WakeLogResult,
)
from ..validation import CheckedEvent
from . import attempts
from .core import MemoryCore
from .cursors import has_pending, open_log_cursor, refresh_types, wake_idle
from .log import add_rows, batch_owners, plan_rows, replay
from .state import FRESH, SessionState, cursor_key

RECLAIM_BATCH = 256
"""Events ``reclaim`` deletes per call, so no call holds the store for long."""

_CLEAR_MARKER = CheckedEvent(NewEvent(CLEAR_EVENT_TYPE, None), "null")


class MemoryStore(MemoryCore):
    """Every operation of the contract on plain Python structures.

    Operations are ``async def`` but never await while mutating, so each one is
    atomic under asyncio. Inputs are validated before anything is written; payloads
    are kept as JSON text and every result decodes its own copy. ``close()`` ends
    streams and wakeups; the store's data stays readable and writable afterwards
    (there is nothing to release).
    """

    # -- the log -----------------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        events: Sequence[NewEvent],
        *,
        consumers: Sequence[Consumer] | None = None,
        origin_index: int | None = None,
    ) -> AppendResult:
        """Appends a batch atomically; a batch of only stored ids replays them.

        Generated ids are refused like supplied ones if they collide with a live id.
        """
        check.check_session_id(session_id, self._limits)
        consumers = self._consumers(consumers)
        wake = self._wake_set(consumers)
        checked = self._events(events, wake)
        if origin_index is not None:
            check.check_index(origin_index, "origin_index")
        session = self._sessions.get(session_id)
        existing = batch_owners(session, checked)
        if existing and len(existing) == len(checked):
            return AppendResult(replay(checked, existing), has_pending(session, consumers))
        if existing:
            raise A2Error(
                "PARTIAL_DUPLICATE_BATCH",
                f"batch mixes {len(existing)} already-appended and "
                f"{len(checked) - len(existing)} fresh events",
            )
        if not checked:
            return AppendResult([], has_pending(session, consumers))
        if origin_index is not None and session is not None and origin_index <= session.clear_index:
            raise A2Error(
                "SESSION_CLEARED",
                f"scheduled work from event {origin_index} was cleared in session '{session_id}'",
            )
        for item in checked:
            if item.event.cause is not None:
                attempts.assert_current_cause(session, item.event.cause)
        session = self._writable(session_id)
        now = self._clock()
        rows = plan_rows(session, checked, now=now, new_id=self._new_id)
        self._sessions[session_id] = session
        add_rows(session, rows, checked, wake=wake, now=now)
        self._publish(session)
        return AppendResult([row.stored() for row in rows], has_pending(session, consumers))

    async def wake_log(self, session_id: str, consumer: Consumer) -> WakeLogResult:
        """Brings a log consumer's cursor up to date, creating it as an append would.

        A session with nothing after its clear marker and no cursor gets an idle,
        unstored cursor at the marker.
        """
        check.check_session_id(session_id, self._limits)
        log = self._log_consumer(consumer)
        session = self._sessions.get(session_id)
        key = cursor_key(consumer.name, log.lane, 0)
        cursor = session.cursors.get(key) if session is not None else None
        if session is None or (cursor is None and session.head == session.clear_index):
            marker = session.clear_index if session is not None else 0
            return WakeLogResult(Cursor(consumer.name, log.lane, "log", marker, None), marker)
        now = self._clock()
        if cursor is None:
            position = session.clear_index if log.backfill else session.head
            cursor = open_log_cursor(session, consumer.name, log, position, now)
        elif cursor.kind != "log":
            raise invalid(
                f"consumer '{consumer.name}' has a {cursor.kind} cursor on lane '{log.lane}'"
            )
        else:
            wake_idle(session, cursor, log, now)
        self._publish(session)
        return WakeLogResult(cursor.view(), session.head)

    def _log_consumer(self, consumer: object) -> LogSpec:
        if not isinstance(consumer, Consumer):
            raise invalid(f"consumer must be a Consumer, not {type(consumer).__name__}")
        check.check_name(consumer.name, "consumer name", self._limits)
        if consumer.log is None:
            raise invalid(f"consumer '{consumer.name}' is not a log consumer")
        return check.check_log_spec(consumer.log, self._limits)

    # -- claims and attempts -------------------------------------------------------------

    async def claim_available(
        self,
        session_id: str,
        *,
        holder: str,
        ttl: float,
        exclude: Sequence[ClaimRef] = (),
        consumers: Sequence[Consumer] | None = None,
        max_failures: int | None = None,
        through: int | None = None,
    ) -> ClaimResult:
        """Claims every eligible head of the session. ``exclude`` names exact heads
        ``(consumer, lane, index)``: a lane whose head has moved past an excluded
        index is eligible again."""
        check.check_session_id(session_id, self._limits)
        holder = check.check_holder(holder, self._limits)
        ttl = check.check_seconds(ttl, "ttl")
        refs = [check.check_claim_ref(ref, "exclude", self._limits) for ref in exclude]
        consumers = self._consumers(consumers)
        if max_failures is not None:
            check.check_positive_count(max_failures, "max_failures")
        through = check.check_optional_bound(through, "through")
        session = self._sessions.get(session_id)
        if session is None:
            return Settled()
        refresh_types(session, self._wake_set(consumers))
        served = None if consumers is None else {consumer.name for consumer in consumers}
        return attempts.claim_available(
            session,
            holder=holder,
            ttl=ttl,
            now=self._clock(),
            exclude=refs,
            served=served,
            max_failures=max_failures,
            through=through,
        )

    async def claim_any(
        self,
        *,
        holder: str,
        ttl: float,
        consumers: Sequence[Consumer] | None = None,
        limit: int = 10,
        max_failures: int | None = None,
    ) -> list[Head]:
        """Claims the oldest-ready eligible heads of every session (see ``attempts.claim_any``).

        Unlike ``claim_available`` it refreshes no log types: a registration already
        reached every cursor of its consumer.
        """
        holder = check.check_holder(holder, self._limits)
        ttl = check.check_seconds(ttl, "ttl")
        consumers = self._consumers(consumers)
        check.check_positive_count(limit, "limit")
        if max_failures is not None:
            check.check_positive_count(max_failures, "max_failures")
        served = None if consumers is None else {consumer.name for consumer in consumers}
        return attempts.claim_any(
            self._ready,
            holder=holder,
            ttl=ttl,
            now=self._clock(),
            served=served,
            limit=limit,
            max_failures=max_failures,
        )

    async def renew_claims(
        self, session_id: str, *, holder: str, claims: Sequence[AttemptRef], ttl: float
    ) -> RenewResult:
        check.check_session_id(session_id, self._limits)
        holder = check.check_holder(holder, self._limits)
        refs = [check.check_attempt_ref(ref, "claim", self._limits) for ref in claims]
        ttl = check.check_seconds(ttl, "ttl")
        session = self._sessions.get(session_id)
        return attempts.renew(session, refs, holder=holder, now=self._clock(), ttl=ttl)

    async def release_claims(
        self, session_id: str, *, holder: str, claims: Sequence[AttemptRef]
    ) -> ReleaseResult:
        """Hands ``holder``'s claims back without a failure (a worker shutting down)."""
        check.check_session_id(session_id, self._limits)
        holder = check.check_holder(holder, self._limits)
        refs = [check.check_attempt_ref(ref, "claim", self._limits) for ref in claims]
        session = self._sessions.get(session_id)
        result = attempts.release(session, refs, holder=holder, now=self._clock())
        if session is not None:
            self._publish(session)
        return result

    async def complete_attempt(
        self,
        session_id: str,
        *,
        consumer: str,
        lane: str | None,
        index: int,
        attempt: int,
        events: Sequence[NewEvent] = (),
        consumers: Sequence[Consumer] | None = None,
    ) -> CompleteResult:
        completion = Completion(session_id, consumer, lane, index, attempt, events, consumers)
        return (await self.complete_attempts([completion]))[0]

    async def complete_attempts(self, completions: Sequence[Completion]) -> list[CompleteResult]:
        """Judges each completion like ``complete_attempt``, all or nothing.

        Every input is checked first. For a batch, the touched sessions are copied
        before the first completion runs; if any completion raises, the copies are put
        back, so nothing of the batch remains, and streams and wakeups hear only of
        whole batches.
        """
        if isinstance(completions, str | bytes) or not isinstance(completions, Sequence):
            raise invalid("completions must be a sequence of Completion")
        checked = []
        for completion in completions:
            completion = check.check_completion(completion, self._limits)
            wake = self._wake_set(completion.consumers)
            checked.append((completion, wake, self._events(completion.events, wake, need_ids=True)))
        backup = self._backup([completion for completion, _, _ in checked])
        try:
            results = [self._complete(c, wake, events) for c, wake, events in checked]
        except BaseException:
            self._sessions.update(backup)
            for session in backup.values():
                self._ready.requeue(session)
            raise
        for completion, _, _ in checked:
            self._publish(self._sessions[completion.session_id])
        return results

    def _backup(self, completions: Sequence[Completion]) -> dict[str, SessionState]:
        """Copies of the sessions a batch touches (a completion in a session that does not
        exist raises before anything is written). A lone completion needs no copy: it
        raises, if at all, before it writes anything."""
        if len(completions) < 2:
            return {}
        touched = {completion.session_id for completion in completions}
        return {sid: self._sessions[sid].copy() for sid in touched if sid in self._sessions}

    def _complete(
        self, completion: Completion, wake: Sequence[Consumer], events: list[CheckedEvent]
    ) -> CompleteResult:
        session_id = completion.session_id
        session = self._sessions.get(session_id)
        session = attempts.live_session(session, completion.index, session_id)
        if session is None:
            return Superseded()
        now = self._clock()
        return attempts.complete(
            session, completion, events, wake=wake, now=now, new_id=self._new_id
        )

    async def fail_attempt(
        self,
        session_id: str,
        *,
        consumer: str,
        lane: str | None,
        index: int,
        attempt: int,
        error: str,
        max_failures: int,
        retry_after: float | None = None,
    ) -> FailResult:
        """Records a failure; ``retry_after`` (seconds, > 0) holds the head back meanwhile."""
        check.check_session_id(session_id, self._limits)
        ref = check.check_attempt_ref(AttemptRef(consumer, lane, index, attempt), "attempt")
        text = check.check_error_text(error, self._limits)
        check.check_positive_count(max_failures, "max_failures")
        if retry_after is not None:
            retry_after = check.check_seconds(retry_after, "retry_after")
        session = attempts.live_session(self._sessions.get(session_id), index, session_id)
        if session is None:
            return FailResult("superseded", 0)
        result = attempts.fail(
            session,
            ref,
            error=text,
            max_failures=max_failures,
            retry_after=retry_after,
            now=self._clock(),
        )
        self._publish(session)
        return result

    async def dead_letters(self, session_id: str) -> list[Head]:
        check.check_session_id(session_id, self._limits)
        return attempts.dead_heads(self._sessions.get(session_id))

    async def redrive(
        self,
        session_id: str,
        *,
        consumer: str,
        index: int,
        action: RedriveAction,
        consumers: Sequence[Consumer] | None = None,
    ) -> RedriveResult:
        check.check_session_id(session_id, self._limits)
        check.check_name(consumer, "consumer name", self._limits)
        check.check_index(index)
        check.check_redrive_action(action)
        consumers = self._consumers(consumers)
        session = self._sessions.get(session_id)
        if session is None:
            return RedriveResult(False, False)
        redriven = attempts.redrive(
            session,
            consumer=consumer,
            index=index,
            action=action,
            wake=self._wake_set(consumers),
            now=self._clock(),
        )
        self._publish(session)
        return RedriveResult(redriven, has_pending(session, consumers))

    # -- state snapshots ----------------------------------------------------------------

    async def read_state(
        self, session_id: str, reducer: str, *, through: int | None = None
    ) -> StateRead:
        """The newest usable fold at or below ``through`` (default and cap: the head) and
        the events after it, never below the clear marker."""
        check.check_session_id(session_id, self._limits)
        check.check_name(reducer, "reducer name", self._limits)
        through = check.check_optional_bound(through, "through")
        session = self._sessions.get(session_id)
        if session is None:
            return StateRead(0, None, [], 0, 0)
        upto = session.head if through is None else min(through, session.head)
        found = session.snapshots.newest(reducer, upto, session.clear_index)
        index, state = (0, None) if found is None else (found[0], json.loads(found[1]))
        events = [row.stored() for row in session.rows_between(index, upto)]
        return StateRead(index, state, events, session.head, session.clear_index)

    async def put_snapshots(
        self, session_id: str, reducer: str, writes: Sequence[SnapshotWrite]
    ) -> None:
        """Caches folds; writes below the clear index are ignored, a write past the session
        head is ``INVALID_ARGUMENT``, and pins of heads that are not live are ignored."""
        check.check_session_id(session_id, self._limits)
        check.check_name(reducer, "reducer name", self._limits)
        checked = check.check_snapshot_writes(writes, self._limits)
        states = [
            check.check_json(write.state, "snapshot state", self._limits) for write in checked
        ]
        session = self._sessions.get(session_id)
        head = session.head if session is not None else 0
        for write in checked:
            if write.index > head:
                raise invalid(
                    f"snapshot index {write.index} is past head {head} of session '{session_id}'"
                )
        if session is None:  # no write can name an index of an empty session
            return
        for write, state in sorted(zip(checked, states, strict=True), key=lambda w: w[0].index):
            if write.index < session.clear_index:
                continue
            pins = [pin for pin in write.pins if self._live_head(session, pin)]
            session.snapshots.put(reducer, write.index, state, pins)

    @staticmethod
    def _live_head(session: SessionState, pin: ClaimRef) -> bool:
        cursor = session.cursors.get(cursor_key(pin.consumer, pin.lane, pin.index))
        return cursor is not None and cursor.head == pin.index and cursor.dispatch.failed_at is None

    # -- clear and reclaim --------------------------------------------------------------

    async def clear(
        self,
        session_id: str,
        *,
        if_last_index: int | None = None,
        cause: AttemptRef | None = None,
    ) -> ClearResult:
        """Appends the ``a2.cleared`` marker (stored without a cause) and hides what is below.

        Without ``if_last_index`` every call appends a new marker, even right after
        another one.
        """
        check.check_session_id(session_id, self._limits)
        if_last_index = check.check_optional_bound(if_last_index, "if_last_index")
        if cause is not None:
            check.check_attempt_ref(cause, "clear cause", self._limits)
        session = self._sessions.get(session_id)
        if cause is not None:
            attempts.assert_current_cause(session, cause)
        session = self._writable(session_id)
        if if_last_index is not None and session.clear_index == if_last_index + 1:
            return ClearResult(True, session.head, session.clear_index)
        if if_last_index is not None and session.head != if_last_index:
            return ClearResult(False, session.head, session.clear_index)
        now = self._clock()
        (marker,) = plan_rows(session, [_CLEAR_MARKER], now=now, new_id=self._new_id)
        self._sessions[session_id] = session
        add_rows(session, [marker], [_CLEAR_MARKER], wake=(), now=now)
        session.clear_index = marker.index
        for key, cursor in list(session.cursors.items()):
            if cursor.kind != "log":
                del session.cursors[key]
                continue
            cursor.position = marker.index
            cursor.head = None
            session.set_ready(cursor, None)
            cursor.dispatch = FRESH
            cursor.completions.clear()
        session.finished.clear()
        session.snapshots.release_all()
        self._publish(session)
        return ClearResult(True, marker.index, marker.index)

    async def reclaim(self, session_id: str) -> ReclaimResult:
        """Deletes up to ``RECLAIM_BATCH`` events below the clear marker; once none remain,
        drops the snapshots below it too (cursors below it went at the clear)."""
        check.check_session_id(session_id, self._limits)
        session = self._sessions.get(session_id)
        if session is None or session.clear_index <= 1:
            return ReclaimResult(0, True)
        count = min(RECLAIM_BATCH, session.clear_index - 1 - session.offset)
        for row in session.rows[:count]:
            if session.by_id.get(row.id) is row:
                del session.by_id[row.id]
        del session.rows[:count]
        session.offset += count
        done = session.offset == session.clear_index - 1
        if done:
            session.snapshots.drop_below(session.clear_index)
        return ReclaimResult(count, done)
