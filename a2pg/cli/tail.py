"""``a2pg tail``: a session's events, then new ones as they come, until Ctrl-C."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from typing import TYPE_CHECKING, Any, TextIO

from . import output as out
from .common import EXIT_OK, AddCommand, Command, open_cli_store, require_session

if TYPE_CHECKING:
    from ..store import Store

PAGE = 500
"""Events per ``Store.read`` of the stored ones."""


def add_parsers(command: AddCommand) -> None:
    tail = command("tail", "print a session's events, then follow new ones until Ctrl-C")
    tail.add_argument("session", metavar="SESSION")
    tail.add_argument("--after", type=int, default=0, help="start after this index")
    tail.add_argument(
        "--no-follow",
        dest="follow",
        action="store_false",
        help="print the stored events and exit",
    )


async def cmd_tail(args: argparse.Namespace, stdout: TextIO) -> int:
    """Prints the session's events after ``--after``, then live ones until SIGINT/SIGTERM."""
    async with open_cli_store(args) as store:
        await require_session(store, args.session)
        if not args.follow:
            after = args.after
            while True:
                events = await store.read(args.session, after=after, limit=PAGE)
                for event in events:
                    _print_event(stdout, event, args.json)
                if len(events) < PAGE:
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


COMMANDS: dict[str, Command] = {"tail": cmd_tail}
