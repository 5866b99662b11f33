"""``a2pg pause`` and ``a2pg resume``: stop claims of consumers (a downstream API is down), and
let them go again.

Both write the pause table every claim reads, so every worker sees a pause at its next
claim and a resume at its next wakeup; neither touches cursors or running attempts.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, TextIO

from ...models import AuditAction
from .. import output as out
from ..common import EXIT_OK, AddCommand, Command
from . import audit
from .base import opened

if TYPE_CHECKING:
    from ...store import Store

PAUSE_DETAILS = """\
Claims skip the heads of each NAME (a targeted consumer or a log consumer, registered or
not) from every worker's next claim on, until `a2pg resume NAME`. Nothing else changes:
cursors keep their place, new events still queue for the consumer, and attempts already
running finish (complete, fail, renew, release) as usual. Pausing a paused consumer
keeps the time it was first paused. A NAME that no consumer registered, no session
holds work for and no live worker serves is paused all the same (its work may come
later), with a note: check its spelling. `a2pg consumers` shows which are paused."""

RESUME_DETAILS = """\
Ends the pause of each NAME: its ready heads are claimable at once, and the workers
waiting for work are woken for them. Resuming a consumer that is not paused does
nothing. A NAME that no consumer registered, no session holds work for and no live
worker serves gets a note: check its spelling."""


def add_parsers(command: AddCommand) -> None:
    pause = command(
        "pause", "pause consumers: claims skip their heads until resumed", PAUSE_DETAILS
    )
    pause.add_argument("names", metavar="NAME", nargs="+", help="a consumer to pause")
    resume = command(
        "resume", "resume paused consumers: their heads are claimed again", RESUME_DETAILS
    )
    resume.add_argument("names", metavar="NAME", nargs="+", help="a consumer to resume")


def _names(args: argparse.Namespace) -> list[str]:
    """The names given, each once, in the order given."""
    return list(dict.fromkeys(args.names))


async def _unknown(store: Store, names: list[str]) -> list[str]:
    """The names no registered consumer has, no session holds heads for and no live
    worker serves (a typo, or work yet to come). Asked while they are not paused, so
    that a pause of its own does not make a name known."""
    known = {stats.consumer for stats in await store.consumer_stats()}
    for info in await store.workers():
        if not info.stale:
            known.update(info.beat.consumers)
    return [name for name in names if name not in known]


def _report(stdout: TextIO, args: argparse.Namespace, done: str, data: dict[str, Any]) -> None:
    names: list[str] = data[done]
    unknown: list[str] = data["unknown"]
    if args.json:
        out.write_json(stdout, data)
        return
    for name in names:
        if done == "paused":
            stdout.write(
                f"paused {name}: claims skip its heads until `a2pg resume {name}`; "
                "attempts already running finish\n"
            )
        else:
            stdout.write(f"resumed {name}: its ready heads are claimable again\n")
    for name in unknown:
        stdout.write(
            f"note: no consumer {name!r} is registered, has work in a session or is "
            "served by a live worker (check the spelling)\n"
        )


async def _record(store: Store, action: AuditAction, names: list[str], unknown: list[str]) -> None:
    """One audit entry per consumer (its name in the entry's consumer column); ``unknown``
    marks a name the note was printed for."""
    for name in names:
        await audit.record(store, action, consumer=name, unknown=name in unknown)


async def cmd_pause(args: argparse.Namespace, stdout: TextIO) -> int:
    names = _names(args)
    async with opened(args) as store:
        unknown = await _unknown(store, names)
        await store.pause_consumers(names)
        await _record(store, "pause", names, unknown)
    _report(stdout, args, "paused", {"paused": names, "unknown": unknown})
    return EXIT_OK


async def cmd_resume(args: argparse.Namespace, stdout: TextIO) -> int:
    names = _names(args)
    async with opened(args) as store:
        await store.resume_consumers(names)
        unknown = await _unknown(store, names)
        await _record(store, "resume", names, unknown)
    _report(stdout, args, "resumed", {"resumed": names, "unknown": unknown})
    return EXIT_OK


COMMANDS: dict[str, Command] = {"pause": cmd_pause, "resume": cmd_resume}
