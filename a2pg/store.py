"""The async ``Store`` protocol every backend satisfies (structurally, without inheritance)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from .models import (
    ANY_LANE,
    JSON,
    ActivityPoint,
    AnyLane,
    AppendResult,
    AttemptRecord,
    AttemptRef,
    AuditEntry,
    BackfillProgress,
    CancelAction,
    CancelResult,
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
    FoundHead,
    Head,
    HeadQuery,
    NewEvent,
    PresenceRow,
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
from .wakeups import Subscription


@runtime_checkable
class Presence(Protocol):
    """Short-lived per-participant values: last writer wins per field, until it expires."""

    async def write(
        self,
        ns: str,
        participant: str,
        values: Mapping[str, JSON],
        *,
        at: datetime,
        seen: JSON,
        ttl: float,
    ) -> dict[str, JSON]:
        """Writes the fields that win against what is stored; returns those applied."""
        ...

    async def read(self, ns: str) -> list[PresenceRow]:
        """Live, non-null fields by participant then field; sweeps expired rows."""
        ...


@runtime_checkable
class Store(Protocol):
    """The A2 session store contract (docs/concepts/contract.md); every backend implements
    it by subclassing ``a2pg.front.CheckedStore``."""

    @property
    def presence(self) -> Presence: ...

    async def append(
        self,
        session_id: str,
        events: Sequence[NewEvent],
        *,
        consumers: Sequence[Consumer] | None = None,
        origin_index: int | None = None,
    ) -> AppendResult: ...

    async def read(
        self,
        session_id: str,
        *,
        after: int | None = None,
        through: int | None = None,
        types: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[StoredEvent]: ...

    async def wake_log(self, session_id: str, consumer: Consumer) -> WakeLogResult: ...

    async def cursors(self, session_id: str) -> list[Cursor]: ...

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
    ) -> ClaimResult: ...

    async def claim_any(
        self,
        *,
        holder: str,
        ttl: float,
        consumers: Sequence[Consumer] | None = None,
        limit: int = 10,
        max_failures: int | None = None,
    ) -> list[Head]: ...

    async def renew_claims(
        self, session_id: str, *, holder: str, claims: Sequence[AttemptRef], ttl: float
    ) -> RenewResult: ...

    async def release_claims(
        self, session_id: str, *, holder: str, claims: Sequence[AttemptRef]
    ) -> ReleaseResult:
        """Hands live claims back (a worker shutting down): claimable again at once, with
        no failure counted; the released attempt is fenced out like a lapsed one."""
        ...

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
    ) -> CompleteResult: ...

    async def complete_attempts(
        self, completions: Sequence[Completion]
    ) -> list[CompleteResult]: ...

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
        """``complete_attempts(completions)`` then ``claim_any(...)``, as one atomic call:
        a worker's cycle in one round trip and one commit. Work the completions create and
        the claim takes wakes nobody (no one else could claim it)."""
        ...

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
    ) -> FailResult: ...

    async def dead_letters(self, session_id: str) -> list[Head]: ...

    async def redrive(
        self,
        session_id: str,
        *,
        consumer: str,
        index: int,
        action: RedriveAction,
        consumers: Sequence[Consumer] | None = None,
        lane: str | AnyLane | None = ANY_LANE,
    ) -> RedriveResult: ...

    async def next_due_in(self, *, consumers: Sequence[Consumer] | None = None) -> float | None:
        """Seconds until the soonest held-back head may become claimable (None: none)."""
        ...

    async def cancel_head(
        self,
        session_id: str,
        *,
        consumer: str,
        index: int,
        action: CancelAction,
        consumers: Sequence[Consumer] | None = None,
        lane: str | AnyLane | None = ANY_LANE,
    ) -> CancelResult:
        """Skips or dead-letters a live head, fenced against its running attempt."""
        ...

    async def attempts(
        self,
        session_id: str,
        *,
        consumer: str,
        index: int,
        lane: str | AnyLane | None = ANY_LANE,
    ) -> list[AttemptRecord]:
        """A head's finished attempts, by attempt number (the attempt history)."""
        ...

    async def activity(self, *, since: datetime, bucket: float = 60.0) -> list[ActivityPoint]:
        """Finished attempts per consumer and time bucket since ``since``."""
        ...

    async def prune_attempts(self, *, before: datetime, limit: int = 10_000) -> int:
        """Deletes up to ``limit`` attempts that ended before ``before``; how many."""
        ...

    async def read_state(
        self, session_id: str, reducer: str, *, through: int | None = None
    ) -> StateRead: ...

    async def put_snapshots(
        self, session_id: str, reducer: str, writes: Sequence[SnapshotWrite]
    ) -> None: ...

    async def clear(
        self,
        session_id: str,
        *,
        if_last_index: int | None = None,
        cause: AttemptRef | None = None,
    ) -> ClearResult: ...

    async def reclaim(self, session_id: str) -> ReclaimResult: ...

    def stream(self, session_id: str, *, after: int = 0) -> AsyncIterator[StoredEvent]:
        """Stored events after ``after``, then live as they commit: in order, no gaps."""
        ...

    def wakeups(self) -> Subscription:
        """Yields whenever claimable work may have appeared (a session id where known);
        subscribed from the call on, until ``aclose()``."""
        ...

    async def register_consumers(self, consumers: Sequence[Consumer]) -> None: ...

    async def unregister_consumers(self, names: Sequence[str]) -> None: ...

    async def pause_consumers(self, names: Sequence[str]) -> None:
        """Claims skip these consumers' heads (targeted or log, registered or not) until
        they are resumed; their cursors and running attempts are untouched."""
        ...

    async def resume_consumers(self, names: Sequence[str]) -> None:
        """Makes these consumers' heads claimable again and wakes workers for them."""
        ...

    async def registered_consumers(self) -> list[Consumer]: ...

    async def backfill(self, consumer: str, *, limit: int = 100) -> BackfillProgress | None:
        """One batch of a registered log consumer's backfill (see ``CheckedStore``)."""
        ...

    async def sessions(self, *, after: str | None = None, limit: int = 100) -> list[SessionInfo]:
        """Sessions by id after ``after``, for listings."""
        ...

    async def find_dead_letters(self, query: DeadLetterQuery) -> list[Head]:
        """Dead-lettered heads of every session matching ``query``, one keyset page."""
        ...

    async def find_heads(self, query: HeadQuery) -> list[FoundHead]:
        """Live heads of every session in one state matching ``query``, one keyset page."""
        ...

    async def consumer_stats(self) -> list[ConsumerStats]:
        """Per consumer (registered or holding heads), by name: what monitoring shows."""
        ...

    async def heartbeat(self, beat: WorkerBeat) -> None:
        """Records that ``beat.holder`` is alive now (insert or replace its row)."""
        ...

    async def forget_workers(self, holders: Sequence[str]) -> None:
        """Drops these workers' rows (a worker forgets itself when it stops cleanly)."""
        ...

    async def workers(self) -> list[WorkerInfo]:
        """Every worker row by holder, stale ones included (see ``WorkerInfo.stale``)."""
        ...

    async def record_audit(self, entry: AuditEntry) -> AuditEntry:
        """Records one operator action; returns it with the ``id`` and ``at`` it was given."""
        ...

    async def audit_log(self, *, after: str | None = None, limit: int = 100) -> list[AuditEntry]:
        """Audit entries newest first, those after the entry ``after`` (a keyset page)."""
        ...

    async def close(self) -> None: ...
