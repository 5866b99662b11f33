"""Claims on PostgreSQL: claim a session's heads, claim across sessions, renew, release."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg import AsyncCursor
from psycopg.rows import DictRow

from ..contract.args import ClaimAnyArgs, ClaimArgs, HeldClaimsArgs
from ..contract.rules import claim_order, claim_standing
from ..errors import StoreUnavailable
from ..models import (
    AttemptRef,
    Busy,
    Claimed,
    ClaimRef,
    ClaimResult,
    Consumer,
    Head,
    ReleaseResult,
    RenewResult,
    Settled,
)
from . import codec
from .database import MAX_INDEX, Database, Finish, OffNode, Tx
from .log import names_of
from .shards import Shards
from .writes import columns, push


async def claim_available(tx: Tx, args: ClaimArgs, wake: Sequence[Consumer]) -> Finish[ClaimResult]:
    """Claims every eligible head of the session in one round trip: session lock, type
    refresh, the claim, and the Busy/Settled answer travel together."""
    session_id = args.session_id
    excluded = columns("ex_consumers", "ex_keys", "ex_idxs")
    for ref in args.exclude:
        push(excluded, ref.consumer, codec.cursor_key(ref.lane, ref.index), ref.index)
    params: dict[str, Any] = {
        "session_id": session_id,
        "now": tx.now_param(),
        "holder": args.holder,
        "ttl": timedelta(seconds=args.ttl),
        "max_failures": args.max_failures,
        "through": None if args.through is None else min(args.through, MAX_INDEX),
        "names": names_of(args.consumers),
        **excluded,
    }
    locked = await tx.execute(tx.query("lock_sessions"), {"session_ids": [session_id]})
    refresh = columns("session_ids", "consumers", "keys", "types")
    for consumer in wake:
        if consumer.log is not None:
            key = codec.cursor_key(consumer.log.lane, 0)
            push(refresh, session_id, consumer.name, key, codec.types_json(consumer.log.types))
    if refresh["keys"]:
        await tx.execute(tx.query("refresh_log_types"), refresh)
    claimed = await tx.execute(tx.query("claim_session"), params)
    busy = await tx.execute(tx.query("busy_until"), params)

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


async def claim_any(db: Database, args: ClaimAnyArgs) -> list[Head]:
    """The oldest ready heads of every session: the worker cycle's one autocommit
    statement (``complete_and_claim``) with nothing completed, SKIP LOCKED.

    Its LIMIT is a literal, one statement text per limit: a bound LIMIT would let a
    generic plan (psycopg prepares a statement after a few runs) leave the ready_at
    index for a scan of every ready head. The completions' JSON documents, empty here,
    keep the custom plans no cheaper than the generic one, so PostgreSQL plans the
    prepared statement once; a test forces a generic plan and checks the range scan.
    """
    if db.shards is not None:
        heads, _ = await claim_round(db, db.shards, args)
        return heads
    statement = db.statements.positional("complete_and_claim", limit=args.limit)
    rows = await db.write_one(statement, cycle_params(args, db.now_param()), idempotent=False)
    assert rows is not None  # nothing declines a claim alone
    return [codec.head(row) for row in rows]


async def claim_round(
    db: Database,
    shards: Shards,
    args: ClaimAnyArgs,
    completing: Mapping[int, CycleCompletions] | None = None,
    declined: Callable[[psycopg.Error], bool] | None = None,
) -> tuple[list[Head], set[int]]:
    """On Citus, ``claim_any`` shard group by shard group (``shards``): from one group
    further than the last claim started, each group's oldest ready heads until the limit
    is reached, on the node that holds the group; the groups a notification named come
    right after that first one (never before it: a group notified without end must not
    starve the others). The heads come back oldest first.

    ``completing`` maps a group (its index) to completions of its sessions
    (``complete_and_claim``'s ``done``, ``refresh`` and ``count``), which its statement
    runs too: those groups go first, whether or not the limit is reached. A group whose
    statement failed as ``declined`` says (a completion missed its fence: nothing
    written) is in the set returned, as are those the map no longer has after a
    rebalance: their completions are the caller's to run another way."""
    pending = dict(completing or {})
    rows: list[DictRow] = []
    missed: set[int] = set()
    start = shards.start()

    def plan() -> list[int]:
        claimable = shards.claimable
        count = len(claimable)
        rest = [claimable[(start + i) % count].index for i in range(count)]
        first = [*sorted(pending), *rest[:1]]
        first += [i for i in shards.woken() if i not in first]
        return [*first, *(i for i in rest if i not in first)]

    order = plan()
    position = 0
    reloaded = False
    while position < len(order):
        index = order[position]
        if index not in pending and len(rows) >= args.limit:
            break
        group = shards.groups[index]
        room = max(0, args.limit - len(rows))
        statement = shards.statement(group, room)
        completions = pending.get(index, NO_COMPLETIONS)
        try:
            found = await db.write_one(
                statement,
                cycle_params(args, db.now_param(), completions),
                idempotent=False,
                declined=declined if completions.count else None,
                pool=await shards.pool(group.node),
            )
        except OffNode as exc:
            if reloaded:
                raise StoreUnavailable(
                    message=f"Citus's shard map of schema {shards.schema!r} changed twice "
                    "during one claim (a rebalance is under way?)"
                ) from exc
            reloaded = True  # a rebalance moved the shard: read the map again, go on
            await db.load_shards()
            missed |= set(pending)  # their groups are not what they were: not run
            pending.clear()
            order, position = plan(), 0
            continue
        pending.pop(index, None)
        if room:
            shards.served(index)  # its wake taken (a run with no room for heads keeps it)
        position += 1
        if found is None:
            missed.add(index)
            continue
        shards.saw(group, found)
        rows.extend(found)
    rows.sort(key=_oldest_first)
    return [codec.head(row) for row in rows], missed


def _oldest_first(row: DictRow) -> tuple[Any, ...]:
    """``claim_any``'s order (``claim_any_order`` in ``sql/claims.sql``)."""
    return (row["was_ready"], row["session_id"], row["head"], row["consumer"], row["lane"] or "")


async def queue_claim_any(tx: Tx, args: ClaimAnyArgs) -> AsyncCursor[DictRow]:
    """``claim_any``'s statement queued in a write transaction (``complete_and_claim``): it
    sees the transaction's own writes, so it may take heads they just made ready."""
    statement = tx.statements.positional("complete_and_claim", limit=args.limit)
    return await tx.execute_positional(statement, cycle_params(args, tx.now_param()))


@dataclass(frozen=True, slots=True)
class CycleCompletions:
    """The completions ``complete_and_claim`` runs with its claim: its JSON documents
    (``completions.cycle_completions`` writes them) and how many completions they hold."""

    done: str = "[]"
    refresh: str = "[]"
    count: int = 0


NO_COMPLETIONS = CycleCompletions()


def cycle_params(
    args: ClaimAnyArgs, now: datetime | None, completions: CycleCompletions = NO_COMPLETIONS
) -> dict[str, object]:
    """The parameters of ``complete_and_claim``: the claim's, and the completions (none
    by default: ``claim_any``)."""
    return {
        "done": completions.done,
        "refresh": completions.refresh,
        "count": completions.count,
        "now": now,
        "holder": args.holder,
        "ttl": timedelta(seconds=args.ttl),
        "max_failures": args.max_failures,
        "names": names_of(args.consumers),
    }


def _claim_columns(args: HeldClaimsArgs) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """The claims' cursors to read (by key) and the claims to write (by key and attempt)."""
    keys = columns("session_ids", "consumers", "keys")
    claims = columns("consumers", "keys", "idxs", "attempts")
    for ref in args.claims:
        key = codec.cursor_key(ref.lane, ref.index)
        push(keys, args.session_id, ref.consumer, key)
        push(claims, ref.consumer, key, ref.index, ref.attempt)
    return keys, claims


async def renew_claims(tx: Tx, args: HeldClaimsArgs) -> Finish[RenewResult]:
    """Extends live claims of the holder (one round trip); heads that moved on, were
    cleared or re-attempted are superseded; heads not reached yet are neither."""
    keys, renew = _claim_columns(args)
    locked = await tx.execute(tx.query("lock_sessions"), {"session_ids": [args.session_id]})
    found = await tx.execute(tx.query("select_cursors"), keys)
    params = {
        "session_id": args.session_id,
        "holder": args.holder,
        "now": tx.now_param(),
        "ttl": timedelta(seconds=args.ttl),
        **renew,
    }
    extended = await tx.execute(tx.query("renew_claims"), params)

    async def finish() -> RenewResult:
        done, superseded = await _judged(args.claims, locked, found, extended)
        return RenewResult(done, superseded)

    return finish


async def release_claims(tx: Tx, args: HeldClaimsArgs) -> Finish[ReleaseResult]:
    """Hands claims of the holder back, lapsed or not, without a failure (one round trip);
    judged like ``renew_claims``. Idempotent: a repeat finds nothing left to release."""
    keys, release = _claim_columns(args)
    params = {
        "session_id": args.session_id,
        "holder": args.holder,
        "now": tx.now_param(),
        "channel": tx.channel,
        **release,
    }
    locked = await tx.execute(tx.query("lock_sessions"), {"session_ids": [args.session_id]})
    released = await tx.execute(tx.query("release_claims"), params)
    # Read after the release: the cursors as this transaction leaves them.
    found = await tx.execute(tx.query("select_cursors"), keys)

    async def finish() -> ReleaseResult:
        done, superseded = await _judged(args.claims, locked, found, released)
        if done:  # the statement notified other processes; this store hears it now
            tx.work.add(args.session_id)
        return ReleaseResult(done, superseded)

    return finish


async def _judged(
    claims: Sequence[AttemptRef],
    locked: AsyncCursor[DictRow],
    found: AsyncCursor[DictRow],
    written: AsyncCursor[DictRow],
) -> tuple[list[ClaimRef], list[ClaimRef]]:
    """Sorts each claim into done (the statement wrote its row at this claim's attempt),
    superseded or neither. A head named at its attempt and at one not reached yet is
    done once: the row written says nothing of which attempt wrote it."""
    session = await locked.fetchone()
    clear_index = 0 if session is None else int(session["clear_index"])
    cursors = {(r["consumer"], r["cursor_key"]): codec.cursor(r) for r in await found.fetchall()}
    wrote = {(r["consumer"], r["cursor_key"], r["head"]) for r in await written.fetchall()}
    done: list[ClaimRef] = []
    superseded: list[ClaimRef] = []
    for claim in sorted(claims, key=claim_order):
        key = codec.cursor_key(claim.lane, claim.index)
        cursor = cursors.get((claim.consumer, key))
        standing = claim_standing(claim, cursor, clear_index)
        if standing == "superseded":
            superseded.append(claim.ref)
        elif (
            standing == "current"
            and cursor is not None
            and cursor.dispatch.attempt_count == claim.attempt
            and (claim.consumer, key, claim.index) in wrote
        ):
            done.append(claim.ref)
    return done, superseded
