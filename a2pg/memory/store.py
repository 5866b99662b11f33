"""MemoryStore: the reference model of the store contract (SPEC.md section 2), in memory."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import datetime

from ..contract.args import (
    check_append,
    check_claim_any,
    check_claim_available,
    check_clear,
    check_complete_and_claim,
    check_complete_attempts,
    check_fail_attempt,
    check_find_dead_letters,
    check_forget_workers,
    check_heartbeat,
    check_put_snapshots,
    check_read,
    check_read_state,
    check_redrive,
    check_register_consumers,
    check_release_claims,
    check_renew_claims,
    check_session,
    check_sessions,
    check_stream,
    check_unregister_consumers,
    check_wake_log,
)
from ..contract.limits import DEFAULT_LIMITS, Limits
from ..ids import Clock, IdGenerator, system_clock, uuid7
from ..models import (
    ANY_LANE,
    AnyLane,
    AppendResult,
    AttemptRef,
    ClaimRef,
    ClaimResult,
    ClearResult,
    CompletedAndClaimed,
    CompleteResult,
    Completion,
    Consumer,
    ConsumerStats,
    Cursor,
    DeadLetterQuery,
    FailResult,
    Head,
    NewEvent,
    ReclaimResult,
    RedriveAction,
    RedriveResult,
    ReleaseResult,
    RenewResult,
    SessionInfo,
    SnapshotWrite,
    StateRead,
    StoredEvent,
    WakeLogResult,
    WorkerBeat,
    WorkerInfo,
)
from ..wakeups import Wakeups
from . import claims as _claims  # areas aliased: their names are also parameters or methods
from . import clear as _clear
from . import completions as _completions
from . import log, monitoring, snapshots
from .cursors import still_ready
from .presence import MemoryPresence
from .registry import Registry
from .state import Sessions
from .streams import Hub
from .workers import Workers


class MemoryStore:
    """Every operation of the contract on plain Python structures.

    Each method checks its arguments with the contract layer, applies the operation
    in its area module, then announces what it did to streams and wakeups.
    Operations are ``async def`` but never await while mutating, so each one is
    atomic under asyncio. Payloads are kept as JSON text and every result decodes
    its own copy. ``close()`` ends streams and wakeups; the store's data stays
    readable and writable afterwards (there is nothing to release).
    """

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        ids: IdGenerator | None = None,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self._clock = clock or system_clock
        self._new_id = ids or uuid7
        self._limits = limits
        self._sessions = Sessions()
        self._ready = self._sessions.ready
        self._registry = Registry()
        self._hub = Hub()
        self._workers = Workers()
        self._presence = MemoryPresence(self._clock, limits)

    @property
    def presence(self) -> MemoryPresence:
        return self._presence

    def _announce(self, session_id: str, *, claimed_at: datetime | None = None) -> None:
        """Tells streams of new events and wakeups of new work, once the operation is done.

        ``claimed_at``: the operation's own claim ran at that time, so only work still
        claimable from then on is news (a head made ready then and not claimed)."""
        session = self._sessions.get(session_id)
        if session is None:
            return
        if session.new_events:
            session.new_events = False
            self._hub.committed(session_id)
        if session.new_work:
            session.new_work = False
            if claimed_at is None or still_ready(session, claimed_at):
                self._hub.work(session_id)

    # -- the log -------------------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        events: Sequence[NewEvent],
        *,
        consumers: Sequence[Consumer] | None = None,
        origin_index: int | None = None,
    ) -> AppendResult:
        args = check_append(
            session_id,
            events,
            consumers=consumers,
            origin_index=origin_index,
            limits=self._limits,
        )
        wake = self._registry.wake_set(args.consumers)
        result = log.append(self._sessions, args, wake, now=self._clock(), new_id=self._new_id)
        self._announce(args.session_id)
        return result

    async def read(
        self,
        session_id: str,
        *,
        after: int | None = None,
        through: int | None = None,
        types: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        args = check_read(
            session_id, after=after, through=through, types=types, limit=limit, limits=self._limits
        )
        return log.read(self._sessions.get(args.session_id), args)

    async def wake_log(self, session_id: str, consumer: Consumer) -> WakeLogResult:
        args = check_wake_log(session_id, consumer, limits=self._limits)
        result = log.wake_log(self._sessions, args, now=self._clock())
        self._announce(args.session_id)
        return result

    async def cursors(self, session_id: str) -> list[Cursor]:
        session_id = check_session(session_id, limits=self._limits)
        return log.list_cursors(self._sessions.get(session_id))

    async def sessions(self, *, after: str | None = None, limit: int = 100) -> list[SessionInfo]:
        args = check_sessions(after=after, limit=limit, limits=self._limits)
        return log.list_sessions(self._sessions, args)

    # -- claims --------------------------------------------------------------------------

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
        args = check_claim_available(
            session_id,
            holder=holder,
            ttl=ttl,
            exclude=exclude,
            consumers=consumers,
            max_failures=max_failures,
            through=through,
            limits=self._limits,
        )
        session = self._sessions.get(args.session_id)
        wake = self._registry.wake_set(args.consumers)
        return _claims.claim_available(session, args, wake, now=self._clock())

    async def claim_any(
        self,
        *,
        holder: str,
        ttl: float,
        consumers: Sequence[Consumer] | None = None,
        limit: int = 10,
        max_failures: int | None = None,
    ) -> list[Head]:
        args = check_claim_any(
            holder=holder,
            ttl=ttl,
            consumers=consumers,
            limit=limit,
            max_failures=max_failures,
            limits=self._limits,
        )
        return _claims.claim_any(self._ready, args, now=self._clock())

    async def renew_claims(
        self, session_id: str, *, holder: str, claims: Sequence[AttemptRef], ttl: float
    ) -> RenewResult:
        args = check_renew_claims(
            session_id, holder=holder, claims=claims, ttl=ttl, limits=self._limits
        )
        return _claims.renew(self._sessions.get(args.session_id), args, now=self._clock())

    async def release_claims(
        self, session_id: str, *, holder: str, claims: Sequence[AttemptRef]
    ) -> ReleaseResult:
        """Hands ``holder``'s claims back without a failure (a worker shutting down)."""
        args = check_release_claims(session_id, holder=holder, claims=claims, limits=self._limits)
        result = _claims.release(self._sessions.get(args.session_id), args, now=self._clock())
        self._announce(args.session_id)
        return result

    # -- outcomes of attempts ------------------------------------------------------------

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
        """Judges each completion like ``complete_attempt``, all or nothing; streams and
        wakeups hear only of whole batches."""
        checked = check_complete_attempts(completions, limits=self._limits)
        batch = [(c, self._registry.wake_set(c.completion.consumers)) for c in checked]
        results = _completions.complete_all(
            self._sessions, batch, now=self._clock(), new_id=self._new_id
        )
        for args in checked:
            self._announce(args.completion.session_id)
        return results

    async def complete_and_claim(
        self,
        completions: Sequence[Completion],
        *,
        holder: str,
        ttl: float,
        consumers: Sequence[Consumer] | None = None,
        limit: int = 10,
        max_failures: int | None = None,
    ) -> CompletedAndClaimed:
        """``complete_attempts`` then ``claim_any``, with nothing between; wakeups hear only
        of work the claim left."""
        args = check_complete_and_claim(
            completions,
            holder=holder,
            ttl=ttl,
            consumers=consumers,
            limit=limit,
            max_failures=max_failures,
            limits=self._limits,
        )
        batch = [(c, self._registry.wake_set(c.completion.consumers)) for c in args.completions]
        now = self._clock()
        results = _completions.complete_all(self._sessions, batch, now=now, new_id=self._new_id)
        heads = _claims.claim_any(self._ready, args.claim, now=now)
        for c in args.completions:
            self._announce(c.completion.session_id, claimed_at=now)
        return CompletedAndClaimed(results, heads)

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
        args = check_fail_attempt(
            session_id,
            consumer=consumer,
            lane=lane,
            index=index,
            attempt=attempt,
            error=error,
            max_failures=max_failures,
            retry_after=retry_after,
            limits=self._limits,
        )
        result = _completions.fail(self._sessions.get(args.session_id), args, now=self._clock())
        self._announce(args.session_id)
        return result

    async def dead_letters(self, session_id: str) -> list[Head]:
        session_id = check_session(session_id, limits=self._limits)
        return _completions.dead_heads(self._sessions.get(session_id))

    async def redrive(
        self,
        session_id: str,
        *,
        consumer: str,
        index: int,
        action: RedriveAction,
        consumers: Sequence[Consumer] | None = None,
        lane: str | AnyLane | None = ANY_LANE,
    ) -> RedriveResult:
        args = check_redrive(
            session_id,
            consumer=consumer,
            index=index,
            action=action,
            consumers=consumers,
            lane=lane,
            limits=self._limits,
        )
        session = self._sessions.get(args.session_id)
        wake = self._registry.wake_set(args.consumers)
        result = _completions.redrive(session, args, wake, now=self._clock())
        self._announce(args.session_id)
        return result

    # -- state snapshots -----------------------------------------------------------------

    async def read_state(
        self, session_id: str, reducer: str, *, through: int | None = None
    ) -> StateRead:
        args = check_read_state(session_id, reducer, through=through, limits=self._limits)
        return snapshots.read_state(self._sessions.get(args.session_id), args)

    async def put_snapshots(
        self, session_id: str, reducer: str, writes: Sequence[SnapshotWrite]
    ) -> None:
        args = check_put_snapshots(session_id, reducer, writes, limits=self._limits)
        snapshots.put_snapshots(self._sessions.get(args.session_id), args)

    # -- clear and reclaim ---------------------------------------------------------------

    async def clear(
        self,
        session_id: str,
        *,
        if_last_index: int | None = None,
        cause: AttemptRef | None = None,
    ) -> ClearResult:
        args = check_clear(
            session_id, if_last_index=if_last_index, cause=cause, limits=self._limits
        )
        result = _clear.clear(self._sessions, args, now=self._clock(), new_id=self._new_id)
        self._announce(args.session_id)
        return result

    async def reclaim(self, session_id: str) -> ReclaimResult:
        session_id = check_session(session_id, limits=self._limits)
        return _clear.reclaim(self._sessions.get(session_id))

    # -- the consumer registry -----------------------------------------------------------

    async def register_consumers(self, consumers: Sequence[Consumer]) -> None:
        """Stores each log consumer's spec (targeted ones are ignored)."""
        logs = check_register_consumers(consumers, limits=self._limits)
        self._registry.register(logs)

    async def unregister_consumers(self, names: Sequence[str]) -> None:
        self._registry.unregister(check_unregister_consumers(names, limits=self._limits))

    async def registered_consumers(self) -> list[Consumer]:
        return self._registry.listed()

    # -- monitoring ----------------------------------------------------------------------

    async def find_dead_letters(self, query: DeadLetterQuery) -> list[Head]:
        checked = check_find_dead_letters(query, limits=self._limits)
        return monitoring.find_dead_letters(self._sessions, checked)

    async def consumer_stats(self) -> list[ConsumerStats]:
        names = [consumer.name for consumer in self._registry.listed()]
        return monitoring.consumer_stats(self._sessions, names, now=self._clock())

    async def heartbeat(self, beat: WorkerBeat) -> None:
        self._workers.beat(check_heartbeat(beat, limits=self._limits), now=self._clock())

    async def forget_workers(self, holders: Sequence[str]) -> None:
        self._workers.forget(check_forget_workers(holders, limits=self._limits))

    async def workers(self) -> list[WorkerInfo]:
        return self._workers.listed(now=self._clock())

    # -- live feeds ----------------------------------------------------------------------

    def stream(self, session_id: str, *, after: int = 0) -> AsyncIterator[StoredEvent]:
        """Stored events after ``after``, then live ones as they commit, in order; ends when
        the consumer closes it or the store closes. It starts at the clear marker at the
        latest, never below it."""
        args = check_stream(session_id, after=after, limits=self._limits)
        reader = log.stream_reader(self._sessions, args.session_id)
        return self._hub.stream(args.session_id, args.after, reader)

    def wakeups(self) -> Wakeups:
        """Session ids where claimable work may have appeared: heads created by appends,
        completions and log wakes, redrives, and failures claimable at once. Lease and
        backoff expiries are not announced: workers poll (``Busy.retry_at``) for those."""
        return self._hub.wakeups()

    async def close(self) -> None:
        """Ends every stream and wakeups iterator; the data stays usable."""
        self._hub.close()
