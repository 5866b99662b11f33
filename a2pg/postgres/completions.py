"""Outcomes of attempts on PostgreSQL: complete (in batches), fail, dead letters, redrive.

``complete_attempts`` is one transaction of one or two round trips, any size. The
fast path (``complete_fenced``) takes batches that return no events, each on its
own cursor, whose order does not matter (``InOrder``), which is what workers mostly
send: session locks, the advance fenced in SQL on each exact attempt, and the commit
go in one round trip; if any completion misses its fence the statement fails,
nothing is written, and the batch is judged.

Judged (``complete_judged``): the first round trip locks the sessions (sorted) and
reads every cursor (locked), lane record and stored id the batch names; each
completion is then judged in Python, in order, exactly as ``complete_attempt`` would
judge it after the ones before it (a ``WritePlan`` tracks heads and the ids this
batch appended); the second round trip sends the writes of all fresh completions
with the commit. The set-based writes of a plan apply all type refreshes, then all
events, then all advances: where that order would change an outcome (``InOrder``),
the batch's writes are cut into consecutive plans, sent in order in that same trip.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from psycopg.rows import DictRow

from ..contract.args import CancelArgs, ClaimAnyArgs, CompletionItem, FailArgs, RedriveArgs
from ..contract.rules import (
    CANCELLED_ERROR,
    CompletedAttempt,
    attempt_is_live,
    held_until,
    judge_completion,
    judge_failure,
    mismatched_retry,
    refuse_mismatched_retry,
    refuse_non_log_cursor,
    refuse_taken_ids,
    replay,
    woken_logs,
)
from ..models import (
    AnyLane,
    CancelResult,
    Completed,
    CompletedAndClaimed,
    CompleteResult,
    Consumer,
    FailResult,
    Head,
    RedriveResult,
    StoredEvent,
    Superseded,
)
from . import codec
from .claims import CycleCompletions, claim_round, cycle_params, queue_claim_any
from .database import Database, Finish, Tx, finished
from .log import has_pending, pending_flag
from .shards import Shards
from .writes import WritePlan, columns, push

FENCE_MISSED = "a2pg: a completion missed its fence"
"""The error text ``complete_fenced`` fails with when the fast path does not apply."""

CursorKey = tuple[str, str, str]
"""``(session_id, consumer, cursor_key)``."""


def key_of(item: CompletionItem) -> CursorKey:
    """The cursor row an item completes at."""
    c = item.args.completion
    return (c.session_id, c.consumer, codec.cursor_key(c.lane, c.index))


UNKNOWN_TYPES: Final = "unknown"
"""The types a log cursor moved with, when the fast path cannot know them (never the
JSON text of a list)."""


def declared_types(item: CompletionItem) -> dict[CursorKey, str | None]:
    """The log cursors whose types ``item`` records (its wake set's log consumers)."""
    c = item.args.completion
    return {
        (c.session_id, consumer.name, codec.cursor_key(consumer.log.lane, 0)): codec.types_json(
            consumer.log.types
        )
        for consumer in item.wake
        if consumer.log is not None
    }


@dataclass(slots=True)
class InOrder:
    """Whether the completions seen so far, written set-based, still give exactly the
    outcome of ``complete_attempt`` one by one.

    One plan's statements record every type refresh, then insert every event, then
    advance every cursor. That differs from one by one only where a log cursor of a
    session moves before a later completion of that session declares its consumer with
    other types (the move would use them), or returns events (the move would see them);
    or where two completions declare one log consumer of a session with different
    types (the woken cursor would take its head by the last ones). ``fits`` says
    whether the next completion can join; if not, the writes so far go first.
    """

    declared: dict[CursorKey, str | None] = field(default_factory=dict)
    """Types declared by the completions seen, per log cursor."""
    moved: dict[CursorKey, str | None] = field(default_factory=dict)
    """Log cursors the completions seen advanced, each with the types it moved by."""
    moved_in: set[str] = field(default_factory=set)
    """The sessions of ``moved``."""

    def fits(self, item: CompletionItem, declares: dict[CursorKey, str | None]) -> bool:
        return self.fits_types(declares) and not (
            item.args.events and item.args.completion.session_id in self.moved_in
        )

    def fits_types(self, declares: dict[CursorKey, str | None]) -> bool:
        """Whether recording these types (all a completion that appends nothing writes,
        such as a superseded one) may join the writes so far."""
        for key, types in declares.items():
            if self.declared.get(key, types) != types or self.moved.get(key, types) != types:
                return False
        return True

    def add(
        self,
        item: CompletionItem,
        declares: dict[CursorKey, str | None],
        *,
        log: bool,
        types: str | None = UNKNOWN_TYPES,
    ) -> None:
        """Counts ``item`` in; ``log`` when it advances a log cursor, whose ``types`` before
        it are given when known (those it declares itself override them)."""
        self.declared.update(declares)
        if log:
            self.moved[key_of(item)] = self.declared.get(key_of(item), types)
            self.moved_in.add(item.args.completion.session_id)


def fits_fast_path(items: Sequence[CompletionItem]) -> bool:
    """Completions returning no events, each on its own cursor, in an order that does
    not matter (``InOrder``; a lane named may be a log cursor): the common case, which
    ``complete_fenced`` settles in one round trip when every one is fresh."""
    keys = {key_of(item) for item in items}
    if len(keys) != len(items) or any(item.args.events for item in items):
        return False
    order = InOrder()
    for item in items:
        declares = declared_types(item)
        if not order.fits(item, declares):
            return False
        order.add(item, declares, log=item.args.completion.lane is not None)
    return True


def missed_fence(exc: Exception) -> bool:
    return FENCE_MISSED in str(exc)


async def complete_fenced(tx: Tx, items: Sequence[CompletionItem]) -> Finish[list[CompleteResult]]:
    """The whole batch in one round trip, every completion fenced in SQL: session locks,
    type refreshes, the fenced advance, pin releases, NOTIFY and the commit travel
    together. Fails with ``FENCE_MISSED`` (nothing written) unless every completion is a
    fresh one; the caller then runs ``complete_judged``."""
    session_ids = sorted({item.args.completion.session_id for item in items})
    await tx.execute(tx.query("lock_sessions"), {"session_ids": session_ids})
    refreshes: dict[CursorKey, str | None] = {}
    fenced = columns("session_ids", "consumers", "keys", "heads", "attempts")
    releases = columns("session_ids", "consumers", "keys", "idxs")
    touched: set[str] = set()
    for item in items:
        c = item.args.completion
        for consumer in item.wake:
            if consumer.log is not None:
                log_key = codec.cursor_key(consumer.log.lane, 0)
                refreshes[(c.session_id, consumer.name, log_key)] = codec.types_json(
                    consumer.log.types
                )
        _, _, key = key_of(item)
        push(fenced, c.session_id, c.consumer, key, c.index, c.attempt)
        push(releases, c.session_id, c.consumer, key, c.index)
        if c.lane is not None:  # a lane or log cursor may take its next head
            touched.add(c.session_id)
    if refreshes:
        refresh = columns("session_ids", "consumers", "keys", "types")
        for (session_id, consumer_name, log_key), types in refreshes.items():
            push(refresh, session_id, consumer_name, log_key, types)
        await tx.execute(tx.query("refresh_log_types"), refresh)
    now = tx.now_param()
    await tx.execute(tx.query("complete_fenced"), {**fenced, "now": now})
    await tx.execute(tx.query("release_pins"), releases)
    await tx.notify_ready(touched, now)
    return finished([Completed([]) for _ in items])


@dataclass(frozen=True, slots=True)
class EarlierCompletion:
    """A completion made earlier in this batch: a repeat of it in the same batch replays."""

    index: int
    record: CompletedAttempt


class Batch:
    """Judges the completions of one transaction against what the first round trip read."""

    def __init__(
        self,
        plan: WritePlan,
        cursors: dict[CursorKey, DictRow],
        lanes: dict[tuple[str, str, str, int], DictRow],
        owners: dict[tuple[str, str], StoredEvent],
    ) -> None:
        self.plan = plan
        self.plans = [plan]
        """The writes in the order they go: a new plan where ``order`` would not hold."""
        self.order = InOrder()
        self.types: dict[CursorKey, str | None] = {}
        """The types the batch's completions declared so far, per log cursor."""
        self.cursors = cursors
        self.lanes = lanes
        self.owners = owners
        self.earlier: dict[CursorKey, EarlierCompletion] = {}

    def judge(self, item: CompletionItem) -> CompleteResult:
        c = item.args.completion
        session = self.plan.sessions.get(c.session_id)
        head, clear_index = (0, 0) if session is None else (session.head, session.clear_index)
        if not attempt_is_live(
            c.index, head=head, clear_index=clear_index, session_id=c.session_id
        ):
            return Superseded()
        assert session is not None
        ids = item.args.ids
        cause = item.args.cause
        row = self.cursors.get(key_of(item))
        cursor = None if row is None else codec.cursor(row)
        earlier = self.earlier.get(key_of(item))
        recorded = self._recorded(item, row, earlier)
        if earlier is not None:  # this batch moved the head: judge against that, not the row
            cursor = None
        known = row is not None or self._created(key_of(item)) is not None
        verdict = judge_completion(cursor, cause, recorded, known=known, ids=ids)
        if verdict == "unknown":
            return Superseded()
        if verdict != "fresh":  # it still records the types it declares (refreshLogTypes)
            result: CompleteResult = Superseded()
            if verdict == "replay":
                assert recorded is not None
                result = Completed(self._replayed(item, recorded, clear_index))
            self._declare(item)
            return result
        refuse_taken_ids(any(self._owned(c.session_id, event_id, clear_index) for event_id in ids))
        self._refuse_targeted_lanes(item)
        assert row is not None
        self._in_order(item, row)
        self.plan.refresh(c.session_id, item.wake)
        stored = self.plan.add_batch(
            c.session_id, item.args.events, wake=item.wake, cause=cause, trace_parent=c.trace_parent
        )
        for event in stored:
            self.owners[(c.session_id, event.id)] = event
        self.plan.finish(
            c.session_id,
            consumer=c.consumer,
            lane=c.lane,
            kind=row["kind"],
            index=c.index,
            attempt=c.attempt,
            ids=ids,
        )
        self.earlier[key_of(item)] = EarlierCompletion(
            c.index, CompletedAttempt(c.attempt, tuple(ids))
        )
        return Completed(stored)

    def _declare(self, item: CompletionItem) -> None:
        """Records the types a completion that writes nothing else declares, after the
        writes so far (a new plan when they must come first)."""
        declares = declared_types(item)
        if not declares:
            return
        if not self.order.fits_types(declares):
            self._next_plan()
        self.types.update(declares)
        self.order.add(item, declares, log=False)
        self.plan.refresh(item.args.completion.session_id, item.wake)

    def _refuse_targeted_lanes(self, item: CompletionItem) -> None:
        """The events a fresh completion returns may not wake a log consumer on a lane
        where it has a targeted lane cursor: one read with the batch's cursors, or one an
        earlier completion of this batch made."""
        session_id = item.args.completion.session_id
        types = [checked.event.type for checked in item.args.events]
        for name, log in woken_logs(types, item.wake):
            key = (session_id, name, codec.cursor_key(log.lane, 0))
            row = self.cursors.get(key)
            kind = row["kind"] if row is not None else self._created(key)
            if kind is not None:
                refuse_non_log_cursor(kind, name, log.lane)

    def _created(self, key: CursorKey) -> str | None:
        """The kind of cursor an earlier completion of this batch made at ``key``, if any."""
        for plan in self.plans:
            kind = plan.creates(*key)
            if kind is not None:
                return kind
        return None

    def _next_plan(self) -> None:
        self.plan = WritePlan(self.plan.now, self.plan.new_id, self.plan.sessions)
        self.plans.append(self.plan)
        self.order = InOrder()

    def _in_order(self, item: CompletionItem, row: DictRow) -> None:
        """Starts a new plan when this fresh completion's writes must follow those so far."""
        declares = declared_types(item)
        if not self.order.fits(item, declares):
            self._next_plan()
        stored = None if row["types"] is None else codec.types_json(row["types"])
        types = self.types.get(key_of(item), stored)  # the cursor's types before this completion
        self.types.update(declares)
        self.order.add(item, declares, log=row["kind"] == "log", types=types)

    def _recorded(
        self, item: CompletionItem, row: DictRow | None, earlier: EarlierCompletion | None
    ) -> CompletedAttempt | None:
        """How the head at this index was finished, if it was: by this batch, a lane's
        record of it, or the cursor's record of its last completion."""
        index = item.args.completion.index
        if earlier is not None and earlier.index == index:
            return earlier.record
        if row is None or (earlier is None and row["head"] == index):
            return None
        if row["kind"] == "lane":
            c = item.args.completion
            lane = self.lanes.get((c.session_id, c.consumer, row["lane"], index))
            if lane is None or not lane["done"]:
                return None
            return CompletedAttempt(
                lane["completed_attempt"], tuple(lane["returned_event_ids"] or ())
            )
        if earlier is not None or row["completed_idx"] != index:
            return None
        return CompletedAttempt(row["completed_attempt"], tuple(row["returned_event_ids"] or ()))

    def _replayed(
        self, item: CompletionItem, recorded: CompletedAttempt, clear_index: int
    ) -> list[StoredEvent]:
        """A retry of the completion that moved the head: the same ids, stored events back."""
        ids = item.args.ids
        refuse_mismatched_retry(recorded, ids)
        session_id = item.args.completion.session_id
        owned = []
        for event_id in ids:
            event = self.owners.get((session_id, event_id))
            if event is None or event.index < clear_index or event.cause != item.args.cause:
                raise mismatched_retry()
            owned.append(event)
        return replay(item.args.events, owned)

    def _owned(self, session_id: str, event_id: str, clear_index: int) -> bool:
        """Whether a fresh id is taken: stored live (or by this batch). One stored only
        below the clear marker is given up by its old event (``free_stale_ids``)."""
        owner = self.owners.get((session_id, event_id))
        return owner is not None and owner.index >= clear_index


async def complete_judged(tx: Tx, items: Sequence[CompletionItem]) -> Finish[list[CompleteResult]]:
    """Runs the whole batch in the caller's transaction (see the module docstring)."""
    locked = await tx.lock([item.args.completion.session_id for item in items])
    keys = columns("session_ids", "consumers", "keys")
    lanes = columns("session_ids", "consumers", "lanes", "idxs")
    ids = columns("session_ids", "event_ids")
    for item in items:
        c = item.args.completion
        push(keys, *key_of(item))
        types = [checked.event.type for checked in item.args.events]
        for name, log in woken_logs(types, item.wake):  # a targeted lane there is refused
            push(keys, c.session_id, name, codec.cursor_key(log.lane, 0))
        if c.lane is not None:
            push(lanes, c.session_id, c.consumer, c.lane, c.index)
        for checked in item.args.events:
            push(ids, c.session_id, checked.event.id)
    cursors_cur = await tx.execute(tx.query("select_cursors"), keys)
    lanes_cur = await tx.execute(tx.query("select_lane_events"), lanes) if lanes["idxs"] else None
    ids_cur = await tx.execute(tx.query("select_events_by_ids"), ids) if ids["event_ids"] else None
    sessions, now = await locked.result()
    cursors = {
        (r["session_id"], r["consumer"], r["cursor_key"]): r for r in await cursors_cur.fetchall()
    }
    lane_rows: dict[tuple[str, str, str, int], DictRow] = {}
    if lanes_cur is not None:
        for r in await lanes_cur.fetchall():
            lane_rows[(r["session_id"], r["consumer"], r["lane"], int(r["idx"]))] = r
    owners: dict[tuple[str, str], StoredEvent] = {}
    if ids_cur is not None:
        for r in await ids_cur.fetchall():
            owners[(r["session_id"], r["event_id"])] = codec.event(r)
    batch = Batch(tx.new_plan(now, sessions), cursors, lane_rows, owners)
    results = [batch.judge(item) for item in items]
    *earlier, last = batch.plans
    for plan in earlier:  # in order, each seeing the writes before it; one NOTIFY at the end
        last.appended |= plan.appended
        last.touched |= plan.touched
        last.moved_heads |= plan.moved_heads
        plan.moved_heads.clear()  # the last plan sets every head the batch moved
        await plan.apply(tx.conn, statements=tx.statements)
    await tx.apply(last)
    return finished(results)


async def fail_attempt(tx: Tx, args: FailArgs) -> Finish[FailResult]:
    """Records a failure; ``retry_after`` holds the head back meanwhile. Repeating the same
    call answers as the first did."""
    session_id, ref = args.session_id, args.attempt
    key = codec.cursor_key(ref.lane, ref.index)
    locked = await tx.lock([session_id])
    found = await tx.execute(
        tx.query("select_cursors"),
        {"session_ids": [session_id], "consumers": [ref.consumer], "keys": [key]},
    )
    sessions, now = await locked.result()
    row = await found.fetchone()
    session = sessions.get(session_id)
    head, clear_index = (0, 0) if session is None else (session.head, session.clear_index)
    if not attempt_is_live(ref.index, head=head, clear_index=clear_index, session_id=session_id):
        return finished(FailResult("superseded", 0))
    result, record = judge_failure(
        None if row is None else codec.cursor(row), ref, args.max_failures
    )
    if not record:
        return finished(result)
    dead = result.outcome == "dead_lettered"
    delay = args.retry_after
    params = {
        "session_id": session_id,
        "consumer": ref.consumer,
        "cursor_key": key,
        "idx": ref.index,
        "attempt": ref.attempt,
        "failure_count": result.failure_count,
        "error": args.error,
        "now": now,
        "dead": dead,
        "retry_at": None if dead or delay is None else now + timedelta(seconds=delay),
    }
    await tx.execute(tx.query("fail_head"), params)
    plan = tx.new_plan(now, sessions)
    if dead:
        plan.release(session_id, ref.consumer, key, ref.index)
    plan.touched.add(session_id)
    await tx.apply(plan)
    return finished(result)


async def dead_letters(db: Database, session_id: str) -> list[Head]:
    rows = await db.run(db.query("dead_letters"), {"session_id": session_id})
    return [codec.head(row) for row in rows]


async def redrive(tx: Tx, args: RedriveArgs, wake: Sequence[Consumer]) -> Finish[RedriveResult]:
    """Retries or skips a dead-lettered head (False when there is none above the clear):
    of the cursor ``args.lane`` names, or without one (``ANY_LANE``) the one listed first."""
    session_id, index = args.session_id, args.index
    locked = await tx.lock([session_id])
    find: dict[str, Any] = {"session_id": session_id, "consumer": args.consumer, "idx": index}
    if isinstance(args.lane, AnyLane):
        dead = await tx.execute(tx.query("dead_head"), find)
    else:
        find["cursor_key"] = codec.cursor_key(args.lane, index)
        dead = await tx.execute(tx.query("dead_head_of_cursor"), find)
    sessions, now = await locked.result()
    row = await dead.fetchone()
    session = sessions.get(session_id)
    redriven = session is not None and row is not None and index > session.clear_index
    if redriven:
        assert row is not None
        plan = tx.new_plan(now, sessions)
        plan.refresh(session_id, wake)
        if args.action == "skip":
            plan.finish(
                session_id,
                consumer=args.consumer,
                lane=row["lane"],
                kind=row["kind"],
                index=index,
                attempt=None,
                ids=None,
            )
        else:
            retry = {
                "session_id": session_id,
                "consumer": args.consumer,
                "cursor_key": row["cursor_key"],
                "idx": index,
                "now": now,
            }
            await tx.execute(tx.query("retry_head"), retry)
            plan.touched.add(session_id)  # the retried head is claimable from now
        await tx.apply(plan)
    flag = await tx.execute(tx.query("has_pending"), has_pending(session_id, args.consumers))

    async def finish() -> RedriveResult:
        return RedriveResult(redriven, await pending_flag(flag))

    return finish


async def cancel_head(tx: Tx, args: CancelArgs, wake: Sequence[Consumer]) -> Finish[CancelResult]:
    """Skips or dead-letters a live head (see ``CheckedStore.cancel_head``)."""
    session_id, index = args.session_id, args.index
    locked = await tx.lock([session_id])
    find: dict[str, Any] = {"session_id": session_id, "consumer": args.consumer, "idx": index}
    if isinstance(args.lane, AnyLane):
        live = await tx.execute(tx.query("live_head"), find)
    else:
        find["cursor_key"] = codec.cursor_key(args.lane, index)
        live = await tx.execute(tx.query("live_head_of_cursor"), find)
    sessions, now = await locked.result()
    row = await live.fetchone()
    lease_end: datetime | None = None
    if row is not None:
        key = row["cursor_key"]
        lease_end = held_until(row["claim_holder"], row["claim_expires_at"], now)
        plan = tx.new_plan(now, sessions)
        where = {"session_id": session_id, "consumer": args.consumer, "cursor_key": key}
        if args.action == "dead_letter":
            dead = {**where, "idx": index, "now": now, "error": CANCELLED_ERROR}
            await tx.execute(tx.query("cancel_dead_letter"), dead)
            plan.release(session_id, args.consumer, key, index)
            await tx.apply(plan)
        else:
            plan.refresh(session_id, wake)
            plan.finish(
                session_id,
                consumer=args.consumer,
                lane=row["lane"],
                kind=row["kind"],
                index=index,
                attempt=None,
                ids=None,
            )
            await tx.apply(plan)
            if lease_end is not None and row["kind"] != "event":
                await tx.execute(tx.query("hold_cursor_until"), {**where, "until": lease_end})
        if lease_end is not None:  # the attempt it fenced out, in the history
            ended = {
                **where,
                "idx": index,
                "attempt": row["attempt_count"],
                "lane": row["lane"],
                "holder": row["claim_holder"],
                "ready_at": row["last_ready_at"],
                "started_at": row["last_claimed_at"],
                "ended_at": now,
                "outcome": "cancelled",
                "error": None,
            }
            await tx.execute(tx.query("record_attempt"), ended)
    flag = await tx.execute(tx.query("has_pending"), has_pending(session_id, args.consumers))

    async def finish() -> CancelResult:
        return CancelResult(row is not None, lease_end, await pending_flag(flag))

    return finish


def fits_one_statement(items: Sequence[CompletionItem]) -> bool:
    """Completions of event cursors returning no events, each on its own cursor: what
    ``complete_and_claim_one`` takes (an event cursor goes idle, so no lane or log can
    take a next head and no session lock is needed)."""
    keys = {key_of(item) for item in items}
    return len(keys) == len(items) and not any(
        item.args.events or item.args.completion.lane is not None for item in items
    )


def cycle_completions(items: Sequence[CompletionItem]) -> CycleCompletions:
    """What ``complete_and_claim`` runs of ``items`` (they fit it: ``fits_one_statement``)."""
    done: list[str] = []
    refresh: dict[CursorKey, str | None] = {}
    for item in items:
        c = item.args.completion
        session_id, consumer, key = key_of(item)
        done.append(
            f'{{"session_id":{codec.quoted(session_id)},"consumer":{codec.quoted(consumer)},'
            f'"cursor_key":{codec.quoted(key)},"head":{c.index},"attempt":{c.attempt}}}'
        )
        refresh.update(declared_types(item))
    refreshes = [
        f'{{"session_id":{codec.quoted(session_id)},"consumer":{codec.quoted(consumer)},'
        f'"cursor_key":{codec.quoted(key)},"types":{"null" if types is None else types}}}'
        for (session_id, consumer, key), types in refresh.items()
    ]
    return CycleCompletions(f"[{','.join(done)}]", f"[{','.join(refreshes)}]", len(items))


async def complete_and_claim_one(
    db: Database, items: Sequence[CompletionItem], claim: ClaimAnyArgs
) -> CompletedAndClaimed | None:
    """A worker's cycle as one autocommit statement (``complete_and_claim`` in
    ``sql/claims.sql``): one round trip, no session lock. None when a completion missed
    its fence: nothing was written, and ``complete_and_claim``'s transaction judges them."""
    params = cycle_params(claim, db.now_param(), cycle_completions(items))
    statement = db.statements.positional("complete_and_claim", limit=claim.limit)
    rows = await db.write_one(statement, params, idempotent=False, declined=missed_fence)
    if rows is None:
        return None
    return CompletedAndClaimed([Completed([]) for _ in items], [codec.head(r) for r in rows])


Judge = Callable[[list[CompletionItem]], Awaitable[list[CompleteResult]]]
"""The store's ``complete_attempts``: completions in a transaction of their own, judged."""


async def complete_and_claim_on_shards(
    db: Database, shards: Shards, items: list[CompletionItem], claim: ClaimAnyArgs, judge: Judge
) -> CompletedAndClaimed:
    """A worker's cycle on Citus. Completions that fit ``complete_and_claim`` and whose
    session's shard group is known (a claim or an append of this store saw it) run in
    that group's claim statement, on its node, without the coordinator; the others (and any
    whose fence missed, which wrote nothing) run through the coordinator (``judge``):
    those that cannot go to a node before the claim, as they would on one PostgreSQL,
    where the claim may take the heads they made ready."""
    results: list[CompleteResult | None] = [None] * len(items)
    by_group: dict[int, list[int]] = {}
    rest: list[int] = []
    on_nodes = fits_one_statement(items)
    for position, item in enumerate(items):
        group = shards.group_of(item.args.completion.session_id) if on_nodes else None
        (rest if group is None else by_group.setdefault(group, [])).append(position)

    async def judged(positions: list[int]) -> None:
        # Session by session, side by side: each in a transaction of its own on its
        # session's node (one over several sessions would go through the coordinator,
        # in two-phase commit). A worker's completions need no atomicity across them.
        by_session: dict[str, list[int]] = {}
        for position in positions:
            session_id = items[position].args.completion.session_id
            by_session.setdefault(session_id, []).append(position)

        async def one(picked: list[int]) -> None:
            for position, result in zip(
                picked, await judge([items[p] for p in picked]), strict=True
            ):
                results[position] = result

        done = await asyncio.gather(
            *(one(picked) for picked in by_session.values()), return_exceptions=True
        )
        for outcome in done:  # all finished first: none left running on a failure
            if isinstance(outcome, BaseException):
                raise outcome

    await judged(rest)
    completing = {
        group: cycle_completions([items[p] for p in positions])
        for group, positions in by_group.items()
    }
    heads, missed = await claim_round(db, shards, claim, completing, missed_fence)
    for group, positions in by_group.items():
        if group not in missed:
            for position in positions:
                results[position] = Completed([])
    await judged([p for group in sorted(missed) for p in by_group[group]])
    assert all(result is not None for result in results)
    return CompletedAndClaimed([r for r in results if r is not None], heads)


async def complete(
    tx: Tx, items: Sequence[CompletionItem], *, fenced: bool
) -> Finish[list[CompleteResult]]:
    """``complete_fenced`` or ``complete_judged``: what ``fenced`` says the caller tries."""
    return await (complete_fenced if fenced else complete_judged)(tx, items)


async def complete_and_claim(
    tx: Tx, items: Sequence[CompletionItem], claim: ClaimAnyArgs, *, fenced: bool
) -> Finish[CompletedAndClaimed]:
    """The completions (``complete_fenced`` or ``complete_judged``), then ``claim_any``, in
    one transaction and one commit. The NOTIFY goes last, so it names only the sessions
    where a head made ready here is still unclaimed: work this worker took itself wakes
    nobody."""
    tx.hold_notify = True
    completed = await complete(tx, items, fenced=fenced) if items else finished([])
    claimed = await queue_claim_any(tx, claim)
    await tx.notify_held()

    async def finish() -> CompletedAndClaimed:
        results = await completed()
        return CompletedAndClaimed(results, [codec.head(row) for row in await claimed.fetchall()])

    return finish
