"""``a2pg attempts``: one head's attempt history; ``a2pg prune-attempts``: its retention.

Every finished attempt (completed, failed, dead-lettered, released, lapsed, cancelled) is
kept with its holder, times and error; the running one is the head's dispatch, shown by
``a2pg cursors``. A retention job runs ``a2pg prune-attempts --older-than 30d``.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from ...contract.args import MAX_PRUNE
from ...models import AttemptRecord
from .. import output as out
from ..common import EXIT_OK, EXIT_USAGE, AddCommand, Command, fail, require_session
from ..options import positive_int
from .base import cursor_lane, duration, idle_since, opened

ATTEMPTS_DETAILS = """\
The finished attempts of CONSUMER's head at INDEX in SESSION, by attempt number: who held
it, when it was claimed and ended, how long it ran, how it ended (completed, failed,
dead_lettered, released, lapsed: its lease ran out; cancelled: `a2pg cancel` while it
ran) and its error (--traceback prints each error whole). --lane LANE or --event-cursor
picks one cursor; without either, every cursor of the consumer at INDEX. Attempts older
than the retention (`a2pg prune-attempts`) are gone."""

PRUNE_DETAILS = """\
Deletes the attempts that ended more than --older-than ago (by the store's clock), in
batches of --batch, oldest first, and prints how many. The attempt history grows by one
row per attempt; run this from the same job as `a2pg reclaim`."""


def add_parsers(command: AddCommand) -> None:
    attempts = command(
        "attempts", "a head's attempt history: every attempt, its end and error", ATTEMPTS_DETAILS
    )
    attempts.add_argument("session", metavar="SESSION")
    attempts.add_argument("consumer", metavar="CONSUMER")
    attempts.add_argument("index", metavar="INDEX", type=positive_int)
    cursor = attempts.add_mutually_exclusive_group()
    cursor.add_argument("--lane", metavar="LANE", help="the consumer's lane (or log) LANE only")
    cursor.add_argument("--event-cursor", action="store_true", help="its event cursor only")
    attempts.add_argument("--traceback", action="store_true", help="print each error whole")
    prune = command("prune-attempts", "delete attempt history past its retention", PRUNE_DETAILS)
    prune.add_argument(
        "--older-than",
        metavar="DURATION",
        type=duration,
        required=True,
        help="ended longer ago than this (30s, 15m, 12h, 30d)",
    )
    prune.add_argument(
        "--batch",
        metavar="N",
        type=positive_int,
        default=10_000,
        help=f"rows per statement (at most {MAX_PRUNE})",
    )


def _row(record: AttemptRecord) -> dict[str, Any]:
    return {
        "attempt": record.attempt,
        "lane": record.lane,
        "holder": record.holder,
        "ready_at": None if record.ready_at is None else record.ready_at.isoformat(),
        "started_at": None if record.started_at is None else record.started_at.isoformat(),
        "ended_at": record.ended_at.isoformat(),
        "duration": record.duration,
        "wait": record.wait,
        "outcome": record.outcome,
        "error": record.error,
    }


async def cmd_attempts(args: argparse.Namespace, stdout: TextIO) -> int:
    async with opened(args) as store:
        await require_session(store, args.session)
        records = await store.attempts(
            args.session, consumer=args.consumer, index=args.index, lane=cursor_lane(args)
        )
    if args.json:
        out.write_json(stdout, [_row(r) for r in records])
        return EXIT_OK
    if not records:
        stdout.write(
            f"no finished attempt of {args.consumer}@{args.index} in {args.session} "
            "(none yet, or pruned)\n"
        )
        return EXIT_OK
    for record in records:
        lasted = "" if record.duration is None else f" after {record.duration:.3f}s"
        waited = "" if record.wait is None else f" (waited {record.wait:.3f}s)"
        lane = "" if record.lane is None else f" lane {record.lane}"
        stdout.write(
            f"attempt {record.attempt}{lane}: {record.outcome}{lasted}{waited} at "
            f"{record.ended_at.isoformat()} by {record.holder or '-'}\n"
        )
        if record.error:
            error = record.error if args.traceback else record.error.splitlines()[0]
            stdout.write("".join(f"    {line}\n" for line in error.splitlines()))
    return EXIT_OK


async def cmd_prune_attempts(args: argparse.Namespace, stdout: TextIO) -> int:
    if args.batch > MAX_PRUNE:
        fail(EXIT_USAGE, f"--batch must be at most {MAX_PRUNE}, got {args.batch}")
    async with opened(args) as store:
        cutoff = await idle_since(store, args.older_than)  # by the store's clock
        total = 0
        while True:
            deleted = await store.prune_attempts(before=cutoff, limit=args.batch)
            total += deleted
            if deleted < args.batch:
                break
    if args.json:
        out.write_json(stdout, {"deleted": total, "before": cutoff.isoformat()})
    else:
        stdout.write(f"pruned {total} attempts that ended before {cutoff.isoformat()}\n")
    return EXIT_OK


COMMANDS: dict[str, Command] = {"attempts": cmd_attempts, "prune-attempts": cmd_prune_attempts}
