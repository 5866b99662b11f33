"""``a2pg cancel``: take one live head out of the way (skip it, or dead-letter it now), and
``a2pg backfill``: run a log consumer's registry backfill to its end.

``cancel`` is for what ``redrive`` cannot reach: a head still pending, backing off,
delayed or claimed (a hung handler holding its lane). Both actions fence the attempt
that may be running, so its result is never recorded.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, TextIO

from ...models import AnyLane, BackfillProgress, CancelAction, CancelResult
from .. import output as out
from ..common import (
    EXIT_NOT_FOUND,
    EXIT_OK,
    AddCommand,
    Command,
    fail,
    require_session,
)
from ..options import positive_int
from . import audit
from .base import cursor_lane, cursor_words, opened

if TYPE_CHECKING:
    from ...store import Store

CANCEL_DETAILS = """\
SESSION CONSUMER INDEX names a live head: not dead-lettered (that is `a2pg redrive`'s),
above the session's clear marker, pending, backing off, delayed or claimed.
--skip moves its cursor on as a completion returning no events would: a lane takes its
next event. --dead-letter dead-letters it now (no failure is counted; `a2pg redrive`
brings it back). A claimed head's running attempt is fenced out at once (its completion,
failure and renewals are refused), and after --skip the cursor's next head waits until
that attempt's lease would have lapsed, so a lane never runs two heads at once.
--lane LANE or --event-cursor says which cursor; without either, the first in claim
order (the event cursor, then lanes by name). Exits 5 when there is no such live head."""

BACKFILL_DETAILS = """\
A log consumer registered with backfill=True (by a worker that serves it) has a backfill
in the registry that brings every existing session's cursor into being. Workers run it;
this command runs it too, --batch sessions per transaction, and prints the progress.
Stopping it (Ctrl-C, a kill) loses nothing: the next run, or a worker, resumes after
the last session recorded. Exits 5 when CONSUMER has no backfill (not registered, or
registered without backfill)."""


def add_parsers(command: AddCommand) -> None:
    cancel = command(
        "cancel", "skip or dead-letter a live head (pending, delayed or claimed)", CANCEL_DETAILS
    )
    cancel.add_argument("session", metavar="SESSION")
    cancel.add_argument("consumer", metavar="CONSUMER")
    cancel.add_argument("index", metavar="INDEX", type=positive_int)
    action = cancel.add_mutually_exclusive_group(required=True)
    action.add_argument("--skip", action="store_true", help="move the cursor past the head")
    action.add_argument("--dead-letter", action="store_true", help="dead-letter the head now")
    cursor = cancel.add_mutually_exclusive_group()
    cursor.add_argument("--lane", metavar="LANE", help="the head of the consumer's lane LANE")
    cursor.add_argument(
        "--event-cursor", action="store_true", help="the head of the consumer's event cursor"
    )
    backfill = command(
        "backfill", "run a log consumer's backfill over existing sessions", BACKFILL_DETAILS
    )
    backfill.add_argument("consumer", metavar="CONSUMER")
    backfill.add_argument(
        "--batch", metavar="N", type=positive_int, default=100, help="sessions per transaction"
    )


async def _record_cancel(
    store: Store,
    args: argparse.Namespace,
    action: CancelAction,
    lane: str | AnyLane | None,
    result: CancelResult,
) -> None:
    held = None if result.held_until is None else result.held_until.isoformat()
    await audit.record(
        store,
        "cancel.skip" if action == "skip" else "cancel.dead_letter",
        session_id=args.session,
        consumer=args.consumer,
        lane=lane if isinstance(lane, str) else None,
        index=args.index,
        outcome="cancelled" if result.cancelled else "not_found",
        cursor=audit.cursor_detail(lane),
        held_until=held,
    )


async def cmd_cancel(args: argparse.Namespace, stdout: TextIO) -> int:
    action: CancelAction = "skip" if args.skip else "dead_letter"
    lane = cursor_lane(args)
    async with opened(args) as store:
        await require_session(store, args.session)
        result = await store.cancel_head(
            args.session, consumer=args.consumer, index=args.index, action=action, lane=lane
        )
        await _record_cancel(store, args, action, lane, result)
    where = cursor_words(lane)
    if not result.cancelled:
        fail(
            EXIT_NOT_FOUND,
            f"no live head of consumer '{args.consumer}' at index {args.index}{where} in "
            f"session '{args.session}' (a dead-lettered one is `a2pg redrive`'s)",
        )
    held = None if result.held_until is None else result.held_until.isoformat()
    if args.json:
        data: dict[str, Any] = {
            "session_id": args.session,
            "consumer": args.consumer,
            "index": args.index,
            "action": action,
            "cancelled": True,
            "held_until": held,
            "has_pending": result.has_pending,
        }
        out.write_json(stdout, data)
        return EXIT_OK
    done = "skipped" if action == "skip" else "dead-lettered"
    stdout.write(f"{done}: {args.session} {args.consumer}@{args.index}{where}\n")
    if held is not None:
        stdout.write(
            f"it was claimed: its running attempt is fenced out; the cursor's next head "
            f"waits until its lease ends ({held})\n"
        )
    return EXIT_OK


async def cmd_backfill(args: argparse.Namespace, stdout: TextIO) -> int:
    async with opened(args) as store:
        done = await drive_backfill(
            store, args.consumer, batch=args.batch, json=args.json, out_=stdout
        )
        await audit.record(
            store, "backfill", consumer=args.consumer, sessions=done.sessions, batch=args.batch
        )
    return EXIT_OK


async def drive_backfill(
    store: Store, name: str, *, batch: int, json: bool, out_: TextIO
) -> BackfillProgress:
    """Runs consumer ``name``'s backfill to its end, a line (or JSON document) per batch,
    and returns it done; exits 5 when it has none. Also what ``a2pg consumers --register
    --backfill`` runs."""
    while True:
        progress = await store.backfill(name, limit=batch)
        if progress is None:
            fail(
                EXIT_NOT_FOUND,
                f"consumer '{name}' has no backfill: it is not registered, or registered "
                "without backfill=True",
            )
        if json:
            out.write_json(
                out_,
                {
                    "consumer": name,
                    "sessions": progress.sessions,
                    "after": progress.after,
                    "started_at": progress.started_at.isoformat(),
                    "done": progress.done_at is not None,
                },
            )
        else:
            state = "done" if progress.done_at is not None else "running"
            out_.write(
                f"backfill {name}: {state}, {progress.sessions} sessions"
                + ("" if progress.after is None else f", last {progress.after}")
                + "\n"
            )
        if progress.done_at is not None:
            return progress


COMMANDS: dict[str, Command] = {"cancel": cmd_cancel, "backfill": cmd_backfill}
