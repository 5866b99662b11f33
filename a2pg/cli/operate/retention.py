"""Retention: ``clear`` hides a session's events, ``reclaim`` deletes what a clear hid.

A retention job runs ``a2pg clear --older-than 30d`` then ``a2pg reclaim --all``. The
bulk clear passes each session's head as ``if_last_index``, so a session that gets a new
event between the listing and its clear is left alone.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import TYPE_CHECKING, Any, TextIO

from ...models import SessionInfo
from .. import output as out
from ..common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    AddCommand,
    Command,
    fail,
    require_session,
)
from . import audit
from .base import (
    all_sessions,
    duration,
    idle_since,
    is_idle,
    opened,
)

if TYPE_CHECKING:
    from ...store import Store

CLEAR_DETAILS = """\
Appends the a2.cleared marker: every event below it is hidden from reads, claims, dead
letters and state, and `a2pg reclaim` may delete it. With --if-last-index N it clears
only while the session's head is N (exit 1 otherwise). With --older-than DURATION
(30d, 12h, 90m, 45s) it clears every session whose newest event is older, by the
database's clock (not this machine's), skipping those already cleared up to their head
and those that got a new event meanwhile. It keeps (and lists) idle sessions with
unfinished work (pending, blocked or dead-lettered heads, which a clear would drop)
unless --include-unfinished. --dry-run lists what it would do and changes nothing."""

RECLAIM_DETAILS = """\
Deletes the rows a clear hid, in small batches (it never holds long locks), until none
remain, and reports how many it deleted. --all does so for every cleared session;
--older-than DURATION only for those whose newest event (the clear marker counts) is
older, by the database's clock. A session never cleared has nothing to reclaim."""


CLEARED = "cleared"
WOULD_CLEAR = "would clear"
CHANGED = "skipped: new events"
KEPT = "kept: unfinished work"
OUTCOMES = (CLEARED, WOULD_CLEAR, CHANGED, KEPT)
"""The outcomes of a bulk clear, per session (``outcome`` in its JSON too)."""


def _index(text: str) -> int:
    try:
        value: int | None = int(text)
    except ValueError:  # not left to argparse, whose message names this function
        value = None
    if value is None or value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number, 0 or more, got {text!r}")
    return value


def add_parsers(command: AddCommand) -> None:
    clear = command(
        "clear",
        "hide a session's events, or those of every session idle --older-than",
        CLEAR_DETAILS,
    )
    clear.add_argument("session", metavar="SESSION", nargs="?", default=None)
    clear.add_argument(
        "--if-last-index", type=_index, metavar="N", help="clear only while the head is N"
    )
    clear.add_argument(
        "--older-than",
        type=duration,
        metavar="DURATION",
        help="clear every session whose newest event is older (30d, 12h, 90m, 45s)",
    )
    clear.add_argument(
        "--include-unfinished",
        action="store_true",
        help="with --older-than: clear idle sessions with unfinished work too (dropping it)",
    )
    clear.add_argument(
        "--dry-run", action="store_true", help="with --older-than: list, change nothing"
    )

    reclaim = command(
        "reclaim",
        "delete what clears hid: one session's, or every cleared session's",
        RECLAIM_DETAILS,
    )
    reclaim.add_argument("session", metavar="SESSION", nargs="?", default=None)
    reclaim.add_argument("--all", action="store_true", help="every cleared session")
    reclaim.add_argument(
        "--older-than",
        type=duration,
        metavar="DURATION",
        help="only sessions whose newest event is older (30d, 12h, 90m, 45s)",
    )


# -- clear ------------------------------------------------------------------------------


async def cmd_clear(args: argparse.Namespace, stdout: TextIO) -> int:
    if (args.session is None) == (args.older_than is None):
        fail(EXIT_USAGE, "clear needs SESSION or --older-than DURATION (not both)")
    if args.session is None:
        if args.if_last_index is not None:
            fail(EXIT_USAGE, "--if-last-index clears one SESSION; not with --older-than")
        return await _clear_idle(args, stdout)
    if args.dry_run or args.include_unfinished:
        flag = "--dry-run" if args.dry_run else "--include-unfinished"
        fail(EXIT_USAGE, f"{flag} goes with --older-than; not with SESSION")
    return await _clear_one(args, stdout)


async def _clear_one(args: argparse.Namespace, stdout: TextIO) -> int:
    async with opened(args) as store:
        await require_session(store, args.session)
        result = await store.clear(args.session, if_last_index=args.if_last_index)
        await audit.record(
            store,
            "clear",
            session_id=args.session,
            outcome="cleared" if result.cleared else "not_cleared",
            if_last_index=args.if_last_index,
            clear_index=result.clear_index,
            head=result.index,
        )
    if args.json:
        out.write_json(
            stdout,
            {
                "session_id": args.session,
                "cleared": result.cleared,
                "index": result.index,
                "clear_index": result.clear_index,
            },
        )
    if not result.cleared:
        fail(
            EXIT_FAILED,
            f"not cleared: the head of session '{args.session}' is {result.index}, "
            f"not {args.if_last_index} (--if-last-index)",
        )
    if not args.json:
        stdout.write(
            f"cleared {args.session}: events below index {result.clear_index} are hidden; "
            f"`a2pg reclaim {args.session}` deletes them\n"
        )
    return EXIT_OK


def _clearable(info: SessionInfo, cutoff: datetime) -> bool:
    """Idle, and not already cleared up to its head (its newest event is not the marker)."""
    return is_idle(info, cutoff) and info.clear_index != info.head


def unfinished(info: SessionInfo) -> bool:
    """Whether a clear would drop work: pending, blocked or dead-lettered heads."""
    return bool(info.pending or info.blocked or info.dead_letters)


async def _clear_idle(args: argparse.Namespace, stdout: TextIO) -> int:
    rows: list[dict[str, Any]] = []
    async with opened(args) as store:
        cutoff = await idle_since(store, args.older_than)
        async for info in all_sessions(store):
            if _clearable(info, cutoff):
                rows.append(await _clear_idle_one(store, info, args))
        counts = {o: sum(1 for r in rows if r["outcome"] == o) for o in OUTCOMES}
        if not args.dry_run:
            await audit.record(
                store,
                "clear",
                older_than=args.older_than,
                cutoff=cutoff.isoformat(),
                include_unfinished=args.include_unfinished,
                matched=len(rows),
                cleared=counts[CLEARED],
                changed=counts[CHANGED],
                kept=counts[KEPT],
                outcome="cleared" if counts[CLEARED] else "nothing",
            )
    if args.json:
        out.write_json(
            stdout,
            {
                "dry_run": args.dry_run,
                "older_than": args.older_than,
                "cutoff": cutoff,
                "sessions": rows,
                "matched": len(rows),
                "cleared": counts[CLEARED],
            },
        )
        return EXIT_OK
    since = out.cell(cutoff)
    if not rows:
        stdout.write(f"no sessions to clear: none idle since {since}\n")
        return EXIT_OK
    columns = ("session_id", "head", "pending", "blocked", "dead_letters", "last_event_at")
    stdout.write(out.render_table((*columns, "outcome"), rows, empty=""))
    done = WOULD_CLEAR if args.dry_run else CLEARED
    summary = f"{done} {counts[done]} of {len(rows)} sessions idle since {since}"
    if counts[KEPT]:
        summary += f"; {counts[KEPT]} kept for their unfinished work (--include-unfinished)"
    stdout.write(summary + "\n")
    return EXIT_OK


async def _clear_idle_one(
    store: Store, info: SessionInfo, args: argparse.Namespace
) -> dict[str, Any]:
    """Clears one idle session at the head listed (unless it holds unfinished work)."""
    row: dict[str, Any] = {
        "session_id": info.session_id,
        "head": info.head,
        "pending": info.pending,
        "blocked": info.blocked,
        "dead_letters": info.dead_letters,
        "last_event_at": info.last_event_at,
    }
    if unfinished(info) and not args.include_unfinished:
        return {**row, "outcome": KEPT, "clear_index": info.clear_index}
    if args.dry_run:
        return {**row, "outcome": WOULD_CLEAR, "clear_index": info.clear_index}
    result = await store.clear(info.session_id, if_last_index=info.head)
    outcome = CLEARED if result.cleared else CHANGED
    return {**row, "outcome": outcome, "clear_index": result.clear_index}


# -- reclaim ----------------------------------------------------------------------------


async def cmd_reclaim(args: argparse.Namespace, stdout: TextIO) -> int:
    bulk = args.all or args.older_than is not None
    if (args.session is None) == (not bulk):
        fail(EXIT_USAGE, "reclaim needs SESSION, or --all and/or --older-than DURATION (not both)")
    if bulk:
        return await _reclaim_many(args, stdout)
    async with opened(args) as store:
        await require_session(store, args.session)
        deleted = await reclaim_all_of(store, args.session)
        await audit.record(store, "reclaim", session_id=args.session, deleted=deleted)
    if args.json:
        out.write_json(stdout, {"session_id": args.session, "deleted": deleted, "done": True})
    else:
        stdout.write(f"reclaimed {args.session}: {deleted} rows deleted\n")
    return EXIT_OK


async def reclaim_all_of(store: Store, session_id: str) -> int:
    """Calls ``reclaim`` until it is done (each call deletes one small batch)."""
    deleted = 0
    while True:
        result = await store.reclaim(session_id)
        deleted += result.deleted
        if result.done:
            return deleted


async def _reclaim_many(args: argparse.Namespace, stdout: TextIO) -> int:
    rows: list[dict[str, Any]] = []
    examined = 0
    async with opened(args) as store:
        cutoff = None if args.older_than is None else await idle_since(store, args.older_than)
        async for info in all_sessions(store):
            if info.clear_index == 0 or not is_idle(info, cutoff):
                continue  # never cleared: nothing below a marker
            examined += 1
            deleted = await reclaim_all_of(store, info.session_id)
            if deleted:
                rows.append({"session_id": info.session_id, "deleted": deleted})
        total = sum(int(r["deleted"]) for r in rows)
        await audit.record(
            store,
            "reclaim",
            all=args.all,
            older_than=args.older_than,
            examined=examined,
            sessions=len(rows),
            deleted=total,
        )
    if args.json:
        out.write_json(
            stdout,
            {
                "older_than": args.older_than,
                "cutoff": cutoff,
                "sessions": rows,
                "examined": examined,
                "deleted": total,
            },
        )
        return EXIT_OK
    if rows:
        stdout.write(out.render_table(("session_id", "deleted"), rows, empty=""))
    stdout.write(f"{total} rows deleted from {len(rows)} of {examined} cleared sessions\n")
    return EXIT_OK


COMMANDS: dict[str, Command] = {"clear": cmd_clear, "reclaim": cmd_reclaim}
