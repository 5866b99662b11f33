"""One rule per Store operation, with small, valid-or-nearly-valid arguments.

Arguments come from the universe and from what the stores showed: remembered attempts
(shifted to stale and not-yet-reached numbers), session heads and clear indexes, dead
letters. ``RULES`` names the Store member each rule drives; ``NOT_MODELLED`` says why the
others have none (``observe.OBSERVED``: those read after every step);
``tests/test_surface.py`` checks that together they cover ``Store``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import timedelta

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from a2pg import (
    ANY_LANE,
    AttemptRef,
    Claimed,
    CompleteResult,
    Completion,
    Consumer,
    DeadLetterKey,
    DeadLetterQuery,
    Head,
    NewEvent,
    SnapshotWrite,
    WorkerBeat,
)
from a2pg.models import JSON, WORK_STATES, AuditAction, AuditEntry, FoundHead, HeadQuery, WorkState
from a2pg.store import Store

from . import universe as u
from .machine import ModelMachine, Pick
from .pair import Ok


class StoreModel(ModelMachine):
    """Random operation sequences on MemoryStore (the reference) and a candidate backend."""

    # -- the log ---------------------------------------------------------------------------

    @initialize(
        first=st.lists(u.new_events, min_size=1, max_size=4),
        second=st.lists(u.new_events, max_size=4),
        consumers=u.declared,
    )
    def start_with_work(
        self, first: list[NewEvent], second: list[NewEvent], consumers: list[Consumer] | None
    ) -> None:
        """Every example starts with work claimed in both sessions, whichever rules it runs
        (hypothesis turns a random subset of rules off in each example)."""
        for session_id, events in zip(u.SESSIONS, (first, second), strict=True):
            self.append(session_id, events, consumers, None, None)
            self.claim_available(session_id, u.HOLDERS[0], 30.0, [], None, None, None)

    @rule(
        session_id=u.sessions,
        events=st.lists(u.new_events, min_size=1, max_size=3) | st.just([]),
        consumers=u.declared,
        cause=u.causes,
        origin=st.none() | st.sampled_from((0, 1, -1)),
    )
    def append(
        self,
        session_id: str,
        events: list[NewEvent],
        consumers: list[Consumer] | None,
        cause: Pick | None,
        origin: int | None,
    ) -> None:
        """``origin`` is relative to the clear index, ``cause`` a remembered attempt."""
        if cause is not None:
            ref = self.attempt(cause, session_id)[1]
            events = [NewEvent(e.type, e.payload, e.id, ref, e.targets) for e in events]
        origin_index = None if origin is None else self.info(session_id).clear_index + origin
        self.both(
            "append",
            lambda s: s.append(
                session_id, events, consumers=consumers, origin_index=origin_index or None
            ),
        )

    @rule(
        session_id=u.sessions,
        events=st.lists(u.events_with_ids, min_size=1, max_size=2),
        consumers=u.declared,
    )
    def append_with_ids(
        self, session_id: str, events: list[NewEvent], consumers: list[Consumer] | None
    ) -> None:
        """Supplied ids only: replays, conflicts, partial duplicates, ids reused after a clear."""
        self.append(session_id, events, consumers, None, None)

    @rule(
        session_id=u.any_session,
        after=st.none() | st.integers(0, 6),
        through=st.none() | st.integers(0, 12),
        types=st.none() | st.lists(st.sampled_from(u.TYPES), max_size=2),
        limit=st.none() | st.integers(0, 3),
    )
    def read(
        self,
        session_id: str,
        after: int | None,
        through: int | None,
        types: list[str] | None,
        limit: int | None,
    ) -> None:
        self.both(
            "read",
            lambda s: s.read(session_id, after=after, through=through, types=types, limit=limit),
        )

    @rule(session_id=u.any_session, consumer=st.sampled_from(u.WAKE_LOG_CONSUMERS))
    def wake_log(self, session_id: str, consumer: Consumer) -> None:
        self.both("wake_log", lambda s: s.wake_log(session_id, consumer))

    @rule(after=st.sampled_from((None, "a", "b")), limit=st.sampled_from((100, 1)))
    def sessions(self, after: str | None, limit: int) -> None:
        self.both("sessions", lambda s: s.sessions(after=after, limit=limit))

    # -- claims ----------------------------------------------------------------------------

    @rule(
        session_id=u.any_session,
        holder=u.holders,
        ttl=u.ttls,
        exclude=st.lists(u.picks, max_size=2),
        consumers=u.served,
        max_failures=u.max_failures,
        back=st.none() | st.integers(0, 3),
    )
    def claim_available(
        self,
        session_id: str,
        holder: str,
        ttl: float,
        exclude: list[int],
        consumers: list[Consumer] | None,
        max_failures: int | None,
        back: int | None,
    ) -> None:
        """``exclude`` names remembered heads; ``through`` is ``back`` below the head."""
        excluded = [self.attempt((p, 0), session_id)[1].ref for p in exclude]
        through = None if back is None else max(0, self.info(session_id).head - back)
        result = self.both(
            "claim_available",
            lambda s: s.claim_available(
                session_id,
                holder=holder,
                ttl=ttl,
                exclude=excluded,
                consumers=consumers,
                max_failures=max_failures,
                through=through,
            ),
        )
        if isinstance(result, Ok) and isinstance(result.value, Claimed):
            self.remember(result.value.heads)

    @rule(
        holder=u.holders,
        ttl=u.ttls,
        consumers=u.served,
        limit=st.sampled_from((10, 1, 2)),
        max_failures=u.max_failures,
    )
    def claim_any(
        self,
        holder: str,
        ttl: float,
        consumers: list[Consumer] | None,
        limit: int,
        max_failures: int | None,
    ) -> None:
        result = self.both(
            "claim_any",
            lambda s: s.claim_any(
                holder=holder, ttl=ttl, consumers=consumers, limit=limit, max_failures=max_failures
            ),
        )
        if isinstance(result, Ok):
            self.remember(result.value)

    def held(self, session_id: str, picks: list[Pick]) -> list[AttemptRef]:
        """The claims a renew or release names."""
        return [self.attempt(pick, session_id)[1] for pick in picks]

    @precondition(ModelMachine.has_attempts)
    @rule(
        session_id=u.any_session,
        holder=u.holders,
        picks=st.lists(st.tuples(u.picks, u.deltas), max_size=3),
        ttl=u.ttls,
    )
    def renew_claims(self, session_id: str, holder: str, picks: list[Pick], ttl: float) -> None:
        claims = self.held(session_id, picks)
        self.both(
            "renew_claims",
            lambda s: s.renew_claims(session_id, holder=holder, claims=claims, ttl=ttl),
        )

    @precondition(ModelMachine.has_attempts)
    @rule(
        session_id=u.any_session,
        holder=u.holders,
        picks=st.lists(st.tuples(u.picks, u.deltas), max_size=3),
    )
    def release_claims(self, session_id: str, holder: str, picks: list[Pick]) -> None:
        claims = self.held(session_id, picks)
        self.both(
            "release_claims",
            lambda s: s.release_claims(session_id, holder=holder, claims=claims),
        )

    # -- outcomes of attempts --------------------------------------------------------------

    def completion(
        self, pick: Pick, events: list[NewEvent], consumers: list[Consumer] | None
    ) -> Completion:
        session_id, ref = self.attempt(pick)
        return Completion(
            session_id, ref.consumer, ref.lane, ref.index, ref.attempt, events, consumers
        )

    @precondition(ModelMachine.has_attempts)
    @rule(
        pick=st.tuples(u.picks, u.deltas),
        events=st.lists(u.returned_events, max_size=2),
        consumers=u.declared,
        past_head=st.sampled_from((False, False, False, False, True)),
    )
    def complete_attempt(
        self,
        pick: Pick,
        events: list[NewEvent],
        consumers: list[Consumer] | None,
        past_head: bool,
    ) -> None:
        """``past_head`` completes an index with no event yet."""
        c = self.completion(pick, events, consumers)
        index = self.info(c.session_id).head + 1 if past_head else c.index
        self.both(
            "complete_attempt",
            lambda s: s.complete_attempt(
                c.session_id,
                consumer=c.consumer,
                lane=c.lane,
                index=index,
                attempt=c.attempt,
                events=c.events,
                consumers=c.consumers,
            ),
        )

    @precondition(ModelMachine.has_attempts)
    @rule(batch=u.batches)
    def complete_attempts(self, batch: list[u.CompletionSpec]) -> None:
        completions = [self.completion(pick, events, declared) for pick, events, declared in batch]
        self.both("complete_attempts", batch_of(completions))

    @rule(
        batch=st.lists(u.completions, max_size=2),
        holder=u.holders,
        ttl=u.ttls,
        consumers=u.served,
        limit=st.sampled_from((10, 1, 2)),
        max_failures=u.max_failures,
    )
    def complete_and_claim(
        self,
        batch: list[u.CompletionSpec],
        holder: str,
        ttl: float,
        consumers: list[Consumer] | None,
        limit: int,
        max_failures: int | None,
    ) -> None:
        """A worker's cycle: completes remembered attempts (or none) and claims in one call."""
        completions = [self.completion(pick, events, declared) for pick, events, declared in batch]
        result = self.both(
            "complete_and_claim",
            lambda s: s.complete_and_claim(
                completions,
                holder=holder,
                ttl=ttl,
                consumers=consumers,
                limit=limit,
                max_failures=max_failures,
            ),
        )
        if isinstance(result, Ok):
            self.remember(result.value.heads)

    @precondition(ModelMachine.has_attempts)
    @rule(
        pick=st.tuples(u.picks, u.deltas),
        error=st.sampled_from(("boom", "bang")),
        max_failures=st.sampled_from((3, 1, 2)),
        retry_after=st.sampled_from((None, 5.0, 20.0)),
    )
    def fail_attempt(
        self, pick: Pick, error: str, max_failures: int, retry_after: float | None
    ) -> None:
        session_id, ref = self.attempt(pick)
        self.both(
            "fail_attempt",
            lambda s: s.fail_attempt(
                session_id,
                consumer=ref.consumer,
                lane=ref.lane,
                index=ref.index,
                attempt=ref.attempt,
                error=error,
                max_failures=max_failures,
                retry_after=retry_after,
            ),
        )

    @precondition(ModelMachine.has_cursors)
    @rule(
        session_id=u.any_session,
        pick=u.picks,
        skip=st.booleans(),
        consumers=u.declared,
        by_lane=st.booleans(),
    )
    def redrive(
        self,
        session_id: str,
        pick: int,
        skip: bool,
        consumers: list[Consumer] | None,
        by_lane: bool,
    ) -> None:
        """Names a dead letter when the session has any, else a live head; ``by_lane``
        passes its lane (``None`` for an event cursor), else no lane."""
        dead = [(h.consumer, h.lane, h.index) for h in self.dead_letters(session_id)]
        live = [
            (c.consumer, c.lane, c.head) for c in self.cursors(session_id) if c.head is not None
        ]
        candidates = dead or live or [(u.JOB, None, 1)]
        consumer, lane, index = candidates[pick % len(candidates)]
        self.both(
            "redrive",
            lambda s: s.redrive(
                session_id,
                consumer=consumer,
                index=index,
                action="skip" if skip else "retry",
                consumers=consumers,
                lane=lane if by_lane else ANY_LANE,
            ),
        )

    @precondition(ModelMachine.has_cursors)
    @rule(
        session_id=u.any_session,
        pick=u.picks,
        dead_letter=st.booleans(),
        consumers=u.declared,
        by_lane=st.booleans(),
    )
    def cancel_head(
        self,
        session_id: str,
        pick: int,
        dead_letter: bool,
        consumers: list[Consumer] | None,
        by_lane: bool,
    ) -> None:
        """Names a live head (claimed or not) when the session has any, else a dead one."""
        live = [
            (c.consumer, c.lane, c.head) for c in self.cursors(session_id) if c.head is not None
        ]
        candidates = live or [(u.JOB, None, 1)]
        consumer, lane, index = candidates[pick % len(candidates)]
        self.both(
            "cancel_head",
            lambda s: s.cancel_head(
                session_id,
                consumer=consumer,
                index=index,
                action="dead_letter" if dead_letter else "skip",
                consumers=consumers,
                lane=lane if by_lane else ANY_LANE,
            ),
        )

    @precondition(ModelMachine.has_cursors)
    @rule(session_id=u.any_session, pick=u.picks)
    def attempt_history(self, session_id: str, pick: int) -> None:
        """The finished attempts of a head the session has (or had)."""
        heads = [(c.consumer, c.head or c.position) for c in self.cursors(session_id)]
        consumer, index = heads[pick % len(heads)] if heads else (u.JOB, 1)
        self.both(
            "attempts", lambda s: s.attempts(session_id, consumer=consumer, index=max(index, 1))
        )

    @rule(seconds=st.sampled_from((0.0, 30.0, 3600.0)), limit=st.sampled_from((1, 100)))
    def prune_attempts(self, seconds: float, limit: int) -> None:
        """Prunes what ended more than ``seconds`` before the clock's now."""
        before = self.pair.clock() - timedelta(seconds=seconds)
        self.both("prune_attempts", lambda s: s.prune_attempts(before=before, limit=limit))

    @precondition(ModelMachine.has_dead_letters)
    @rule(
        consumer=st.sampled_from((None, u.JOB, u.LANE, u.AUDIT)),
        error=st.sampled_from(u.ERROR_FILTERS),
        prefix=st.sampled_from((None, *u.SESSIONS, u.NOWHERE)),
        after=st.none() | u.picks,
        limit=st.sampled_from((100, 1, 2)),
    )
    def find_dead_letters(
        self,
        consumer: str | None,
        error: str | None,
        prefix: str | None,
        after: int | None,
        limit: int,
    ) -> None:
        """Filtered pages (the observation reads the unfiltered first page), once there is
        a dead letter to find; ``after`` is the key of one the last observation listed."""
        dead: Sequence[Head] = self.seen("find_dead_letters()")
        key = None if after is None or not dead else DeadLetterKey.of(dead[after % len(dead)])
        query = DeadLetterQuery(consumer, error, prefix, key, limit)
        self.both("find_dead_letters", lambda s: s.find_dead_letters(query))

    @rule(
        state=st.sampled_from(WORK_STATES),
        consumer=st.sampled_from((None, u.JOB, u.LANE, u.AUDIT)),
        event_type=st.sampled_from((None, *u.TYPES)),
        error=st.sampled_from(u.ERROR_FILTERS),
        prefix=st.sampled_from((None, *u.SESSIONS, u.NOWHERE)),
        limit=st.sampled_from((100, 1, 2)),
        pages=st.integers(1, 3),
    )
    def find_heads(
        self,
        state: WorkState,
        consumer: str | None,
        event_type: str | None,
        error: str | None,
        prefix: str | None,
        limit: int,
        pages: int,
    ) -> None:
        """Filtered pages of the live heads in one state: the first, then up to ``pages``
        in all, each after the last key of the one before (as memory listed it)."""
        query = HeadQuery(state, consumer, event_type, error, prefix, None, limit)
        for _ in range(pages):
            found = self.both("find_heads", self._find_heads(query))
            if not isinstance(found, Ok) or not found.value:
                break
            query = replace(query, after=found.value[-1].key)

    @staticmethod
    def _find_heads(query: HeadQuery) -> Callable[[Store], Awaitable[list[FoundHead]]]:
        return lambda store: store.find_heads(query)

    # -- state snapshots -------------------------------------------------------------------

    @rule(
        session_id=u.any_session,
        reducer=st.sampled_from(u.REDUCERS),
        back=st.none() | st.integers(-1, 3),
    )
    def read_state(self, session_id: str, reducer: str, back: int | None) -> None:
        through = None if back is None else max(0, self.info(session_id).head - back)
        self.both("read_state", lambda s: s.read_state(session_id, reducer, through=through))

    @precondition(ModelMachine.has_events)
    @rule(
        session_id=u.sessions,
        reducer=st.sampled_from(u.REDUCERS),
        writes=st.lists(
            st.tuples(st.integers(-1, 3), u.PAYLOADS, st.lists(u.picks, max_size=2)),
            max_size=2,
        ),
    )
    def put_snapshots(
        self, session_id: str, reducer: str, writes: list[tuple[int, JSON, list[int]]]
    ) -> None:
        """Each write is ``back`` below the head (-1: past it) and pins remembered heads."""
        head = self.info(session_id).head
        snapshots = [
            SnapshotWrite(
                max(1, head - back),
                state,
                [self.attempt((p, 0), session_id)[1].ref for p in pins],
            )
            for back, state, pins in writes
        ]
        result = self.both(
            "put_snapshots", lambda s: s.put_snapshots(session_id, reducer, snapshots)
        )
        if isinstance(result, Ok):
            bounds = self.snapshot_bounds.setdefault((session_id, reducer), set())
            bounds.update(w.index for w in snapshots)

    # -- clear and reclaim -----------------------------------------------------------------

    @rule(
        session_id=u.sessions,
        back=st.none() | st.sampled_from((0, 1, -1)),
        cause=u.causes,
    )
    def clear(self, session_id: str, back: int | None, cause: Pick | None) -> None:
        """``if_last_index`` is ``back`` below the head; ``cause`` a remembered attempt."""
        if_last = None if back is None else max(0, self.info(session_id).head - back)
        ref = None if cause is None else self.attempt(cause, session_id)[1]
        self.both("clear", lambda s: s.clear(session_id, if_last_index=if_last, cause=ref))

    @precondition(ModelMachine.has_cleared)
    @rule(session_id=u.any_session)
    def reclaim(self, session_id: str) -> None:
        self.both("reclaim", lambda s: s.reclaim(session_id))

    # -- the registry ----------------------------------------------------------------------

    @rule(consumers=st.sampled_from(u.REGISTRATIONS))
    def register_consumers(self, consumers: list[Consumer]) -> None:
        self.both("register_consumers", lambda s: s.register_consumers(consumers))

    @rule(names=st.sampled_from(u.UNREGISTRATIONS))
    def unregister_consumers(self, names: list[str]) -> None:
        self.both("unregister_consumers", lambda s: s.unregister_consumers(names))

    @rule(names=st.sampled_from(u.PAUSES))
    def pause_consumers(self, names: list[str]) -> None:
        """Later claims of both stores must skip the same heads."""
        self.both("pause_consumers", lambda s: s.pause_consumers(names))

    @rule(names=st.sampled_from(u.PAUSES))
    def resume_consumers(self, names: list[str]) -> None:
        self.both("resume_consumers", lambda s: s.resume_consumers(names))

    @rule(
        name=st.sampled_from((u.AUDIT, u.FEED, "unknown")),
        limit=st.sampled_from((1, 2, 100)),
    )
    def backfill(self, name: str, limit: int) -> None:
        """A batch of a registered log consumer's backfill (None when it has none)."""
        self.both("backfill", lambda s: s.backfill(name, limit=limit))

    # -- workers ---------------------------------------------------------------------------

    @rule(
        holder=u.holders,
        process=st.sampled_from(u.PROCESSES),
        consumers=st.sampled_from(((), (u.JOB,), (u.JOB, u.LANE))),
        in_flight=st.integers(0, 3),
        interval=st.sampled_from((5.0, 10.0)),
        done=st.tuples(st.integers(0, 3), st.integers(0, 2)),
    )
    def heartbeat(
        self,
        holder: str,
        process: tuple[str, int],
        consumers: tuple[str, ...],
        in_flight: int,
        interval: float,
        done: tuple[int, int],
    ) -> None:
        """``started_at`` by the worker's own (skewed) clock: the stores keep theirs."""
        host, pid = process
        completed, failed = done
        started_at = self.pair.clock() - timedelta(hours=3)
        beat = WorkerBeat(
            holder=holder,
            host=host,
            pid=pid,
            consumers=consumers,
            concurrency=4,
            started_at=started_at,
            in_flight=in_flight,
            version="0.1.0",
            interval=interval,
            completed=completed,
            failed=failed,
        )
        self.both("heartbeat", lambda s: s.heartbeat(beat))

    @rule(holders=st.sampled_from(u.FORGETS))
    def forget_workers(self, holders: list[str]) -> None:
        self.both("forget_workers", lambda s: s.forget_workers(holders))

    # -- the audit log ---------------------------------------------------------------------

    @rule(
        actor=st.sampled_from(("ann", "cli:ops@box")),
        action=st.sampled_from(("redrive.retry", "pause", "clear")),
        session=st.sampled_from((None, u.SESSIONS[0])),
        detail=st.sampled_from(({}, {"matched": 2, "outcome": "redriven"})),
    )
    def record_audit(
        self, actor: str, action: AuditAction, session: str | None, detail: dict[str, JSON]
    ) -> None:
        """The same id (the step's generated one) and time on both stores."""
        entry = AuditEntry(actor, action, session_id=session, detail=detail)
        self.both("record_audit", lambda s: s.record_audit(entry))

    @rule(limit=st.sampled_from((1, 2, 100)))
    def audit_log(self, limit: int) -> None:
        """A page, then the page after its last entry (ties of time go by id)."""
        page = self.both("audit_log", lambda s: s.audit_log(limit=limit))
        if isinstance(page, Ok) and page.value:
            after = page.value[-1].id
            self.both("audit_log", lambda s: s.audit_log(after=after, limit=limit))

    # -- presence and the clock ------------------------------------------------------------

    @rule(
        participant=st.sampled_from(u.PARTICIPANTS),
        values=st.dictionaries(
            st.sampled_from(u.FIELDS), st.sampled_from((None, 1, "x")), max_size=2
        ),
        offset=st.sampled_from((0.0, -10.0, 10.0)),
        seen=st.sampled_from((None, 1)),
        ttl=st.sampled_from((5.0, 30.0)),
    )
    def presence_write(
        self, participant: str, values: dict[str, JSON], offset: float, seen: JSON, ttl: float
    ) -> None:
        """``at`` is ``offset`` seconds from now."""
        at = self.pair.clock() + timedelta(seconds=offset)
        self.both(
            "presence.write",
            lambda s: s.presence.write(u.NAMESPACE, participant, values, at=at, seen=seen, ttl=ttl),
        )

    @rule(ns=st.sampled_from((u.NAMESPACE, "other")))
    def presence_read(self, ns: str) -> None:
        self.both("presence.read", lambda s: s.presence.read(ns))

    @rule(seconds=st.sampled_from((1.0, 5.0, 10.0, 11.0, 30.0, 31.0, 60.0)))
    def advance_clock(self, seconds: float) -> None:
        self.pair.clock.advance(seconds)


def batch_of(completions: list[Completion]) -> Callable[[Store], Awaitable[list[CompleteResult]]]:
    async def call(store: Store) -> list[CompleteResult]:
        return await store.complete_attempts(completions)

    return call


RULES: dict[str, str | None] = {
    "append": "append",
    "append_with_ids": "append",
    "read": "read",
    "wake_log": "wake_log",
    "sessions": "sessions",
    "claim_available": "claim_available",
    "claim_any": "claim_any",
    "renew_claims": "renew_claims",
    "release_claims": "release_claims",
    "complete_attempt": "complete_attempt",
    "complete_attempts": "complete_attempts",
    "complete_and_claim": "complete_and_claim",
    "fail_attempt": "fail_attempt",
    "redrive": "redrive",
    "find_dead_letters": "find_dead_letters",
    "find_heads": "find_heads",
    "read_state": "read_state",
    "put_snapshots": "put_snapshots",
    "clear": "clear",
    "reclaim": "reclaim",
    "register_consumers": "register_consumers",
    "unregister_consumers": "unregister_consumers",
    "pause_consumers": "pause_consumers",
    "resume_consumers": "resume_consumers",
    "cancel_head": "cancel_head",
    "attempt_history": "attempts",
    "prune_attempts": "prune_attempts",
    "backfill": "backfill",
    "heartbeat": "heartbeat",
    "forget_workers": "forget_workers",
    "record_audit": "record_audit",
    "audit_log": "audit_log",
    "presence_write": "presence.write",
    "presence_read": "presence.read",
    "advance_clock": None,
}
"""Every rule of ``StoreModel`` and the Store member it calls (None: it moves the clock)."""

NOT_MODELLED: dict[str, str] = {
    "stream": (
        "live: it ends only when closed, so a step would have to guess how much to take; "
        "its stored part is ``read``'s, and catch-up and live delivery are "
        "tests/conformance/test_stream.py's"
    ),
    "wakeups": (
        "signals, not state: when a wakeup comes is timing, which differs by design "
        "(LISTEN, in-process); tests/conformance/test_wakeups.py"
    ),
    "close": "ends the store: no step can follow it",
    "activity": (
        "per-bucket means of float seconds each backend computes by its own arithmetic: "
        "tests/conformance/test_attempts.py checks it on every backend"
    ),
    "next_due_in": (
        "a float of seconds each backend computes by its own arithmetic (PostgreSQL's "
        "epoch in float8): tests/conformance/test_delayed.py checks it on every backend"
    ),
}
"""Store members with no rule and not observed, and why."""
