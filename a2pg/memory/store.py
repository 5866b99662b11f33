"""MemoryStore: the reference model of the store contract (docs/concepts/contract.md), in memory."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime

from ..contract.args import (
    ActivityArgs,
    AppendArgs,
    AttemptsArgs,
    AuditArgs,
    AuditLogArgs,
    CancelArgs,
    ClaimAnyArgs,
    ClaimArgs,
    ClearArgs,
    CompletionItem,
    FailArgs,
    HeldClaimsArgs,
    PruneAttemptsArgs,
    PutSnapshotsArgs,
    ReadArgs,
    ReadStateArgs,
    RedriveArgs,
    SessionsArgs,
    WakeLogArgs,
)
from ..contract.limits import DEFAULT_LIMITS, Limits
from ..feeds import Feed
from ..front import CheckedStore
from ..ids import Clock, IdGenerator, system_clock, uuid7
from ..models import (
    ActivityPoint,
    AppendResult,
    AttemptRecord,
    AuditEntry,
    BackfillProgress,
    CancelResult,
    ClaimResult,
    ClearResult,
    CompletedAndClaimed,
    CompleteResult,
    Consumer,
    ConsumerStats,
    Cursor,
    DeadLetterQuery,
    FailResult,
    FoundHead,
    Head,
    HeadQuery,
    ReclaimResult,
    RedriveResult,
    ReleaseResult,
    RenewResult,
    SessionInfo,
    StateRead,
    StoredEvent,
    WakeLogResult,
    WorkerBeat,
    WorkerInfo,
)
from . import attempts as history
from . import claims as _claims  # areas aliased: their names are also parameters or methods
from . import clear as _clear
from . import completions as _completions
from . import log, monitoring, snapshots
from .audit import AuditLog
from .cursors import still_ready
from .presence import MemoryPresence
from .registry import Registry
from .state import Sessions
from .workers import Workers


class MemoryStore(CheckedStore):
    """Every operation of the contract on plain Python structures.

    The front (``a2pg.front``) checks each call; each hook here applies it in its area
    module, then announces what it did to streams and wakeups. Hooks are ``async def``
    but never await while mutating, so each operation is atomic under asyncio.
    Payloads are kept as JSON text and every result decodes its own copy. ``close()``
    ends streams and wakeups; every call after it is ``STORE_UNAVAILABLE``, as on the
    other backends (the data is kept, for nothing to release).
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
        self._feed = Feed()
        self._workers = Workers()
        self._presence = MemoryPresence(self._clock, limits)

    @property
    def presence(self) -> MemoryPresence:
        self._check_open()
        return self._presence

    async def close(self) -> None:
        """Ends every stream and wakeups iterator; later calls are refused."""
        self._closed = True
        await self._feed.close()

    async def _now(self) -> datetime:
        return self._clock()

    def _announce(self, session_id: str, *, claimed_at: datetime | None = None) -> None:
        """Tells streams of new events and wakeups of new work, once the operation is done.

        ``claimed_at``: the operation's own claim ran at that time, so only work still
        claimable from then on is news (a head made ready then and not claimed)."""
        session = self._sessions.get(session_id)
        if session is None:
            return
        if session.new_events:
            session.new_events = False
            self._feed.committed(session_id)
        if session.new_work:
            session.new_work = False
            if claimed_at is None or still_ready(session, claimed_at):
                self._feed.work(session_id)

    async def _wake_set(self, consumers: Sequence[Consumer] | None) -> Sequence[Consumer]:
        return self._registry.wake_set(consumers)

    # -- the log -------------------------------------------------------------------------

    async def _append(self, args: AppendArgs, wake: Sequence[Consumer]) -> AppendResult:
        result = log.append(self._sessions, args, wake, now=self._clock(), new_id=self._new_id)
        self._announce(args.session_id)
        return result

    async def _read(self, args: ReadArgs) -> list[StoredEvent]:
        return log.read(self._sessions.get(args.session_id), args)

    async def _wake_log(self, args: WakeLogArgs) -> WakeLogResult:
        result = log.wake_log(self._sessions, args, now=self._clock())
        self._announce(args.session_id)
        return result

    async def _list_cursors(self, session_id: str) -> list[Cursor]:
        return log.list_cursors(self._sessions.get(session_id))

    async def _list_sessions(self, args: SessionsArgs) -> list[SessionInfo]:
        return log.list_sessions(self._sessions, args)

    async def _stream_batch(
        self, session_id: str, after: int, *, visible: bool
    ) -> list[StoredEvent]:
        return log.stream_batch(self._sessions.get(session_id), after, visible=visible)

    # -- claims --------------------------------------------------------------------------

    async def _claim_available(self, args: ClaimArgs, wake: Sequence[Consumer]) -> ClaimResult:
        session = self._sessions.get(args.session_id)
        paused = self._registry.paused
        return _claims.claim_available(session, args, wake, now=self._clock(), paused=paused)

    async def _claim_any(self, args: ClaimAnyArgs) -> list[Head]:
        return _claims.claim_any(self._ready, args, now=self._clock(), paused=self._registry.paused)

    async def _renew_claims(self, args: HeldClaimsArgs) -> RenewResult:
        return _claims.renew(self._sessions.get(args.session_id), args, now=self._clock())

    async def _release_claims(self, args: HeldClaimsArgs) -> ReleaseResult:
        result = _claims.release(self._sessions.get(args.session_id), args, now=self._clock())
        self._announce(args.session_id)
        return result

    # -- outcomes of attempts ------------------------------------------------------------

    async def _complete_attempts(self, items: list[CompletionItem]) -> list[CompleteResult]:
        results = _completions.complete_all(
            self._sessions, items, now=self._clock(), new_id=self._new_id
        )
        for item in items:
            self._announce(item.args.completion.session_id)
        return results

    async def _complete_and_claim(
        self, items: list[CompletionItem], claim: ClaimAnyArgs
    ) -> CompletedAndClaimed:
        """Completes then claims with nothing between; wakeups hear only of work the
        claim left."""
        now = self._clock()
        results = _completions.complete_all(self._sessions, items, now=now, new_id=self._new_id)
        heads = _claims.claim_any(self._ready, claim, now=now, paused=self._registry.paused)
        for item in items:
            self._announce(item.args.completion.session_id, claimed_at=now)
        return CompletedAndClaimed(results, heads)

    async def _fail_attempt(self, args: FailArgs) -> FailResult:
        result = _completions.fail(self._sessions.get(args.session_id), args, now=self._clock())
        self._announce(args.session_id)
        return result

    async def _attempts(self, args: AttemptsArgs) -> list[AttemptRecord]:
        return history.attempts(self._sessions.get(args.session_id), args)

    async def _prune_attempts(self, args: PruneAttemptsArgs) -> int:
        return history.prune(self._sessions, args)

    async def _activity(self, args: ActivityArgs) -> list[ActivityPoint]:
        return history.activity(self._sessions, args)

    async def _dead_letters(self, session_id: str) -> list[Head]:
        return _completions.dead_heads(self._sessions.get(session_id))

    async def _redrive(self, args: RedriveArgs, wake: Sequence[Consumer]) -> RedriveResult:
        session = self._sessions.get(args.session_id)
        result = _completions.redrive(session, args, wake, now=self._clock())
        self._announce(args.session_id)
        return result

    async def _next_due_in(self, consumers: Sequence[Consumer] | None) -> float | None:
        now = self._clock()
        names = None if consumers is None else {c.name for c in consumers}
        paused = self._registry.paused
        due = self._ready.next_due(
            now, lambda c: (names is None or c.consumer in names) and c.consumer not in paused
        )
        return None if due is None else (due - now).total_seconds()

    async def _cancel_head(self, args: CancelArgs, wake: Sequence[Consumer]) -> CancelResult:
        session = self._sessions.get(args.session_id)
        result = _completions.cancel_head(session, args, wake, now=self._clock())
        self._announce(args.session_id)
        return result

    # -- state snapshots -----------------------------------------------------------------

    async def _read_state(self, args: ReadStateArgs) -> StateRead:
        return snapshots.read_state(self._sessions.get(args.session_id), args)

    async def _put_snapshots(self, args: PutSnapshotsArgs) -> None:
        snapshots.put_snapshots(self._sessions.get(args.session_id), args)

    # -- clear and reclaim ---------------------------------------------------------------

    async def _clear(self, args: ClearArgs) -> ClearResult:
        result = _clear.clear(self._sessions, args, now=self._clock(), new_id=self._new_id)
        self._announce(args.session_id)
        return result

    async def _reclaim(self, session_id: str) -> ReclaimResult:
        return _clear.reclaim(self._sessions.get(session_id))

    # -- the consumer registry -----------------------------------------------------------

    async def _register_consumers(self, consumers: list[Consumer]) -> None:
        self._registry.register(consumers, self._clock())

    async def _backfill_state(self, name: str) -> tuple[Consumer, BackfillProgress] | None:
        return self._registry.backfill_state(name)

    async def _record_backfill(
        self,
        name: str,
        seen: BackfillProgress,
        *,
        after: str | None,
        sessions: int,
        done: bool,
    ) -> BackfillProgress | None:
        return self._registry.record_backfill(
            name, seen, after=after, sessions=sessions, done=done, now=self._clock()
        )

    async def _unregister_consumers(self, names: list[str]) -> None:
        self._registry.unregister(names)

    async def _pause_consumers(self, names: list[str]) -> None:
        self._registry.pause(names, self._clock())

    async def _resume_consumers(self, names: list[str]) -> None:
        """Ends the pauses, then tells wakeups of every session where a resumed consumer's
        head is claimable now (nothing else would: no write made that work)."""
        resumed = set(self._registry.resume(names))
        if not resumed:
            return
        sessions = self._sessions.by_id.values()
        for session_id in _claims.ready_sessions(sessions, resumed, now=self._clock()):
            self._feed.work(session_id)

    async def _registered_consumers(self) -> list[Consumer]:
        return self._registry.listed()

    # -- monitoring ----------------------------------------------------------------------

    async def _find_dead_letters(self, query: DeadLetterQuery) -> list[Head]:
        return monitoring.find_dead_letters(self._sessions, query)

    async def _find_heads(self, query: HeadQuery) -> list[FoundHead]:
        return monitoring.find_heads(self._sessions, query, now=self._clock())

    async def _consumer_stats(self) -> list[ConsumerStats]:
        names = [consumer.name for consumer in self._registry.listed()]
        now = self._clock()
        return monitoring.consumer_stats(
            self._sessions,
            names,
            paused=self._registry.paused,
            backfills=self._registry.backfills,
            workers=self._workers.listed(now=now),
            now=now,
        )

    async def _heartbeat(self, beat: WorkerBeat) -> None:
        self._workers.beat(beat, now=self._clock())

    async def _forget_workers(self, holders: list[str]) -> None:
        self._workers.forget(holders)

    async def _list_workers(self) -> list[WorkerInfo]:
        return self._workers.listed(now=self._clock())

    # -- the audit log -------------------------------------------------------------------

    @functools.cached_property
    def _audit(self) -> AuditLog:
        """The operators' audit log, made at its first use."""
        return AuditLog()

    async def _record_audit(self, args: AuditArgs) -> AuditEntry:
        return self._audit.record(args, now=self._clock(), new_id=self._new_id)

    async def _audit_log(self, args: AuditLogArgs) -> list[AuditEntry]:
        return self._audit.page(args)
