"""The checked front: every public ``Store`` operation, written once for every backend.

Each operation here has its signature and docstring, checks its arguments with the
contract layer (``a2pg.contract.args``), resolves the log consumers its writes wake
and refuses log targets among its events, then calls the backend's hook with the
checked arguments. A backend subclasses ``CheckedStore`` and implements only the hooks
(``_append(args, wake)``, ``_redrive(args, wake)``...): it never sees an unchecked
value, and a rule of the front lands in every backend at once. ``StoreProxy`` is the
same front over another store's hooks, for wrappers that watch or change a few calls.

A call carrying more JSON than ``LOOP_CHECK_BYTES`` is checked in a worker thread, so
the event loop never waits seconds on one; a call after ``close()`` is refused alike on
every backend (``STORE_UNAVAILABLE``). The contract itself is docs/concepts/contract.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

from .contract import propagation
from .contract.args import (
    ActivityArgs,
    AppendArgs,
    AttemptsArgs,
    AuditArgs,
    AuditLogArgs,
    CancelArgs,
    ClaimAnyArgs,
    ClaimArgs,
    ClearArgs,
    CompletionArgs,
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
    check_activity,
    check_append,
    check_attempts,
    check_audit_log,
    check_backfill,
    check_cancel_head,
    check_claim_any,
    check_claim_available,
    check_clear,
    check_complete_and_claim,
    check_complete_attempts,
    check_fail_attempt,
    check_find_dead_letters,
    check_find_heads,
    check_forget_workers,
    check_heartbeat,
    check_next_due,
    check_pause_consumers,
    check_prune_attempts,
    check_put_snapshots,
    check_read,
    check_read_state,
    check_record_audit,
    check_redrive,
    check_register_consumers,
    check_release_claims,
    check_renew_claims,
    check_resume_consumers,
    check_session,
    check_sessions,
    check_stream,
    check_unregister_consumers,
    check_wake_log,
)
from .contract.budget import OffLoop
from .contract.limits import Limits
from .contract.rules import refuse_log_targets
from .errors import InvalidArgument, store_closed
from .feeds import Feed
from .models import (
    ANY_LANE,
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
    LogSpec,
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
from .store import Presence
from .wakeups import Subscription

T = TypeVar("T")

WakeSet = Callable[[Sequence[Consumer] | None], Awaitable[Sequence[Consumer]]]
"""Resolves a write's ``consumers`` to the log consumers it wakes (``None``: the registry)."""

LOOP_CHECK_BYTES = 65_536
"""JSON bytes (payloads, states) a call's check may encode on the event loop: a call that
carries more is checked again, whole, in a worker thread, so that one at the per-call
byte limit (``Limits.max_call_bytes``, 16 MiB: seconds of walking and encoding) leaves
the loop free. Below it (the common case) the check costs no thread."""


async def _checked(check: Callable[..., T], /, *args: Any, **options: Any) -> T:
    """``check(*args, **options)``: on the loop up to ``LOOP_CHECK_BYTES``, else in a
    thread (what it reads is the caller's, who awaits this call)."""
    try:
        return check(*args, loop_bytes=LOOP_CHECK_BYTES, **options)
    except OffLoop:
        return await asyncio.to_thread(functools.partial(check, *args, **options))


async def store_time(store: CheckedStore) -> datetime:
    """The store's time now, by the clock its writes record: an injected one, else the
    database's (the server's for PostgreSQL, the machine's for SQLite and memory). What
    another layer compares the store's times with (``a2pg clear --older-than``), never the
    caller's own clock, which may be another machine's."""
    store._check_open()
    return await store._now()


class CheckedStore(ABC):
    """The store contract's public face; a backend implements the hooks below it.

    Subclasses set ``_limits`` (the bounds every check applies) and ``_feed`` (the
    fan-out of their streams and wakeups) before the first call.
    """

    _limits: Limits
    _feed: Feed
    _closed: bool = False
    """Set by ``close()``: from then on every call is ``STORE_UNAVAILABLE``."""

    def _check_open(self) -> None:
        """Refuses a call after ``close()`` (``STORE_UNAVAILABLE``, alike on every backend);
        each operation's first step."""
        if self._closed:
            raise store_closed()

    @property
    @abstractmethod
    def presence(self) -> Presence:
        """Short-lived per-participant values (see ``Presence``); refused once closed."""

    @abstractmethod
    async def close(self) -> None:
        """Ends streams and wakeups and releases what the store holds; every call after it
        is ``STORE_UNAVAILABLE`` (set ``_closed`` first). Closing again does nothing."""

    # -- the log ---------------------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        events: Sequence[NewEvent],
        *,
        consumers: Sequence[Consumer] | None = None,
        origin_index: int | None = None,
    ) -> AppendResult:
        """Appends ``events`` to the session's log atomically, at the next indexes, and
        creates the cursors their targets and the woken log consumers need.

        A batch of only stored ids replays them (same answer, nothing written); a batch
        mixing stored and fresh ids is ``PARTIAL_DUPLICATE_BATCH``. ``origin_index``
        names the event these were caused by (fenced by the session's clear marker).
        ``consumers`` names the log consumers to wake (default: the registered ones).
        """
        span = propagation.append_span()  # None unless a span is current
        if span is None:
            args, wake = await self._prepare_append(
                session_id, events, consumers=consumers, origin_index=origin_index
            )
            return await self._append(args, wake)
        with span as published:
            args, wake = await self._prepare_append(
                session_id, events, consumers=consumers, origin_index=origin_index
            )
            return published(args.session_id, await self._append(args, wake))

    async def _prepare_append(
        self,
        session_id: str,
        events: Sequence[NewEvent],
        *,
        consumers: Sequence[Consumer] | None,
        origin_index: int | None,
        wake_set: WakeSet | None = None,
    ) -> tuple[AppendArgs, Sequence[Consumer]]:
        """The checked front of an append: its checked arguments and the log consumers it
        wakes, log targets among them refused. ``append`` and the backends' ``append_in``
        (an append in the caller's own transaction) share it, so the rule is one;
        ``wake_set`` resolves ``consumers`` instead of the store's registry (``append_in``
        reads it in the caller's transaction)."""
        self._check_open()
        args = await _checked(
            check_append,
            session_id,
            events,
            consumers=consumers,
            origin_index=origin_index,
            limits=self._limits,
            trace_parent=propagation.current(),
        )
        wake = await (wake_set or self._wake_set)(args.consumers)
        refuse_log_targets(args.events, wake)
        return args, wake

    async def read(
        self,
        session_id: str,
        *,
        after: int | None = None,
        through: int | None = None,
        types: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        """Stored events of the session in index order, from its clear marker on: those
        after ``after`` and through ``through``, of ``types``, at most ``limit``."""
        self._check_open()
        args = check_read(
            session_id, after=after, through=through, types=types, limit=limit, limits=self._limits
        )
        return await self._read(args)

    async def wake_log(self, session_id: str, consumer: Consumer) -> WakeLogResult:
        """Brings a log consumer's cursor up to date, creating it as an append would; a
        session with nothing after its clear marker and no cursor gets an idle, unstored
        cursor at the marker."""
        self._check_open()
        return await self._wake_log(check_wake_log(session_id, consumer, limits=self._limits))

    async def cursors(self, session_id: str) -> list[Cursor]:
        """Every cursor of the session, by consumer then lane."""
        self._check_open()
        return await self._list_cursors(check_session(session_id, limits=self._limits))

    async def sessions(self, *, after: str | None = None, limit: int = 100) -> list[SessionInfo]:
        """Sessions by id after ``after``, for listings."""
        self._check_open()
        return await self._list_sessions(
            check_sessions(after=after, limit=limit, limits=self._limits)
        )

    # -- claims ----------------------------------------------------------------------------

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
        """Claims the session's claimable heads for ``holder`` for ``ttl`` seconds, each
        at a new attempt number (``Claimed``); else ``Busy`` (when the earliest held or
        backing-off head frees) or ``Settled`` (nothing left for these consumers)."""
        self._check_open()
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
        return await self._claim_available(args, await self._wake_set(args.consumers))

    async def claim_any(
        self,
        *,
        holder: str,
        ttl: float,
        consumers: Sequence[Consumer] | None = None,
        limit: int = 10,
        max_failures: int | None = None,
    ) -> list[Head]:
        """The oldest ready heads of every session (of ``consumers``, when named), at most
        ``limit``, claimed for ``holder``: what another worker claims meanwhile is
        skipped, never claimed twice."""
        self._check_open()
        args = check_claim_any(
            holder=holder,
            ttl=ttl,
            consumers=consumers,
            limit=limit,
            max_failures=max_failures,
            limits=self._limits,
        )
        return await self._claim_any(args)

    async def next_due_in(self, *, consumers: Sequence[Consumer] | None = None) -> float | None:
        """Seconds (by the store's clock) until the soonest head of ``consumers`` (None: all)
        that is not claimable now may become so: a delayed target's or a backoff's due
        time, or a lease's end. None when there is none. An idle worker sleeps no longer
        than this, so delayed work starts when it is due, not at the next poll."""
        self._check_open()
        return await self._next_due_in(check_next_due(consumers, limits=self._limits))

    async def renew_claims(
        self, session_id: str, *, holder: str, claims: Sequence[AttemptRef], ttl: float
    ) -> RenewResult:
        """Extends the leases ``holder`` still holds by ``ttl`` seconds from now; says
        which it no longer holds."""
        self._check_open()
        args = check_renew_claims(
            session_id, holder=holder, claims=claims, ttl=ttl, limits=self._limits
        )
        return await self._renew_claims(args)

    async def release_claims(
        self, session_id: str, *, holder: str, claims: Sequence[AttemptRef]
    ) -> ReleaseResult:
        """Hands claims back (a worker shutting down): claimable again at once, with no
        failure counted; the released attempt is fenced out like a lapsed one."""
        self._check_open()
        args = check_release_claims(session_id, holder=holder, claims=claims, limits=self._limits)
        return await self._release_claims(args)

    # -- outcomes of attempts --------------------------------------------------------------

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
        """Completes a live attempt: moves its cursor past the head and appends the
        handler's ``events`` in the same commit. A superseded attempt writes nothing; a
        repeat of a completion already made answers as it did. The events store the current
        span's trace context, as an append's do (``Completion.trace_parent``)."""
        trace_parent = propagation.current() if events else None
        completion = Completion(
            session_id, consumer, lane, index, attempt, events, consumers, trace_parent
        )
        return (await self.complete_attempts([completion]))[0]

    async def complete_attempts(self, completions: Sequence[Completion]) -> list[CompleteResult]:
        """Judges each completion like ``complete_attempt``, all in one commit: any error
        leaves nothing written; streams and wakeups hear only of whole batches."""
        self._check_open()
        checked = await _checked(check_complete_attempts, completions, limits=self._limits)
        items = await self._items(checked)
        if not items:
            return []
        return await self._complete_attempts(items)

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
        self._check_open()
        args = await _checked(
            check_complete_and_claim,
            completions,
            holder=holder,
            ttl=ttl,
            consumers=consumers,
            limit=limit,
            max_failures=max_failures,
            limits=self._limits,
        )
        return await self._complete_and_claim(await self._items(args.completions), args.claim)

    async def _items(self, checked: list[CompletionArgs]) -> list[CompletionItem]:
        """Each checked completion with its wake set; log targets among them refused (all
        before anything is written)."""
        items = []
        for args in checked:
            wake = await self._wake_set(args.completion.consumers)
            refuse_log_targets(args.events, wake)
            items.append(CompletionItem(args, wake))
        return items

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
        """Records a failure of a live attempt: the head backs off (``retry_after``
        seconds, else the store's backoff) or, at ``max_failures``, is dead-lettered.
        Repeating the same call answers as the first did."""
        self._check_open()
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
        return await self._fail_attempt(args)

    async def dead_letters(self, session_id: str) -> list[Head]:
        """The session's dead-lettered heads above its clear marker."""
        self._check_open()
        return await self._dead_letters(check_session(session_id, limits=self._limits))

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
        """Retries or skips a dead-lettered head (False when there is none above the clear):
        the consumer's at ``index`` on ``lane`` (``None``: its event cursor), or when no
        ``lane`` is given the one ``dead_letters`` lists first."""
        self._check_open()
        args = check_redrive(
            session_id,
            consumer=consumer,
            index=index,
            action=action,
            consumers=consumers,
            lane=lane,
            limits=self._limits,
        )
        return await self._redrive(args, await self._wake_set(args.consumers))

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
        """Takes a live head (pending, backing off, delayed or claimed) out of the way:
        ``"skip"`` moves its cursor on as a completion returning no events would (the lane
        goes on), ``"dead_letter"`` dead-letters it now (``redrive`` can bring it back).
        Not cancelled when the consumer has no live head at ``index`` above the clear on
        ``lane`` (``ANY_LANE``: the first ``cursors`` lists; ``None``: its event cursor).

        A claimed head's attempt is fenced out at once: its completion, failure and
        renewals are superseded. After a skip its cursor's next head waits until that
        attempt's lease would have lapsed (``held_until``): never two heads of a lane at
        once."""
        self._check_open()
        args = check_cancel_head(
            session_id,
            consumer=consumer,
            index=index,
            action=action,
            consumers=consumers,
            lane=lane,
            limits=self._limits,
        )
        return await self._cancel_head(args, await self._wake_set(args.consumers))

    async def attempts(
        self,
        session_id: str,
        *,
        consumer: str,
        index: int,
        lane: str | AnyLane | None = ANY_LANE,
    ) -> list[AttemptRecord]:
        """The attempt history of the consumer's head at ``index``: every finished attempt
        (completed, failed, dead-lettered, released, lapsed, cancelled), by attempt number,
        of the cursor ``lane`` names (``ANY_LANE``: all of the consumer's at that index).
        An attempt still running is not in it: it is the head's dispatch (``cursors``)."""
        self._check_open()
        args = check_attempts(
            session_id, consumer=consumer, index=index, lane=lane, limits=self._limits
        )
        return await self._attempts(args)

    async def activity(self, *, since: datetime, bucket: float = 60.0) -> list[ActivityPoint]:
        """Per consumer and per ``bucket`` seconds since ``since``: the attempts that ended,
        by outcome, and their mean and longest duration, from the attempt history (so a
        restarted dashboard still shows the past), by consumer then time. Buckets with no
        attempt are left out."""
        self._check_open()
        return await self._activity(check_activity(since=since, bucket=bucket))

    async def prune_attempts(self, *, before: datetime, limit: int = 10_000) -> int:
        """Deletes up to ``limit`` attempts that ended before ``before`` (oldest first), the
        attempt history's retention; returns how many. Call it until it returns less than
        ``limit`` (``a2pg prune-attempts --older-than``)."""
        self._check_open()
        return await self._prune_attempts(check_prune_attempts(before=before, limit=limit))

    # -- state snapshots -------------------------------------------------------------------

    async def read_state(
        self, session_id: str, reducer: str, *, through: int | None = None
    ) -> StateRead:
        """The newest snapshot of ``reducer`` at or below ``through`` (default: the head)
        and the events after it, to fold from."""
        self._check_open()
        args = check_read_state(session_id, reducer, through=through, limits=self._limits)
        return await self._read_state(args)

    async def put_snapshots(
        self, session_id: str, reducer: str, writes: Sequence[SnapshotWrite]
    ) -> None:
        """Caches folds of ``reducer``, each pinned by the heads that still need it; writes
        below the clear marker are ignored, one past the head is ``INVALID_ARGUMENT``."""
        self._check_open()
        args = await _checked(check_put_snapshots, session_id, reducer, writes, limits=self._limits)
        if args.writes:
            await self._put_snapshots(args)

    # -- clear and reclaim -----------------------------------------------------------------

    async def clear(
        self,
        session_id: str,
        *,
        if_last_index: int | None = None,
        cause: AttemptRef | None = None,
    ) -> ClearResult:
        """Appends the session's clear marker: what lies below it is history, its heads
        are parked. ``if_last_index`` makes it conditional (and idempotent)."""
        self._check_open()
        args = check_clear(
            session_id, if_last_index=if_last_index, cause=cause, limits=self._limits
        )
        return await self._clear(args)

    async def reclaim(self, session_id: str) -> ReclaimResult:
        """Deletes a batch of the events below the session's clear marker (``done`` once
        none remain, and the snapshots below it with the last batch)."""
        self._check_open()
        return await self._reclaim(check_session(session_id, limits=self._limits))

    # -- consumer registry -----------------------------------------------------------------

    async def register_consumers(self, consumers: Sequence[Consumer]) -> None:
        """Stores each log consumer's spec (targeted ones are ignored). Cursors take a new
        spec's types at their session's next write naming no consumers."""
        self._check_open()
        await self._register_consumers(check_register_consumers(consumers, limits=self._limits))

    async def unregister_consumers(self, names: Sequence[str]) -> None:
        """Stops waking these consumers; their cursors stay."""
        self._check_open()
        await self._unregister_consumers(check_unregister_consumers(names, limits=self._limits))

    async def pause_consumers(self, names: Sequence[str]) -> None:
        """Pauses these consumers, targeted or log, registered or not: from the next claim
        on, by any worker, no claim takes their heads. Their cursors stay where they are,
        and attempts already claimed still complete, fail, renew and release. Pausing a
        paused consumer keeps the time it was first paused."""
        self._check_open()
        checked = check_pause_consumers(names, limits=self._limits)
        if checked:
            await self._pause_consumers(checked)

    async def resume_consumers(self, names: Sequence[str]) -> None:
        """Ends these consumers' pause: their ready heads are claimable at once, and wakeups
        announce the sessions holding them. Resuming one not paused does nothing."""
        self._check_open()
        checked = check_resume_consumers(names, limits=self._limits)
        if checked:
            await self._resume_consumers(checked)

    async def backfill(self, consumer: str, *, limit: int = 100) -> BackfillProgress | None:
        """One batch of a registered log consumer's backfill: brings the cursors of the next
        ``limit`` sessions (by id, after the recorded progress) into being, as ``wake_log``
        does, and records the progress in the registry. None when the consumer is not
        registered with ``backfill``; a finished backfill is returned as it is.

        Registering a log consumer with ``backfill`` (new, or with another lane, types or
        flag) starts its backfill (``rules.backfill_restarts``); workers then call this
        until ``done_at`` is set. Each session is its own short transaction, and several
        callers at once are safe: waking a cursor twice changes nothing, and only one of
        them records each batch (the others find the progress moved and go on from it)."""
        self._check_open()
        args = check_backfill(consumer, limit=limit, limits=self._limits)
        state = await self._backfill_state(args.consumer)
        if state is None:
            return None
        spec, progress = state
        if progress.done_at is not None:
            return progress
        page = await self._list_sessions(SessionsArgs(progress.after, args.limit))
        log = cast(LogSpec, spec.log)
        for info in page:
            # A targeted lane cursor holding the log's lane there: no log cursor can be.
            with contextlib.suppress(InvalidArgument):
                await self._wake_log(WakeLogArgs(info.session_id, spec, log))
        after = page[-1].session_id if page else progress.after
        return await self._record_backfill(
            args.consumer, progress, after=after, sessions=len(page), done=len(page) < args.limit
        )

    async def registered_consumers(self) -> list[Consumer]:
        """The registered log consumers, by name."""
        self._check_open()
        return await self._registered_consumers()

    # -- monitoring ------------------------------------------------------------------------

    async def find_dead_letters(self, query: DeadLetterQuery) -> list[Head]:
        """Dead-lettered heads of every session matching ``query``, one keyset page."""
        self._check_open()
        return await self._find_dead_letters(check_find_dead_letters(query, limits=self._limits))

    async def find_heads(self, query: HeadQuery) -> list[FoundHead]:
        """Live heads of every session in ``query.state`` (ready, held, backing off,
        scheduled) matching its filters, one keyset page in claim order, oldest first."""
        self._check_open()
        return await self._find_heads(check_find_heads(query, limits=self._limits))

    async def consumer_stats(self) -> list[ConsumerStats]:
        """Per consumer (registered or holding heads), by name: what monitoring shows."""
        self._check_open()
        return await self._consumer_stats()

    async def heartbeat(self, beat: WorkerBeat) -> None:
        """Records that ``beat.holder`` is alive now (insert or replace its row)."""
        self._check_open()
        await self._heartbeat(check_heartbeat(beat, limits=self._limits))

    async def forget_workers(self, holders: Sequence[str]) -> None:
        """Drops these workers' rows (a worker forgets itself when it stops cleanly)."""
        self._check_open()
        checked = check_forget_workers(holders, limits=self._limits)
        if checked:
            await self._forget_workers(checked)

    async def workers(self) -> list[WorkerInfo]:
        """Every worker row by holder, stale ones included (see ``WorkerInfo.stale``)."""
        self._check_open()
        return await self._list_workers()

    async def record_audit(self, entry: AuditEntry) -> AuditEntry:
        """Records one operator action in the audit log (the dashboard and the CLI call it
        after each action they run); returns it as stored, with the ``id`` (a time-ordered
        id from the store's id generator) and ``at`` (the store's clock) it was given."""
        self._check_open()
        return await self._record_audit(check_record_audit(entry, limits=self._limits))

    async def audit_log(self, *, after: str | None = None, limit: int = 100) -> list[AuditEntry]:
        """Audit entries newest first (by ``at``, then ``id``), at most ``limit``: those
        older than the entry whose id is ``after`` (the last of the previous page); an
        ``after`` naming no entry gives an empty page."""
        self._check_open()
        return await self._audit_log(check_audit_log(after=after, limit=limit, limits=self._limits))

    # -- live feeds ------------------------------------------------------------------------

    def stream(self, session_id: str, *, after: int = 0) -> AsyncIterator[StoredEvent]:
        """Stored events after ``after``, then live ones as they commit, in index order: no
        gaps, no duplicates; ends when the consumer closes it or the store closes.

        It starts at the clear marker at the latest; from there it delivers every event,
        so events committed before a clear it has not caught up with still come, then
        the marker (unless reclaim deleted them first).
        """
        args = check_stream(session_id, after=after, limits=self._limits)
        started = False

        async def read_after(last: int) -> list[StoredEvent]:
            nonlocal started
            batch = await self._stream_batch(args.session_id, last, visible=not started)
            started = True
            return batch

        return self._feed.stream(args.session_id, args.after, read_after)

    def wakeups(self) -> Subscription:
        """Session ids where claimable work may have appeared (None when unknown): heads
        made by appends, completions, log wakes, redrives and failures claimable at once,
        from this store and (where the backend hears them) other processes. Lease and
        backoff expiries are found by polling; subscribed from the call on."""
        return self._feed.wakeups()

    # -- the hooks a backend implements ----------------------------------------------------
    # Each takes checked arguments; the wake sets are resolved and log targets refused.

    @abstractmethod
    async def _wake_set(self, consumers: Sequence[Consumer] | None) -> Sequence[Consumer]:
        """The log consumers a write wakes: those named, else the registered ones."""

    @abstractmethod
    async def _append(self, args: AppendArgs, wake: Sequence[Consumer]) -> AppendResult: ...

    @abstractmethod
    async def _read(self, args: ReadArgs) -> list[StoredEvent]: ...

    @abstractmethod
    async def _wake_log(self, args: WakeLogArgs) -> WakeLogResult: ...

    @abstractmethod
    async def _list_cursors(self, session_id: str) -> list[Cursor]: ...

    @abstractmethod
    async def _list_sessions(self, args: SessionsArgs) -> list[SessionInfo]: ...

    @abstractmethod
    async def _claim_available(self, args: ClaimArgs, wake: Sequence[Consumer]) -> ClaimResult: ...

    @abstractmethod
    async def _claim_any(self, args: ClaimAnyArgs) -> list[Head]: ...

    @abstractmethod
    async def _next_due_in(self, consumers: Sequence[Consumer] | None) -> float | None: ...

    @abstractmethod
    async def _renew_claims(self, args: HeldClaimsArgs) -> RenewResult: ...

    @abstractmethod
    async def _release_claims(self, args: HeldClaimsArgs) -> ReleaseResult: ...

    @abstractmethod
    async def _complete_attempts(self, items: list[CompletionItem]) -> list[CompleteResult]:
        """At least one item."""

    @abstractmethod
    async def _complete_and_claim(
        self, items: list[CompletionItem], claim: ClaimAnyArgs
    ) -> CompletedAndClaimed: ...

    @abstractmethod
    async def _fail_attempt(self, args: FailArgs) -> FailResult: ...

    @abstractmethod
    async def _dead_letters(self, session_id: str) -> list[Head]: ...

    @abstractmethod
    async def _redrive(self, args: RedriveArgs, wake: Sequence[Consumer]) -> RedriveResult: ...

    @abstractmethod
    async def _cancel_head(self, args: CancelArgs, wake: Sequence[Consumer]) -> CancelResult: ...

    @abstractmethod
    async def _attempts(self, args: AttemptsArgs) -> list[AttemptRecord]: ...

    @abstractmethod
    async def _prune_attempts(self, args: PruneAttemptsArgs) -> int: ...

    @abstractmethod
    async def _activity(self, args: ActivityArgs) -> list[ActivityPoint]: ...

    @abstractmethod
    async def _read_state(self, args: ReadStateArgs) -> StateRead: ...

    @abstractmethod
    async def _put_snapshots(self, args: PutSnapshotsArgs) -> None:
        """At least one write."""

    @abstractmethod
    async def _clear(self, args: ClearArgs) -> ClearResult: ...

    @abstractmethod
    async def _reclaim(self, session_id: str) -> ReclaimResult: ...

    @abstractmethod
    async def _register_consumers(self, consumers: list[Consumer]) -> None:
        """Log consumers only (targeted ones were dropped by the check)."""

    @abstractmethod
    async def _unregister_consumers(self, names: list[str]) -> None: ...

    @abstractmethod
    async def _pause_consumers(self, names: list[str]) -> None:
        """At least one name, each once; the pause time is the store's clock's."""

    @abstractmethod
    async def _resume_consumers(self, names: list[str]) -> None:
        """At least one name, each once; announces the sessions where a resumed consumer
        has a ready head (to this store's wakeups, and to other processes' where the
        backend can)."""

    @abstractmethod
    async def _registered_consumers(self) -> list[Consumer]: ...

    @abstractmethod
    async def _backfill_state(self, name: str) -> tuple[Consumer, BackfillProgress] | None:
        """The registered spec of log consumer ``name`` and its backfill progress, when it
        is registered with ``backfill`` (else None)."""

    @abstractmethod
    async def _record_backfill(
        self,
        name: str,
        seen: BackfillProgress,
        *,
        after: str | None,
        sessions: int,
        done: bool,
    ) -> BackfillProgress | None:
        """Records a batch (``sessions`` more, the last one ``after``; ``done``: none remain,
        so ``done_at`` is the store's time now) only if the progress is still ``seen``
        (same ``started_at`` and ``after``); returns the progress as it is then (None once
        unregistered)."""

    @abstractmethod
    async def _find_dead_letters(self, query: DeadLetterQuery) -> list[Head]: ...

    @abstractmethod
    async def _find_heads(self, query: HeadQuery) -> list[FoundHead]: ...

    @abstractmethod
    async def _consumer_stats(self) -> list[ConsumerStats]: ...

    @abstractmethod
    async def _heartbeat(self, beat: WorkerBeat) -> None: ...

    @abstractmethod
    async def _forget_workers(self, holders: list[str]) -> None:
        """At least one holder."""

    @abstractmethod
    async def _list_workers(self) -> list[WorkerInfo]: ...

    @abstractmethod
    async def _record_audit(self, args: AuditArgs) -> AuditEntry:
        """Stores the entry with a new id and the store's time now; returns it so."""

    @abstractmethod
    async def _audit_log(self, args: AuditLogArgs) -> list[AuditEntry]: ...

    @abstractmethod
    async def _now(self) -> datetime:
        """The store's clock now (see ``store_time``)."""

    @abstractmethod
    async def _stream_batch(
        self, session_id: str, after: int, *, visible: bool
    ) -> list[StoredEvent]:
        """The next stored events after ``after`` (a bounded batch), for a stream;
        ``visible``: its first look, which starts at the clear marker at the latest."""


class StoreProxy(CheckedStore):
    """Another store behind this front: arguments are checked here, once, then each hook
    is the inner store's own. A wrapper that watches or changes some calls subclasses it
    and overrides those hooks (``PollingOnly``, ``run_until_idle``'s recorder)."""

    def __init__(self, inner: CheckedStore) -> None:
        if not isinstance(inner, CheckedStore):
            raise TypeError(f"a StoreProxy wraps an a2pg store, not {type(inner).__name__}")
        self.inner = inner
        self._limits = inner._limits
        self._feed = inner._feed

    def _check_open(self) -> None:
        """Closed when this proxy or the store behind it is."""
        if self._closed:
            raise store_closed()
        self.inner._check_open()

    @property
    def presence(self) -> Presence:
        self._check_open()
        return self.inner.presence

    async def close(self) -> None:
        self._closed = True
        await self.inner.close()

    async def _wake_set(self, consumers: Sequence[Consumer] | None) -> Sequence[Consumer]:
        return await self.inner._wake_set(consumers)

    async def _append(self, args: AppendArgs, wake: Sequence[Consumer]) -> AppendResult:
        return await self.inner._append(args, wake)

    async def _read(self, args: ReadArgs) -> list[StoredEvent]:
        return await self.inner._read(args)

    async def _wake_log(self, args: WakeLogArgs) -> WakeLogResult:
        return await self.inner._wake_log(args)

    async def _list_cursors(self, session_id: str) -> list[Cursor]:
        return await self.inner._list_cursors(session_id)

    async def _list_sessions(self, args: SessionsArgs) -> list[SessionInfo]:
        return await self.inner._list_sessions(args)

    async def _claim_available(self, args: ClaimArgs, wake: Sequence[Consumer]) -> ClaimResult:
        return await self.inner._claim_available(args, wake)

    async def _claim_any(self, args: ClaimAnyArgs) -> list[Head]:
        return await self.inner._claim_any(args)

    async def _renew_claims(self, args: HeldClaimsArgs) -> RenewResult:
        return await self.inner._renew_claims(args)

    async def _release_claims(self, args: HeldClaimsArgs) -> ReleaseResult:
        return await self.inner._release_claims(args)

    async def _complete_attempts(self, items: list[CompletionItem]) -> list[CompleteResult]:
        return await self.inner._complete_attempts(items)

    async def _complete_and_claim(
        self, items: list[CompletionItem], claim: ClaimAnyArgs
    ) -> CompletedAndClaimed:
        return await self.inner._complete_and_claim(items, claim)

    async def _fail_attempt(self, args: FailArgs) -> FailResult:
        return await self.inner._fail_attempt(args)

    async def _dead_letters(self, session_id: str) -> list[Head]:
        return await self.inner._dead_letters(session_id)

    async def _redrive(self, args: RedriveArgs, wake: Sequence[Consumer]) -> RedriveResult:
        return await self.inner._redrive(args, wake)

    async def _cancel_head(self, args: CancelArgs, wake: Sequence[Consumer]) -> CancelResult:
        return await self.inner._cancel_head(args, wake)

    async def _next_due_in(self, consumers: Sequence[Consumer] | None) -> float | None:
        return await self.inner._next_due_in(consumers)

    async def _attempts(self, args: AttemptsArgs) -> list[AttemptRecord]:
        return await self.inner._attempts(args)

    async def _prune_attempts(self, args: PruneAttemptsArgs) -> int:
        return await self.inner._prune_attempts(args)

    async def _activity(self, args: ActivityArgs) -> list[ActivityPoint]:
        return await self.inner._activity(args)

    async def _read_state(self, args: ReadStateArgs) -> StateRead:
        return await self.inner._read_state(args)

    async def _put_snapshots(self, args: PutSnapshotsArgs) -> None:
        await self.inner._put_snapshots(args)

    async def _clear(self, args: ClearArgs) -> ClearResult:
        return await self.inner._clear(args)

    async def _reclaim(self, session_id: str) -> ReclaimResult:
        return await self.inner._reclaim(session_id)

    async def _register_consumers(self, consumers: list[Consumer]) -> None:
        await self.inner._register_consumers(consumers)

    async def _unregister_consumers(self, names: list[str]) -> None:
        await self.inner._unregister_consumers(names)

    async def _pause_consumers(self, names: list[str]) -> None:
        await self.inner._pause_consumers(names)

    async def _resume_consumers(self, names: list[str]) -> None:
        await self.inner._resume_consumers(names)

    async def _registered_consumers(self) -> list[Consumer]:
        return await self.inner._registered_consumers()

    async def _backfill_state(self, name: str) -> tuple[Consumer, BackfillProgress] | None:
        return await self.inner._backfill_state(name)

    async def _record_backfill(
        self,
        name: str,
        seen: BackfillProgress,
        *,
        after: str | None,
        sessions: int,
        done: bool,
    ) -> BackfillProgress | None:
        return await self.inner._record_backfill(
            name, seen, after=after, sessions=sessions, done=done
        )

    async def _find_dead_letters(self, query: DeadLetterQuery) -> list[Head]:
        return await self.inner._find_dead_letters(query)

    async def _find_heads(self, query: HeadQuery) -> list[FoundHead]:
        return await self.inner._find_heads(query)

    async def _consumer_stats(self) -> list[ConsumerStats]:
        return await self.inner._consumer_stats()

    async def _heartbeat(self, beat: WorkerBeat) -> None:
        await self.inner._heartbeat(beat)

    async def _forget_workers(self, holders: list[str]) -> None:
        await self.inner._forget_workers(holders)

    async def _list_workers(self) -> list[WorkerInfo]:
        return await self.inner._list_workers()

    async def _record_audit(self, args: AuditArgs) -> AuditEntry:
        return await self.inner._record_audit(args)

    async def _audit_log(self, args: AuditLogArgs) -> list[AuditEntry]:
        return await self.inner._audit_log(args)

    async def _now(self) -> datetime:
        return await self.inner._now()

    async def _stream_batch(
        self, session_id: str, after: int, *, visible: bool
    ) -> list[StoredEvent]:
        return await self.inner._stream_batch(session_id, after, visible=visible)
