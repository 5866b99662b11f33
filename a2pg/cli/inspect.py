"""The inspection commands: ``sessions``, ``cursors``, ``dead-letters`` (``redrive`` is in
``operate``, ``tail`` in its own module)."""

from __future__ import annotations

import argparse
import shlex
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TextIO

from ..contract.scalars import check_error_filter, check_name, check_session_id
from ..errors import A2Error
from ..models import DeadLetterKey, DeadLetterQuery
from . import output as out
from .common import (
    EXIT_OK,
    EXIT_USAGE,
    AddCommand,
    Command,
    fail,
    open_cli_store,
    require_session,
)
from .options import positive_int

if TYPE_CHECKING:
    from ..models import Head, SessionInfo
    from ..store import Store

DEAD_LETTER_PAGE = 100
"""Dead letters per ``find_dead_letters`` call."""

DEAD_LETTERS_DETAILS = """\
Every session's dead letters, or SESSION's, in (session, consumer, lane, index) order.
--consumer NAME and --error PATTERN (a case-insensitive substring of the last error, as
`a2pg redrive --error`) filter them, and must all match; --limit N lists the first N
(and says when more match). LAST ERROR is the last line of each head's last error;
--traceback prints all of it (the traceback) below the table. --json lists every head
with its whole last error (dispatch.last_error) and ignores --traceback."""


def add_parsers(command: AddCommand) -> None:
    """``sessions``, ``cursors``, ``dead-letters``."""
    sessions = command(
        "sessions", "list sessions: head, clear index, pending, blocked, dead letters, last event"
    )
    sessions.add_argument("--after", default=None, help="list sessions after this id")
    sessions.add_argument("--limit", type=positive_int, default=100, help="at most this many")

    cursors = command("cursors", "list a session's cursors and what each is doing")
    cursors.add_argument("session", metavar="SESSION")

    dead = command(
        "dead-letters",
        "list dead-lettered heads (blocked lanes shown as BLOCKED)",
        DEAD_LETTERS_DETAILS,
    )
    dead.add_argument(
        "session", metavar="SESSION", nargs="?", default=None, help="only this session's"
    )
    dead.add_argument("--consumer", metavar="NAME", help="only this consumer's")
    dead.add_argument(
        "--error", metavar="PATTERN", help="only those whose last error contains PATTERN (any case)"
    )
    dead.add_argument(
        "--limit",
        metavar="N",
        type=positive_int,
        default=None,
        help="at most this many (default: all)",
    )
    dead.add_argument("--traceback", action="store_true", help="print each head's whole last error")


async def cmd_sessions(args: argparse.Namespace, stdout: TextIO) -> int:
    async with open_cli_store(args) as store:
        sessions = await store.sessions(after=args.after, limit=args.limit)
    if args.json:
        out.write_json(stdout, out.session_rows(sessions))
        return EXIT_OK
    stdout.write(
        out.render_table(out.SESSION_COLUMNS, out.session_rows(sessions), empty="no sessions")
    )
    if len(sessions) == args.limit:
        stdout.write(f"(more: --after {sessions[-1].session_id})\n")
    for info in sessions:
        if info.blocked:
            stdout.write(blocked_note(info))
    if sessions:
        stdout.write(SESSIONS_LEGEND)
    return EXIT_OK


SESSIONS_LEGEND = """\
PENDING: heads to run (ready, leased, backing off or scheduled), one per cursor: a lane's
queued events behind its head are not counted. BLOCKED: events held behind a dead-lettered
lane or log head, in no other column: a session with PENDING 0 is idle only if BLOCKED is 0.
"""


def blocked_note(info: SessionInfo) -> str:
    """A session whose work is stuck behind dead letters, said in words: never read as idle."""
    letters = f"{info.dead_letters:,} dead letter{'' if info.dead_letters == 1 else 's'}"
    return (
        f"session {info.session_id}: pending {info.pending:,}, blocked {info.blocked:,} "
        f"behind {letters}: see `{shlex.join(['a2pg', 'cursors', info.session_id])}`\n"
    )


async def cmd_cursors(args: argparse.Namespace, stdout: TextIO) -> int:
    async with open_cli_store(args) as store:
        await require_session(store, args.session)
        cursors = await store.cursors(args.session)
    now = datetime.now(UTC)
    if args.json:
        out.write_json(stdout, [out.cursor_json(c, now) for c in cursors])
        return EXIT_OK
    rows = out.cursor_rows(cursors, now)
    stdout.write(out.render_table(out.CURSOR_COLUMNS, rows, empty="no cursors"))
    blocked = [r for r in rows if r["state"] == "BLOCKED"]
    for row in blocked:
        lane = row["lane"]
        command = shlex.join(
            ["a2pg", "redrive", args.session, row["consumer"], str(row["head"]), "--lane", lane]
        )
        stdout.write(
            f"BLOCKED: {row['consumer']}/{lane} is stuck at index {row['head']} until "
            f"`{command} --retry|--skip`\n"
        )
    return EXIT_OK


def _check_dead_letter_filters(args: argparse.Namespace) -> None:
    """Exit 2 for a filter the store would refuse, before anything connects."""
    checks = (
        ("SESSION", args.session, check_session_id),
        ("--consumer", args.consumer, lambda name: check_name(name, "consumer name")),
        ("--error", args.error, check_error_filter),
    )
    for option, value, check in checks:
        if value is not None:
            try:
                check(value)
            except A2Error as error:
                fail(EXIT_USAGE, f"{option}: {error.message}")


async def _find_dead_letters(store: Store, args: argparse.Namespace) -> tuple[list[Head], bool]:
    """The dead letters the filters pick, a keyset page of ``find_dead_letters`` at a time,
    and whether more match past ``--limit``. SESSION is asked of the store as a prefix:
    pages are in session order, so the first other session ends the walk."""
    session: str | None = args.session
    limit: int | None = args.limit
    heads: list[Head] = []
    after: DeadLetterKey | None = None
    while True:
        # one past the limit, to tell whether more match
        want = DEAD_LETTER_PAGE if limit is None else min(DEAD_LETTER_PAGE, limit + 1 - len(heads))
        query = DeadLetterQuery(
            consumer=args.consumer,
            error=args.error,
            session_prefix=session,
            after=after,
            limit=want,
        )
        page = await store.find_dead_letters(query)
        for head in page:
            if session is not None and head.session_id != session:
                return heads, False
            if len(heads) == limit:
                return heads, True
            heads.append(head)
        if len(page) < want:
            return heads, False
        after = DeadLetterKey.of(page[-1])


def traceback_text(head: Head) -> str:
    """A head's whole last error under a line naming it, indented (``--traceback``)."""
    lane = "" if head.lane is None else f"/{head.lane}"
    failures = f"{head.failure_count} failure{'' if head.failure_count == 1 else 's'}"
    when = out.cell(head.dispatch.failed_at)
    error = head.dispatch.last_error or "(no error recorded)"
    body = "".join(f"  {line}\n" for line in error.rstrip("\n").splitlines())
    name = f"{head.session_id}:{head.consumer}{lane}@{head.index}"
    return f"\n{name} ({failures}, dead-lettered {when}):\n{body}"


async def cmd_dead_letters(args: argparse.Namespace, stdout: TextIO) -> int:
    _check_dead_letter_filters(args)
    async with open_cli_store(args) as store:
        if args.session is not None:
            await require_session(store, args.session)
        heads, more = await _find_dead_letters(store, args)
    if args.json:
        out.write_json(stdout, [out.dead_letter_json(h) for h in heads])
        return EXIT_OK
    rows = [out.dead_letter_row(h) for h in heads]
    filtered = args.consumer is not None or args.error is not None
    empty = "no dead letters match" if filtered else "no dead letters"
    stdout.write(out.render_table(out.DEAD_LETTER_COLUMNS, rows, empty=empty))
    if more:
        stdout.write(f"(the first {len(heads)}; more match: raise --limit)\n")
    if any(h.lane is not None for h in heads):
        stdout.write(
            "BLOCKED lanes hold back their later events until redriven "
            "(`a2pg redrive SESSION CONSUMER INDEX --lane LANE --retry|--skip`)\n"
        )
    if args.traceback:
        stdout.write("".join(traceback_text(h) for h in heads))
    return EXIT_OK


COMMANDS: dict[str, Command] = {
    "sessions": cmd_sessions,
    "cursors": cmd_cursors,
    "dead-letters": cmd_dead_letters,
}
