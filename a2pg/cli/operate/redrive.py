"""``a2pg redrive``: one dead-lettered head (SESSION CONSUMER INDEX), or every one a filter picks.

The two forms share the command: positional arguments name one head; without them,
``--session``, ``--consumer``, ``--error`` or ``--all`` select heads across sessions,
so a bare ``a2pg redrive --retry`` cannot redrive everything by accident.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, TextIO

from ...models import AnyLane, DeadLetterKey, DeadLetterQuery, Head, RedriveAction
from .. import output as out
from ..common import (
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    AddCommand,
    Command,
    fail,
    require_session,
)
from ..options import positive_int
from . import audit
from .base import cursor_lane, cursor_words, opened

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from ...store import Store

REDRIVE_DETAILS = """\
One head: SESSION CONSUMER INDEX. A consumer's event cursor and any of its lanes may
all be dead-lettered at one INDEX. --lane LANE or --event-cursor says which head to
redrive; without either, the one `a2pg dead-letters` lists first (the event cursor,
then lanes by name). Exits 5 when that cursor has no dead-lettered head at INDEX.

Many heads: no positional arguments, and any of --session SESSION, --consumer
CONSUMER, --error PATTERN (a case-insensitive substring of the last error), which must
all match; --all when none is given. --dry-run lists the heads and changes nothing.
Heads are redriven a page at a time, in (session, consumer, lane, index) order; a
head dead-lettered again while it runs may or may not be redriven again."""

USAGE = """
  a2pg redrive SESSION CONSUMER INDEX (--retry | --skip) [--lane LANE | --event-cursor]
  a2pg redrive (--retry | --skip) [--session SESSION] [--consumer CONSUMER]
               [--error PATTERN] [--all] [--dry-run]"""

PAGE = 100
"""Dead letters per ``find_dead_letters`` call."""

BULK_COLUMNS = (
    "session_id",
    "consumer",
    "lane",
    "index",
    "type",
    "failures",
    "last_error",
    "outcome",
)

REDRIVEN = "redriven"
WOULD_REDRIVE = "would redrive"
GONE = "gone"
"""Outcomes per head; ``gone``: no longer dead-lettered when its turn came."""


def add_parsers(command: AddCommand) -> None:
    redrive = command(
        "redrive", "retry or skip dead-lettered heads: one, or all a filter picks", REDRIVE_DETAILS
    )
    redrive.usage = USAGE
    redrive.add_argument("session", metavar="SESSION", nargs="?", default=None)
    redrive.add_argument("consumer", metavar="CONSUMER", nargs="?", default=None)
    redrive.add_argument("index", metavar="INDEX", nargs="?", default=None, type=positive_int)
    action = redrive.add_mutually_exclusive_group(required=True)
    action.add_argument("--retry", action="store_true", help="run the head(s) again")
    action.add_argument("--skip", action="store_true", help="finish them without running them")
    cursor = redrive.add_mutually_exclusive_group()
    cursor.add_argument(
        "--lane", metavar="LANE", help="one head: the head of the consumer's lane (or log) LANE"
    )
    cursor.add_argument(
        "--event-cursor",
        action="store_true",
        help="one head: the head of the event cursor (its event targeted without a lane)",
    )
    bulk = redrive.add_argument_group("many heads (instead of SESSION CONSUMER INDEX)")
    bulk.add_argument("--session", dest="only_session", metavar="SESSION", help="of this session")
    bulk.add_argument(
        "--consumer", dest="only_consumer", metavar="CONSUMER", help="of this consumer"
    )
    bulk.add_argument(
        "--error", metavar="PATTERN", help="whose last error contains PATTERN (any case)"
    )
    bulk.add_argument(
        "--all", action="store_true", help="every dead letter (when no filter is given)"
    )
    bulk.add_argument("--dry-run", action="store_true", help="list the heads, change nothing")


def _bulk_flags(args: argparse.Namespace) -> list[str]:
    given = {
        "--session": args.only_session is not None,
        "--consumer": args.only_consumer is not None,
        "--error": args.error is not None,
        "--all": args.all,
        "--dry-run": args.dry_run,
    }
    return [flag for flag, on in given.items() if on]


async def cmd_redrive(args: argparse.Namespace, stdout: TextIO) -> int:
    positional = [args.session, args.consumer, args.index]
    bulk = _bulk_flags(args)
    if any(p is not None for p in positional):
        if any(p is None for p in positional):
            fail(
                EXIT_USAGE,
                "redrive needs SESSION CONSUMER INDEX, or --session/--consumer/--error/--all",
            )
        if bulk:
            fail(EXIT_USAGE, f"{', '.join(bulk)}: not with SESSION CONSUMER INDEX (one head)")
        return await _redrive_one(args, stdout)
    if args.lane is not None or args.event_cursor:
        fail(EXIT_USAGE, "--lane and --event-cursor pick one head: give SESSION CONSUMER INDEX too")
    filters = [f for f in bulk if f not in ("--all", "--dry-run")]
    if not filters and not args.all:
        fail(
            EXIT_USAGE,
            "redrive needs SESSION CONSUMER INDEX, or --session, --consumer or --error, "
            "or --all to redrive every dead letter",
        )
    return await _redrive_many(args, stdout)


# -- one head ---------------------------------------------------------------------------


async def _record_one(
    store: Store,
    args: argparse.Namespace,
    action: RedriveAction,
    lane: str | AnyLane | None,
    *,
    redriven: bool,
) -> None:
    await audit.record(
        store,
        "redrive.retry" if action == "retry" else "redrive.skip",
        session_id=args.session,
        consumer=args.consumer,
        lane=lane if isinstance(lane, str) else None,
        index=args.index,
        outcome="redriven" if redriven else "not_found",
        cursor=audit.cursor_detail(lane),
    )


async def _redrive_one(args: argparse.Namespace, stdout: TextIO) -> int:
    action: RedriveAction = "retry" if args.retry else "skip"
    lane = cursor_lane(args)
    async with opened(args) as store:
        await require_session(store, args.session)
        result = await store.redrive(
            args.session, consumer=args.consumer, index=args.index, action=action, lane=lane
        )
        await _record_one(store, args, action, lane, redriven=result.redriven)
    if not result.redriven:
        fail(
            EXIT_NOT_FOUND,
            f"no dead-lettered head of consumer '{args.consumer}' at index {args.index}"
            f"{cursor_words(lane)} in session '{args.session}'",
        )
    if args.json:
        data: dict[str, Any] = {
            "session_id": args.session,
            "consumer": args.consumer,
            "index": args.index,
            "action": action,
            "redriven": True,
            "has_pending": result.has_pending,
        }
        if not isinstance(lane, AnyLane):
            data["lane"] = lane  # only when the command named the cursor
        out.write_json(stdout, data)
    else:
        pending = "yes" if result.has_pending else "no"
        stdout.write(
            f"redriven ({action}): {args.session} {args.consumer}@{args.index}"
            f"{cursor_words(lane)}; pending work: {pending}\n"
        )
    return EXIT_OK


# -- many heads -------------------------------------------------------------------------


async def matching(store: Store, args: argparse.Namespace) -> AsyncIterator[Head]:
    """The dead letters the filters select, a keyset page at a time. ``--session`` is asked
    of the store as a prefix; pages are in session order, so the first other session
    ends the walk."""
    session = args.only_session
    after: DeadLetterKey | None = None
    while True:
        query = DeadLetterQuery(
            consumer=args.only_consumer,
            error=args.error,
            session_prefix=session,
            after=after,
            limit=PAGE,
        )
        page = await store.find_dead_letters(query)
        for head in page:
            if session is not None and head.session_id != session:
                return
            yield head
        if len(page) < PAGE:
            return
        after = DeadLetterKey.of(page[-1])


def _row(head: Head, outcome: str, has_pending: bool | None) -> dict[str, Any]:
    row = out.dead_letter_row(head)
    del row["state"], row["failed_at"]
    return {**row, "outcome": outcome, "has_pending": has_pending}


async def _record_many(
    store: Store, args: argparse.Namespace, action: RedriveAction, rows: list[dict[str, Any]]
) -> None:
    """One entry for the whole selection: its filters and counts (``gone``: heads no
    longer dead-lettered when their turn came)."""
    redriven = sum(1 for r in rows if r["outcome"] == REDRIVEN)
    await audit.record(
        store,
        "redrive.retry" if action == "retry" else "redrive.skip",
        session_id=args.only_session,
        consumer=args.only_consumer,
        filters={
            "session": args.only_session,
            "consumer": args.only_consumer,
            "error": audit.clip(args.error),
            "all": args.all,
        },
        matched=len(rows),
        redriven=redriven,
        gone=len(rows) - redriven,
        outcome="redriven" if redriven else "nothing",
    )


async def _redrive_many(args: argparse.Namespace, stdout: TextIO) -> int:
    action: RedriveAction = "retry" if args.retry else "skip"
    rows: list[dict[str, Any]] = []
    async with opened(args) as store:
        if args.only_session is not None:
            await require_session(store, args.only_session)
        async for head in matching(store, args):
            if args.dry_run:
                rows.append(_row(head, WOULD_REDRIVE, None))
                continue
            result = await store.redrive(
                head.session_id,
                consumer=head.consumer,
                index=head.index,
                action=action,
                lane=head.lane,
            )
            outcome = REDRIVEN if result.redriven else GONE
            rows.append(_row(head, outcome, result.has_pending if result.redriven else None))
        if not args.dry_run:
            await _record_many(store, args, action, rows)
    redriven = sum(1 for r in rows if r["outcome"] == REDRIVEN)
    if args.json:
        out.write_json(
            stdout,
            {
                "action": action,
                "dry_run": args.dry_run,
                "filters": {
                    "session": args.only_session,
                    "consumer": args.only_consumer,
                    "error": args.error,
                },
                "heads": rows,
                "matched": len(rows),
                "redriven": redriven,
            },
        )
        return EXIT_OK
    stdout.write(out.render_table(BULK_COLUMNS, rows, empty="no dead letters match"))
    if args.dry_run:
        stdout.write(f"would {action} {len(rows)} dead-lettered heads (dry run: nothing changed)\n")
    elif rows:
        stdout.write(f"redriven ({action}): {redriven} of {len(rows)} dead-lettered heads\n")
    return EXIT_OK


COMMANDS: dict[str, Command] = {"redrive": cmd_redrive}
