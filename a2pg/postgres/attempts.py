"""Claims and attempts on PostgreSQL: claim, renew, complete, fail, dead letters, redrive."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from psycopg import errors as pg
from psycopg.rows import DictRow

from .. import validation as check
from ..errors import invalid
from ..models import (
    AttemptRef,
    Busy,
    Claimed,
    ClaimRef,
    ClaimResult,
    CompleteResult,
    Completion,
    Consumer,
    FailOutcome,
    FailResult,
    Head,
    NewEvent,
    RedriveAction,
    RedriveResult,
    ReleaseResult,
    RenewResult,
    Settled,
)
from . import codec, queries
from .base import MAX_INDEX, Committed, Conn, Finish, StoreBase, execute, finished
from .completions import Item, complete_batch, complete_fenced, fits_fast_path, missed_fence
from .queries import query
from .writes import columns, push


def names_of(consumers: Sequence[Consumer] | None) -> list[str] | None:
    """The served consumers as a SQL filter: None serves every consumer."""
    return None if consumers is None else [consumer.name for consumer in consumers]


class AttemptsMixin(StoreBase):
    """The claim and attempt operations of ``PostgresStore``."""

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
        """Claims every eligible head of the session in one round trip: session lock, type
        refresh, the claim, and the Busy/Settled answer travel together."""
        check.check_session_id(session_id, self._limits)
        holder = check.check_holder(holder, self._limits)
        ttl = check.check_seconds(ttl, "ttl")
        refs = [check.check_claim_ref(ref, "exclude", self._limits) for ref in exclude]
        consumers = self._checked_consumers(consumers)
        if max_failures is not None:
            check.check_positive_count(max_failures, "max_failures")
        through = check.check_optional_bound(through, "through")
        wake = await self._wake_set(consumers)
        excluded = columns("ex_consumers", "ex_keys", "ex_idxs")
        for ref in refs:
            push(excluded, ref.consumer, codec.cursor_key(ref.lane, ref.index), ref.index)
        params: dict[str, Any] = {
            "session_id": session_id,
            "now": self._now_param(),
            "holder": holder,
            "ttl": timedelta(seconds=ttl),
            "max_failures": max_failures,
            "through": None if through is None else min(through, MAX_INDEX),
            "names": names_of(consumers),
            **excluded,
        }

        async def body(conn: Conn, committed: Committed) -> Finish[ClaimResult]:
            locked = await execute(conn, query("lock_sessions"), {"session_ids": [session_id]})
            refresh = columns("session_ids", "consumers", "keys", "types")
            for consumer in wake:
                if consumer.log is not None:
                    key = codec.cursor_key(consumer.log.lane, 0)
                    push(
                        refresh,
                        session_id,
                        consumer.name,
                        key,
                        codec.types_json(consumer.log.types),
                    )
            if refresh["keys"]:
                await execute(conn, query("refresh_log_types"), refresh)
            claimed = await execute(conn, query("claim_session"), params)
            busy = await execute(conn, query("busy_until"), params)

            async def finish() -> ClaimResult:
                session = await locked.fetchone()
                heads = [codec.head(row) for row in await claimed.fetchall()]
                if session is None:
                    return Settled()
                if heads:
                    return Claimed(heads, int(session["head"]))
                row = await busy.fetchone()
                retry_at = None if row is None else row["retry_at"]
                return Settled() if retry_at is None else Busy(codec.utc(retry_at))

            return finish

        return await self._write(body, idempotent=False)

    async def claim_any(
        self,
        *,
        holder: str,
        ttl: float,
        consumers: Sequence[Consumer] | None = None,
        limit: int = 10,
        max_failures: int | None = None,
    ) -> list[Head]:
        """The oldest ready heads of every session: one autocommit statement, SKIP LOCKED.

        Its LIMIT is a literal, one statement text per limit: a bound LIMIT would let a
        generic plan (psycopg prepares a statement after a few runs) leave the ready_at
        index for a scan of every ready head. No other parameter shapes the plan (the
        ready_at bound comes from an InitPlan, unknown at planning even in a custom
        plan), so the prepared, generic plan is the custom one; a test forces a generic
        plan and checks the index range scan.
        """
        holder = check.check_holder(holder, self._limits)
        ttl = check.check_seconds(ttl, "ttl")
        consumers = self._checked_consumers(consumers)
        check.check_positive_count(limit, "limit")
        if max_failures is not None:
            check.check_positive_count(max_failures, "max_failures")
        params = {
            "now": self._now_param(),
            "holder": holder,
            "ttl": timedelta(seconds=ttl),
            "max_failures": max_failures,
            "names": names_of(consumers),
        }

        rows = await self._autocommit(queries.claim_any(limit), params, idempotent=False)
        return [codec.head(row) for row in rows]

    async def renew_claims(
        self, session_id: str, *, holder: str, claims: Sequence[AttemptRef], ttl: float
    ) -> RenewResult:
        """Extends live claims of ``holder`` (one round trip); heads that moved on, were
        cleared or re-attempted are superseded; heads not reached yet are neither."""
        check.check_session_id(session_id, self._limits)
        holder = check.check_holder(holder, self._limits)
        refs = [check.check_attempt_ref(ref, "claim", self._limits) for ref in claims]
        ttl = check.check_seconds(ttl, "ttl")
        keys = columns("session_ids", "consumers", "keys")
        renew = columns("consumers", "keys", "idxs", "attempts")
        for ref in refs:
            key = codec.cursor_key(ref.lane, ref.index)
            push(keys, session_id, ref.consumer, key)
            push(renew, ref.consumer, key, ref.index, ref.attempt)

        async def body(conn: Conn, committed: Committed) -> Finish[RenewResult]:
            locked = await execute(conn, query("lock_sessions"), {"session_ids": [session_id]})
            found = await execute(conn, query("select_cursors"), keys)
            params = {
                "session_id": session_id,
                "holder": holder,
                "now": self._now_param(),
                "ttl": timedelta(seconds=ttl),
                **renew,
            }
            extended = await execute(conn, query("renew_claims"), params)

            async def finish() -> RenewResult:
                session = await locked.fetchone()
                clear_index = 0 if session is None else int(session["clear_index"])
                rows = {(r["consumer"], r["cursor_key"]): r for r in await found.fetchall()}
                done = {
                    (r["consumer"], r["cursor_key"], r["head"]) for r in await extended.fetchall()
                }
                return RenewResult(*judge_claims(refs, rows, done, clear_index))

            return finish

        return await self._write(body, idempotent=True)

    async def release_claims(
        self, session_id: str, *, holder: str, claims: Sequence[AttemptRef]
    ) -> ReleaseResult:
        """Hands claims of ``holder`` back, lapsed or not, without a failure (one round trip);
        judged like ``renew_claims``. Idempotent: a repeat finds nothing left to release."""
        check.check_session_id(session_id, self._limits)
        holder = check.check_holder(holder, self._limits)
        refs = [check.check_attempt_ref(ref, "claim", self._limits) for ref in claims]
        keys = columns("session_ids", "consumers", "keys")
        release = columns("consumers", "keys", "idxs", "attempts")
        for ref in refs:
            key = codec.cursor_key(ref.lane, ref.index)
            push(keys, session_id, ref.consumer, key)
            push(release, ref.consumer, key, ref.index, ref.attempt)
        params = {
            "session_id": session_id,
            "holder": holder,
            "now": self._now_param(),
            "channel": self._channel,
            **release,
        }

        async def body(conn: Conn, committed: Committed) -> Finish[ReleaseResult]:
            locked = await execute(conn, query("lock_sessions"), {"session_ids": [session_id]})
            released = await execute(conn, query("release_claims"), params)
            # Read after the release: the cursors as this transaction leaves them.
            found = await execute(conn, query("select_cursors"), keys)

            async def finish() -> ReleaseResult:
                session = await locked.fetchone()
                clear_index = 0 if session is None else int(session["clear_index"])
                rows = {(r["consumer"], r["cursor_key"]): r for r in await found.fetchall()}
                done = {
                    (r["consumer"], r["cursor_key"], r["head"]) for r in await released.fetchall()
                }
                if done:  # the statement notified other processes; this store hears it now
                    self._listener.work(session_id)
                return ReleaseResult(*judge_claims(refs, rows, done, clear_index))

            return finish

        return await self._write(body, idempotent=True)

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
        """Judges each completion like ``complete_attempt``, all in one transaction: one
        round trip when every completion is fresh and returns nothing, else two (see
        ``completions``). Any error leaves nothing written."""
        if isinstance(completions, str | bytes) or not isinstance(completions, Sequence):
            raise invalid("completions must be a sequence of Completion")
        items = []
        for completion in completions:
            completion = check.check_completion(completion, self._limits)
            wake = await self._wake_set(completion.consumers)
            names = check.log_consumer_names(wake)
            events = check.check_events(
                completion.events, self._limits, log_consumers=names, need_ids=True
            )
            items.append(Item(completion, wake, events))
        if not items:
            return []

        async def fast(conn: Conn, committed: Committed) -> Finish[list[CompleteResult]]:
            return await complete_fenced(self, conn, committed, items)

        async def judged(conn: Conn, committed: Committed) -> Finish[list[CompleteResult]]:
            return await complete_batch(self, conn, committed, items)

        if fits_fast_path(items):
            try:
                return await self._write(fast, idempotent=True)
            except pg.InvalidTextRepresentation as exc:
                if not missed_fence(exc):
                    raise
        return await self._write(judged, idempotent=True)

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
        """Records a failure; ``retry_after`` holds the head back meanwhile. Repeating the
        same call answers as the first did."""
        check.check_session_id(session_id, self._limits)
        ref = check.check_attempt_ref(AttemptRef(consumer, lane, index, attempt), "attempt")
        text = check.check_error_text(error, self._limits)
        check.check_positive_count(max_failures, "max_failures")
        if retry_after is not None:
            retry_after = check.check_seconds(retry_after, "retry_after")
        key = codec.cursor_key(lane, index)

        async def body(conn: Conn, committed: Committed) -> Finish[FailResult]:
            locked = await self._lock(conn, [session_id])
            found = await execute(
                conn,
                query("select_cursors"),
                {"session_ids": [session_id], "consumers": [consumer], "keys": [key]},
            )
            sessions, now = await locked.result()
            row = await found.fetchone()
            session = sessions.get(session_id)
            if session is not None and index <= session.clear_index:
                return finished(FailResult("superseded", 0))
            if session is None or index > session.head:
                raise invalid(f"no event at index {index} in session '{session_id}'")
            if row is None:
                return finished(FailResult("superseded", 0))
            result, write = judge_failure(row, ref, max_failures)
            if write is None:
                return finished(result)
            dead = result.outcome == "dead_lettered"
            retry_at = None if dead or retry_after is None else now + timedelta(seconds=retry_after)
            params = {
                "session_id": session_id,
                "consumer": consumer,
                "cursor_key": key,
                "idx": index,
                "attempt": attempt,
                "failure_count": write,
                "error": text,
                "now": now,
                "dead": dead,
                "retry_at": retry_at,
            }
            await execute(conn, query("fail_head"), params)
            plan = self._plan(now, sessions)
            if dead:
                plan.release(session_id, consumer, key, index)
            plan.touched.add(session_id)
            committed.notify = await plan.apply(conn, channel=self._channel)
            return finished(result)

        return await self._write(body, idempotent=True)

    async def dead_letters(self, session_id: str) -> list[Head]:
        check.check_session_id(session_id, self._limits)
        rows = await self._read("dead_letters", {"session_id": session_id})
        return [codec.head(row) for row in rows]

    async def redrive(
        self,
        session_id: str,
        *,
        consumer: str,
        index: int,
        action: RedriveAction,
        consumers: Sequence[Consumer] | None = None,
    ) -> RedriveResult:
        """Retries or skips a dead-lettered head (False when there is none above the clear)."""
        check.check_session_id(session_id, self._limits)
        check.check_name(consumer, "consumer name", self._limits)
        check.check_index(index)
        check.check_redrive_action(action)
        consumers = self._checked_consumers(consumers)
        wake = await self._wake_set(consumers)
        pending = {"session_id": session_id, "names": names_of(consumers)}

        async def body(conn: Conn, committed: Committed) -> Finish[RedriveResult]:
            locked = await self._lock(conn, [session_id])
            dead = await execute(
                conn,
                query("dead_head"),
                {"session_id": session_id, "consumer": consumer, "idx": index},
            )
            sessions, now = await locked.result()
            row = await dead.fetchone()
            session = sessions.get(session_id)
            redriven = session is not None and row is not None and index > session.clear_index
            if redriven:
                assert row is not None
                plan = self._plan(now, sessions)
                plan.refresh(session_id, wake)
                if action == "skip":
                    plan.finish(
                        session_id,
                        consumer=consumer,
                        lane=row["lane"],
                        kind=row["kind"],
                        index=index,
                        attempt=None,
                        ids=None,
                    )
                else:
                    retry = {
                        "session_id": session_id,
                        "consumer": consumer,
                        "cursor_key": row["cursor_key"],
                        "idx": index,
                        "now": now,
                    }
                    await execute(conn, query("retry_head"), retry)
                plan.force_notify(session_id)
                committed.plan = plan
                committed.notify = await plan.apply(conn, channel=self._channel)
            has_pending = await execute(conn, query("has_pending"), pending)

            async def finish() -> RedriveResult:
                row = await has_pending.fetchone()
                return RedriveResult(redriven, bool(row and row["has_pending"]))

            return finish

        return await self._write(body, idempotent=False)


def judge_claims(
    refs: Sequence[AttemptRef],
    rows: dict[tuple[str, str], DictRow],
    done: set[tuple[str, str, int]],
    clear_index: int,
) -> tuple[list[ClaimRef], list[ClaimRef]]:
    """Sorts each claim of a renewal or a release into done (its row was written),
    superseded or neither (no I/O); ``rows`` are the claims' cursors by consumer and key."""
    written: list[ClaimRef] = []
    superseded: list[ClaimRef] = []
    for ref in sorted(refs, key=lambda r: (r.index, r.consumer, r.lane or "")):
        if ref.index <= clear_index:
            superseded.append(ref.ref)
            continue
        key = codec.cursor_key(ref.lane, ref.index)
        row = rows.get((ref.consumer, key))
        if row is None:
            continue
        head = row["head"]
        if head != ref.index and row["position"] < ref.index:
            continue
        if head != ref.index or row["attempt_count"] > ref.attempt:
            superseded.append(ref.ref)
        elif (ref.consumer, key, ref.index) in done:
            written.append(ref.ref)
    return written, superseded


def judge_failure(
    row: DictRow, ref: AttemptRef, max_failures: int
) -> tuple[FailResult, int | None]:
    """The outcome of a failure report, and the failure count to write (None: write nothing)."""
    count = int(row["failure_count"])
    holder = row["claim_holder"]
    if (
        row["head"] != ref.index
        or row["attempt_count"] != ref.attempt
        or (holder is None and row["last_failed_attempt"] != ref.attempt)
    ):
        return FailResult("superseded", count if row["head"] == ref.index else 0), None
    if holder is None:
        outcome: FailOutcome = "failed" if row["failed_at"] is None else "dead_lettered"
        return FailResult(outcome, count), None
    failures = count + 1
    dead = failures >= max_failures
    return FailResult("dead_lettered" if dead else "failed", failures), failures
