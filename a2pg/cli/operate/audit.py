"""``a2pg audit``: the operators' audit log, newest first; and ``record``, which every
operator command calls once its action has run.

An operator command records one entry when the store carried its action out, found
nothing to do included (``detail["outcome"]`` says so: a redrive of a head no longer
dead-lettered, a clear whose ``--if-last-index`` did not match, a bulk command that
matched nothing). A command refused before the store acted (a usage error, an unknown
session, a consumer not registered) or failing (a database error) records nothing, and
so does a ``--dry-run``, which changes nothing. The actor is ``cli:<OS user>@<host>``.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import socket
from typing import TYPE_CHECKING, Any, TextIO

from ...models import AnyLane, AuditAction, AuditEntry
from .. import output as out
from ..common import EXIT_OK, AddCommand, Command
from ..options import positive_int
from .base import opened

if TYPE_CHECKING:
    from ...models import JSON
    from ...store import Store

AUDIT_DETAILS = """\
Every operator action of the command line (redrive, cancel, clear, reclaim, pause,
resume, consumers --register/--unregister, backfill, workers --forget-stale) and of the
dashboard (redrive, pause, resume) is recorded once it has run: who (the dashboard's
login, or cli:USER@HOST), when (the database's clock), what, and how it went (the
detail: counts, filters, outcome). A refused or failed action, and a --dry-run, record
nothing. Lists the newest --limit entries; --after ID lists those older than entry ID
(the last one of the previous page)."""

COLUMNS = ("at", "actor", "action", "session_id", "consumer", "lane", "index", "detail")

ACTOR_CHARS = 128
"""At most this much of ``cli:user@host`` is kept: within every name limit a store allows
by default (so recording never refuses a long host name after the action ran)."""

TEXT_CHARS = 1_024
"""At most this much of a text is kept in a detail (a filter, a name)."""

LIST_CHARS = 8_192
"""Characters of the names a detail lists (consumers, holders, types) before it stops
and counts the rest: a detail stays far below ``Limits.max_presence_value_bytes``."""


def add_parsers(command: AddCommand) -> None:
    audit = command("audit", "list the operators' audit log, newest first", AUDIT_DETAILS)
    audit.add_argument(
        "--limit", metavar="N", type=positive_int, default=50, help="entries to list"
    )
    audit.add_argument(
        "--after", metavar="ID", help="only entries older than entry ID (the next page)"
    )


def _plain(text: str, chars: int) -> str:
    """``text`` cut to ``chars``, NUL and undecodable bytes (lone surrogates from the
    environment) escaped: a text every store stores."""
    kept = text[:chars].replace("\x00", "\\u0000")
    return kept.encode("utf-8", "backslashreplace").decode()[:chars]


def cli_actor() -> str:
    """``cli:<OS user>@<host>``: who ran the command, as this machine knows them."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no login name and no passwd entry (a bare container)
        user = f"uid {os.getuid()}" if hasattr(os, "getuid") else "unknown"
    host = socket.gethostname() or "localhost"
    return _plain(f"cli:{user}@{host}", ACTOR_CHARS)


def clip(text: str | None) -> str | None:
    """A text for a detail: at most ``TEXT_CHARS``."""
    return None if text is None else _plain(text, TEXT_CHARS)


def cursor_detail(lane: str | AnyLane | None) -> str:
    """Which cursor a one-head command named: ``first`` (none: the store's first in its
    order, the entry's lane then unknown), ``event`` (the event cursor) or ``lane``."""
    if isinstance(lane, AnyLane):
        return "first"
    return "event" if lane is None else "lane"


def listed(names: list[str]) -> dict[str, JSON]:
    """``{"names": [...], "count": n}``: the names up to ``LIST_CHARS`` characters in all,
    and how many there were (more than listed when they were cut)."""
    kept: list[JSON] = []
    room = LIST_CHARS
    for name in names:
        text = _plain(name, TEXT_CHARS)
        if len(text) > room:
            break
        kept.append(text)
        room -= len(text)
    return {"names": kept, "count": len(names)}


async def record(
    store: Store,
    action: AuditAction,
    *,
    session_id: str | None = None,
    consumer: str | None = None,
    lane: str | None = None,
    index: int | None = None,
    **detail: JSON,
) -> None:
    """Records that this command ran ``action`` (call it once the store has run it)."""
    entry = AuditEntry(cli_actor(), action, session_id, consumer, lane, index, detail)
    await store.record_audit(entry)


def _row(entry: AuditEntry) -> dict[str, Any]:
    return {
        "at": entry.at,
        "actor": entry.actor,
        "action": entry.action,
        "session_id": entry.session_id,
        "consumer": entry.consumer,
        "lane": entry.lane,
        "index": entry.index,
        "detail": json.dumps(entry.detail, ensure_ascii=False, separators=(",", ":")),
    }


async def cmd_audit(args: argparse.Namespace, stdout: TextIO) -> int:
    async with opened(args) as store:
        entries = await store.audit_log(after=args.after, limit=args.limit)
    if args.json:
        out.write_json(stdout, entries)
        return EXIT_OK
    stdout.write(out.render_table(COLUMNS, [_row(e) for e in entries], empty="no audit entries"))
    if len(entries) == args.limit:
        stdout.write(f"older entries: a2pg audit --after {entries[-1].id}\n")
    return EXIT_OK


COMMANDS: dict[str, Command] = {"audit": cmd_audit}
