"""The inspection commands: ``sessions``, ``cursors``, ``dead-letters``, ``redrive``, ``tail``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
import signal
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from ..models import ANY_LANE, AnyLane
from . import output as out
from .common import EXIT_NOT_FOUND, EXIT_OK, fail, open_cli_store

if TYPE_CHECKING:
    from ..models import Head, RedriveAction
    from ..store import Store

SESSION_PAGE = 100


async def require_session(store: Store, session_id: str) -> None:
    """Exit 5 for a session with no events: the store keeps nothing else about one."""
    if not await store.read(session_id, limit=1):
        fail(EXIT_NOT_FOUND, f"unknown session '{session_id}'")


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
    return EXIT_OK


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


def _redrive_lane(args: argparse.Namespace) -> str | AnyLane | None:
    """``--lane LANE``: that lane; ``--event-cursor``: None; neither: ``ANY_LANE``."""
    if args.event_cursor:
        return None
    lane: str | None = args.lane
    return ANY_LANE if lane is None else lane


def _cursor_words(lane: str | AnyLane | None) -> str:
    if isinstance(lane, AnyLane):
        return ""
    return " on its event cursor" if lane is None else f" on lane '{lane}'"


async def cmd_redrive(args: argparse.Namespace, stdout: TextIO) -> int:
    action: RedriveAction = "retry" if args.retry else "skip"
    lane = _redrive_lane(args)
    async with open_cli_store(args) as store:
        await require_session(store, args.session)
        result = await store.redrive(
            args.session, consumer=args.consumer, index=args.index, action=action, lane=lane
        )
    if not result.redriven:
        fail(
            EXIT_NOT_FOUND,
            f"no dead-lettered head of consumer '{args.consumer}' at index {args.index}"
            f"{_cursor_words(lane)} in session '{args.session}'",
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
            f"{_cursor_words(lane)}; pending work: {pending}\n"
        )
    return EXIT_OK


async def cmd_tail(args: argparse.Namespace, stdout: TextIO) -> int:
    """Prints the session's events after ``--after``, then live ones until SIGINT/SIGTERM."""
    async with open_cli_store(args) as store:
        await require_session(store, args.session)
        if not args.follow:
            after = args.after
            while True:
                events = await store.read(args.session, after=after, limit=500)
                for event in events:
                    _print_event(stdout, event, args.json)
                if len(events) < 500:
                    return EXIT_OK
                after = events[-1].index
        await _follow(store, args.session, args.after, stdout, args.json)
    return EXIT_OK


async def _follow(store: Store, session_id: str, after: int, stdout: TextIO, json: bool) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, stop.set)
    stream = store.stream(session_id, after=after)

    async def pump() -> None:
        async for event in stream:
            _print_event(stdout, event, json)

    pumping = asyncio.create_task(pump(), name="a2pg-tail")
    stopping = asyncio.create_task(stop.wait(), name="a2pg-tail-stop")
    try:
        await asyncio.wait({pumping, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
        for task in (pumping, stopping):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stopping
        with contextlib.suppress(asyncio.CancelledError):
            await pumping  # re-raises what broke the stream, if anything did
        aclose: Any = getattr(stream, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()


def _print_event(stdout: TextIO, event: Any, json: bool) -> None:
    stdout.write((out.dumps(event) if json else out.event_line(event)) + "\n")
    if stdout is sys.stdout:
        stdout.flush()
