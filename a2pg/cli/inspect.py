"""The inspection commands: ``sessions``, ``cursors``, ``dead-letters`` (``redrive`` is in
``operate``, ``tail`` in its own module)."""

from __future__ import annotations

import argparse
import shlex
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TextIO

from . import output as out
from .common import EXIT_OK, AddCommand, Command, open_cli_store, require_session
from .options import positive_int

if TYPE_CHECKING:
    from ..models import Head, SessionInfo
    from ..store import Store

SESSION_PAGE = 100


def add_parsers(command: AddCommand) -> None:
    """``sessions``, ``cursors``, ``dead-letters``."""
    sessions = command(
        "sessions", "list sessions: head, clear index, pending, blocked, dead letters, last event"
    )
    sessions.add_argument("--after", default=None, help="list sessions after this id")
    sessions.add_argument("--limit", type=positive_int, default=100, help="at most this many")

    cursors = command("cursors", "list a session's cursors and what each is doing")
    cursors.add_argument("session", metavar="SESSION")

    dead = command("dead-letters", "list dead-lettered heads (blocked lanes shown as BLOCKED)")
    dead.add_argument("session", metavar="SESSION", nargs="?", default=None)


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


async def _all_dead_letters(store: Store) -> list[Head]:
    """Dead letters of every session, paging through the session listing."""
    heads: list[Head] = []
    after: str | None = None
    while True:
        page = await store.sessions(after=after, limit=SESSION_PAGE)
        for info in page:
            if info.dead_letters:
                heads.extend(await store.dead_letters(info.session_id))
        if len(page) < SESSION_PAGE:
            return heads
        after = page[-1].session_id


async def cmd_dead_letters(args: argparse.Namespace, stdout: TextIO) -> int:
    async with open_cli_store(args) as store:
        if args.session is None:
            heads = await _all_dead_letters(store)
        else:
            await require_session(store, args.session)
            heads = await store.dead_letters(args.session)
    if args.json:
        out.write_json(stdout, [out.dead_letter_json(h) for h in heads])
        return EXIT_OK
    rows = [out.dead_letter_row(h) for h in heads]
    stdout.write(out.render_table(out.DEAD_LETTER_COLUMNS, rows, empty="no dead letters"))
    if any(h.lane is not None for h in heads):
        stdout.write(
            "BLOCKED lanes hold back their later events until redriven "
            "(`a2pg redrive SESSION CONSUMER INDEX --lane LANE --retry|--skip`)\n"
        )
    return EXIT_OK


COMMANDS: dict[str, Command] = {
    "sessions": cmd_sessions,
    "cursors": cmd_cursors,
    "dead-letters": cmd_dead_letters,
}
