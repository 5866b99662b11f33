"""``a2pg workers``: the workers' heartbeats, stale ones marked, and consumers none serves."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from ...models import WorkerInfo
from .. import output as out
from ..common import EXIT_OK, AddCommand, Command
from . import audit
from .base import opened
from .consumers import served_by_live_workers

WORKERS_DETAILS = """\
Every worker heartbeats its holder name, host, pid, consumers, concurrency and the
attempts it is running. A worker unseen for three of its heartbeat intervals (killed,
hung or cut off from the database) is marked STALE; a worker that stops cleanly removes
its row, --forget-stale removes the stale ones. Then one line per registered consumer
that no live worker serves."""

COLUMNS = (
    "holder",
    "host",
    "pid",
    "consumers",
    "concurrency",
    "in_flight",
    "started_at",
    "last_seen",
    "version",
    "state",
)

LIVE = "live"
STALE = "STALE"


def add_parsers(command: AddCommand) -> None:
    workers = command(
        "workers",
        "list live workers (stale ones marked STALE) and unserved consumers",
        WORKERS_DETAILS,
    )
    workers.add_argument(
        "--forget-stale",
        action="store_true",
        help="drop the rows of stale workers (one that comes back beats a new row)",
    )


def worker_json(info: WorkerInfo) -> dict[str, Any]:
    beat = info.beat
    return {
        "holder": beat.holder,
        "host": beat.host,
        "pid": beat.pid,
        "consumers": list(beat.consumers),
        "concurrency": beat.concurrency,
        "in_flight": beat.in_flight,
        "started_at": beat.started_at,
        "last_seen": info.last_seen,
        "seen_ago": info.seen_ago,
        "interval": beat.interval,
        "completed": beat.completed,
        "failed": beat.failed,
        "version": beat.version,
        "stale": info.stale,
    }


def _table_row(info: WorkerInfo) -> dict[str, Any]:
    row = worker_json(info)
    row["consumers"] = ",".join(info.beat.consumers)
    row["last_seen"] = f"{info.seen_ago:.1f}s ago"
    row["state"] = STALE if info.stale else LIVE
    return row


async def cmd_workers(args: argparse.Namespace, stdout: TextIO) -> int:
    if args.forget_stale:
        return await _forget_stale(args, stdout)
    async with opened(args) as store:
        workers = await store.workers()
        registered = await store.registered_consumers()
    served = served_by_live_workers(workers)
    unserved = sorted(c.name for c in registered if c.name not in served)
    if args.json:
        out.write_json(
            stdout, {"workers": [worker_json(w) for w in workers], "unserved_consumers": unserved}
        )
        return EXIT_OK
    rows = [_table_row(w) for w in workers]
    stdout.write(out.render_table(COLUMNS, rows, empty="no workers"))
    for name in unserved:
        stdout.write(f"consumer {name}: registered, no live worker\n")
    return EXIT_OK


async def _forget_stale(args: argparse.Namespace, stdout: TextIO) -> int:
    async with opened(args) as store:
        stale = [w.beat.holder for w in await store.workers() if w.stale]
        if stale:
            await store.forget_workers(stale)
        await audit.record(
            store, "forget_workers", forgotten=len(stale), holders=audit.listed(stale)
        )
    if args.json:
        out.write_json(stdout, {"forgotten": stale})
    else:
        stdout.write(
            f"forgot {len(stale)} stale workers{': ' if stale else ''}{', '.join(stale)}\n"
        )
    return EXIT_OK


COMMANDS: dict[str, Command] = {"workers": cmd_workers}
