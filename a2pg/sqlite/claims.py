"""Claims on SQLite: claim a session's heads, claim across sessions, renew, release.

Every claim is part of one ``BEGIN IMMEDIATE`` transaction, which holds the file's
write lock from its first statement: two processes claiming at once take turns, and
the second sees what the first claimed. So ``claim_any`` needs no SKIP LOCKED to hand
each head to one claimer only.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime, timedelta

from ..contract.args import ClaimAnyArgs, ClaimArgs, HeldClaimsArgs
from ..contract.rules import claim_order, claim_standing, holds
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
from . import attempts as history
from . import codec
from .cursors import refresh_types, release_pins, select_cursor
from .database import SessionHead, Tx


def claim_available(tx: Tx, args: ClaimArgs, wake: Sequence[Consumer]) -> ClaimResult:
    """Claims every eligible head of the session, by index then consumer. ``exclude`` names
    exact heads; nothing eligible but some held or backing off is ``Busy``."""
    sid = args.session_id
    session = tx.session(sid)
    if not session.exists:
        return Settled()
    refresh_types(tx, sid, wake)
    served, through, excluded = args.served, args.through, set(args.exclude)
    now = tx.now
    eligible: list[sqlite3.Row] = []
    retry_at: datetime | None = None
    params = {"session_id": sid, "clear_index": session.clear_index}
    for row in tx.rows("live_heads", params):
        ref = ClaimRef(row["consumer"], row["lane"], int(row["head"]))
        if (
            (through is not None and ref.index > through)
            or (served is not None and ref.consumer not in served)
            or ref in excluded
        ):
            continue
        expiry = codec.maybe_time(row["claim_expires_at"])
        if expiry is not None and expiry > now:
            retry_at = expiry if retry_at is None else min(retry_at, expiry)
            continue
        eligible.append(row)
    if not eligible:
        return Settled() if retry_at is None else Busy(retry_at)
    heads = [
        claim_head(
            tx,
            session,
            row["consumer"],
            row["cursor_key"],
            args.holder,
            args.ttl,
            args.max_failures,
        )
        for row in eligible
    ]
    return Claimed(heads, session.head)


def claim_any(tx: Tx, args: ClaimAnyArgs) -> list[Head]:
    """Claims the ``limit`` oldest-ready heads of all sessions: by ready time, then session
    id, index, consumer (and lane). Like PostgreSQL it refreshes no log types."""
    params = {"now": tx.now_us, "names": codec.names_json(args.consumers), "limit": args.limit}
    picked = tx.rows("ready_heads", params)
    sessions: dict[str, SessionHead] = {}
    heads = []
    for row in picked:
        sid = row["session_id"]
        session = sessions.get(sid) or sessions.setdefault(sid, tx.session(sid))
        heads.append(
            claim_head(
                tx,
                session,
                row["consumer"],
                row["cursor_key"],
                args.holder,
                args.ttl,
                args.max_failures,
            )
        )
    return heads


def claim_head(
    tx: Tx,
    session: SessionHead,
    consumer: str,
    key: str,
    holder: str,
    ttl: float,
    max_failures: int | None,
) -> Head:
    """Claims one eligible head (see the ``claim_head`` statement): a lapsed claim counts a
    failure, and reaching ``max_failures`` dead-letters the head, releasing its pins."""
    sid = session.session_id
    params = {
        "session_id": sid,
        "consumer": consumer,
        "cursor_key": key,
        "holder": holder,
        "now": tx.now_us,
        "expires_at": codec.micros(tx.now + timedelta(seconds=ttl)),
        "max_failures": max_failures,
    }
    before = select_cursor(tx.conn, sid, consumer, key)
    if before is not None and before["claim_holder"] is not None:  # its lease lapsed
        exhausted = max_failures is not None and before["failure_count"] + 1 >= max_failures
        history.record(tx, sid, before, "dead_lettered" if exhausted else "lapsed")
    claimed = tx.one("claim_head", params)
    assert claimed is not None
    if claimed["failed_at"] is not None:
        release_pins(tx, sid, consumer, key, int(claimed["head"]))
    row = tx.one("head_row", {"session_id": sid, "consumer": consumer, "cursor_key": key})
    assert row is not None
    return codec.head(row)


def renew_claims(tx: Tx, args: HeldClaimsArgs) -> RenewResult:
    """Extends the live leases ``holder`` holds; a lapsed lease is not renewed."""
    session = tx.session(args.session_id)
    held, superseded = _judge(tx, session, args.claims, args.holder)
    expires_at = codec.micros(tx.now + timedelta(seconds=args.ttl))
    renewed: list[ClaimRef] = []
    for claim, row in held:
        expiry = codec.maybe_time(row["claim_expires_at"])
        if expiry is not None and expiry > tx.now:
            tx.run("renew_claim", {**_key(args.session_id, row), "expires_at": expires_at})
            renewed.append(claim.ref)
    return RenewResult(renewed, superseded)


def release_claims(tx: Tx, args: HeldClaimsArgs) -> ReleaseResult:
    """Hands ``holder``'s claims back, lapsed or not: claimable at once, no failure counted."""
    session = tx.session(args.session_id)
    held, superseded = _judge(tx, session, args.claims, args.holder)
    released: list[ClaimRef] = []
    for claim, row in held:
        history.record(tx, args.session_id, row, "released")
        tx.run("release_claim", {**_key(args.session_id, row), "now": tx.now_us})
        tx.work.add(args.session_id)
        released.append(claim.ref)
    return ReleaseResult(released, superseded)


def _key(session_id: str, row: sqlite3.Row) -> dict[str, str]:
    return {"session_id": session_id, "consumer": row["consumer"], "cursor_key": row["cursor_key"]}


def _judge(
    tx: Tx, session: SessionHead, claims: Sequence[AttemptRef], holder: str
) -> tuple[list[tuple[AttemptRef, sqlite3.Row]], list[ClaimRef]]:
    """The claims ``holder`` still holds (lease lapsed or not), with their cursor rows, and
    the superseded ones, by index then consumer; the rest are neither. A finished event
    cursor keeps its row (head gone, position at its index): superseded, as the contract
    says of a head that moved on."""
    held: list[tuple[AttemptRef, sqlite3.Row]] = []
    superseded: list[ClaimRef] = []
    for claim in sorted(claims, key=claim_order):
        key = codec.cursor_key(claim.lane, claim.index)
        row = select_cursor(tx.conn, session.session_id, claim.consumer, key)
        cursor = None if row is None else codec.cursor(row)
        standing = claim_standing(claim, cursor, session.clear_index)
        if standing == "superseded":
            superseded.append(claim.ref)
        elif (
            standing == "current"
            and cursor is not None
            and row is not None
            and holds(cursor, claim, holder)
        ):
            held.append((claim, row))
    return held, superseded
