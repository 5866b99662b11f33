"""``a2pg consumers``: every consumer's work, lag, registration, pause, backfill and live
workers, with a legend of the columns; ``--unregister``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, TextIO

from ...contract.args import check_register_consumers, check_unregister_consumers
from ...contract.limits import Limits
from ...models import Consumer, ConsumerStats, LogSpec, WorkerInfo
from .. import output as out
from ..common import EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, AddCommand, Command, fail
from . import audit
from .base import opened
from .cancel import drive_backfill

if TYPE_CHECKING:
    from ...store import Store

CONSUMERS_DETAILS = """\
One row per consumer that is registered, paused, served by a live worker or has work in
some session (a consumer with none of its own shows zeros): its heads ready, claimed,
backing off, scheduled and dead-lettered, its blocked lanes and the events held behind
them, its lag (how long the oldest ready head has waited, and how long the oldest
blocked lane has been stuck), whether it is paused, its backfill, and how many live
workers serve it. A legend under the table says what each column means. --unregister
NAME (repeatable) stops new events waking a log consumer; its cursors stay. Exits 5, and
unregisters nothing, when a NAME is not registered. --register NAME [--types T1,T2]
[--lane LANE] [--backfill] registers a log consumer as a worker serving it would; with
--backfill it then runs the backfill, printing its progress."""

COLUMNS = (
    "consumer",
    "registered",
    "served",
    "paused",
    "lane",
    "types",
    "ready",
    "claimed",
    "backing_off",
    "scheduled",
    "dead_letters",
    "blocked_lanes",
    "blocked",
    "lag",
    "backfill",
)

LEGEND = """\
REGISTERED     yes: in the consumer registry (the workers serving a log consumer register
               it), so an append, completion or redrive naming no consumers wakes it;
               no: a targeted consumer (events name it in their targets) or a log
               consumer no worker registered
SERVED         live workers whose heartbeat names it (one unseen for three heartbeat
               intervals is stale and not counted)
PAUSED         yes: claims skip its heads until it is resumed (its counts stay)
READY          heads claimable now
CLAIMED        heads under a live lease
BACKING OFF    failed heads waiting for their retry time
SCHEDULED      heads waiting for their target's not_before (never failed)
DEAD LETTERS   dead-lettered heads (a lane's or log's is also a blocked lane)
BLOCKED LANES  lane and log cursors stopped at a dead letter until it is redriven
BLOCKED        events queued behind those dead letters (counted in no other column)
LAG            how long the oldest ready head has waited; "blocked 12m": how long the
               oldest blocked lane has been stuck (since its head was dead-lettered)
BACKFILL       a log consumer's backfill: sessions given a cursor so far, running or done
"""
"""Printed under the table: what the less obvious columns count."""


def add_parsers(command: AddCommand) -> None:
    consumers = command(
        "consumers", "list consumers: work, lag, registration, live workers", CONSUMERS_DETAILS
    )
    consumers.add_argument(
        "--unregister",
        action="append",
        metavar="NAME",
        default=None,
        help="unregister this log consumer (repeatable)",
    )
    register = consumers.add_argument_group(
        "registering a log consumer (what a worker serving it does at start)"
    )
    register.add_argument("--register", metavar="NAME", help="register log consumer NAME")
    register.add_argument(
        "--types", metavar="T1,T2", help="--register: the event types it takes (default: all)"
    )
    register.add_argument(
        "--lane", metavar="LANE", default="log", help="--register: its cursor's name"
    )
    register.add_argument(
        "--backfill",
        action="store_true",
        help="--register: start at the clear marker, and bring every existing session's "
        "cursor into being now (the registry backfill; a worker resumes it if this stops)",
    )


async def cmd_consumers(args: argparse.Namespace, stdout: TextIO) -> int:
    if args.register is not None:
        if args.unregister:
            fail(EXIT_USAGE, "--register and --unregister: one at a time")
        return await _register(args, stdout)
    if args.types is not None or args.backfill or args.lane != "log":
        fail(EXIT_USAGE, "--types, --lane and --backfill describe a consumer to --register")
    if args.unregister:
        return await _unregister(args, stdout)
    async with opened(args) as store:
        registered = await store.registered_consumers()
        stats = await store.consumer_stats()
    rows = consumer_rows(registered, stats)
    if args.json:
        out.write_json(stdout, rows)
        return EXIT_OK
    stdout.write(out.render_table(COLUMNS, [_table_row(r) for r in rows], empty="no consumers"))
    if not rows:
        return EXIT_OK
    for row in rows:
        for note in _notes(row):
            stdout.write(f"consumer {row['consumer']}: {note}\n")
    stdout.write("\n" + LEGEND)
    return EXIT_OK


def served_by_live_workers(workers: list[WorkerInfo]) -> set[str]:
    """Consumer names some worker that is not stale serves."""
    return {name for w in workers if not w.stale for name in w.beat.consumers}


def consumer_rows(registered: list[Consumer], stats: list[ConsumerStats]) -> list[dict[str, Any]]:
    """One row per consumer, by name: the registry's spec joined to its work figures.
    ``backfill`` is the spec's flag, ``backfill_progress`` the backfill it started."""
    specs = {c.name: c for c in registered}
    by_name = {s.consumer: s for s in stats}
    rows = []
    for name in sorted(specs.keys() | by_name.keys()):
        spec = specs.get(name)
        stat = by_name.get(name) or ConsumerStats(name, 0, 0, 0, 0, 0, 0, None, spec is not None)
        log = spec.log if spec is not None else None
        progress = stat.backfill
        rows.append(
            {
                "consumer": name,
                "registered": spec is not None,
                "served": stat.served_by > 0,
                "served_by": stat.served_by,
                "paused": stat.paused,
                "lane": log.lane if log is not None else None,
                "types": list(log.types) if log is not None and log.types is not None else None,
                "backfill": log.backfill if log is not None else None,
                "ready": stat.ready,
                "claimed": stat.claimed,
                "backing_off": stat.backing_off,
                "scheduled": stat.scheduled,
                "dead_letters": stat.dead_letters,
                "blocked_lanes": stat.blocked_lanes,
                "blocked": stat.blocked,
                "lag": stat.oldest_ready_age,
                "blocked_age": stat.oldest_blocked_age,
                "backfill_progress": None
                if progress is None
                else {
                    "started_at": progress.started_at,
                    "sessions": progress.sessions,
                    "after": progress.after,
                    "done_at": progress.done_at,
                    "running": progress.running,
                },
            }
        )
    return rows


def _table_row(row: dict[str, Any]) -> dict[str, Any]:
    return {
        **row,
        "served": row["served_by"],
        "paused": "yes" if row["paused"] else None,
        "types": _types_cell(row["types"]),
        "lag": lag_cell(row["lag"], row["blocked_age"]),
        "backfill": backfill_cell(row["backfill_progress"]),
    }


def _notes(row: dict[str, Any]) -> list[str]:
    """What needs an operator's eye, one line each: blocked work, an unserved registration."""
    notes = []
    if row["blocked_lanes"]:
        lanes = _count(row["blocked_lanes"], "lane")
        behind = _count(row["blocked"], "event")
        notes.append(
            f"{lanes} blocked (the oldest for {age_text(row['blocked_age'] or 0.0)}), "
            f"{behind} behind: see `a2pg dead-letters`"
        )
    if row["registered"] and not row["served"]:
        notes.append("registered, no live worker")
    return notes


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def age_text(seconds: float) -> str:
    """A short age: ``3.0s`` under a minute, then ``12m``, ``3.5h``, ``2.0d``."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{seconds // 60:.0f}m"
    if seconds < 86400:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def lag_cell(ready_age: float | None, blocked_age: float | None) -> str | None:
    """The ready lag, then the blocked lanes' age: ``3.0s``, ``3.0s, blocked 12m``,
    ``blocked 12m``; nothing when neither."""
    parts = [] if ready_age is None else [age_text(ready_age)]
    if blocked_age is not None:
        parts.append(f"blocked {age_text(blocked_age)}")
    return ", ".join(parts) or None


def backfill_cell(progress: dict[str, Any] | None) -> str | None:
    """``running 1,200 sessions`` while a backfill runs, ``done 3,400`` once finished."""
    if progress is None:
        return None
    if progress["running"]:
        return f"running {_count(progress['sessions'], 'session')}"
    return f"done {progress['sessions']:,}"


def _types_cell(types: list[str] | None) -> str:
    return "" if types is None else ",".join(types)


async def _register(args: argparse.Namespace, stdout: TextIO) -> int:
    types = None if args.types is None else tuple(args.types.split(","))
    consumer = Consumer(args.register, LogSpec(args.lane, types, args.backfill))
    # A bad name, lane or type: exit 2, before connecting.
    [checked] = check_register_consumers([consumer], limits=Limits())
    async with opened(args) as store:
        await store.register_consumers([checked])
        await audit.record(
            store,
            "register",
            consumer=checked.name,
            lane=args.lane,
            types=None if types is None else audit.listed(list(types)),
            backfill=args.backfill,
        )
        if not args.json:
            kind = "with backfill" if args.backfill else "from each session's next event"
            stdout.write(f"registered {checked.name} (lane {args.lane}, {kind})\n")
        if args.backfill:
            await drive_backfill(store, checked.name, batch=100, json=args.json, out_=stdout)
        elif args.json:
            out.write_json(stdout, {"registered": checked.name, "backfill": False})
    return EXIT_OK


async def _unregister(args: argparse.Namespace, stdout: TextIO) -> int:
    names = list(dict.fromkeys(args.unregister))  # once each, in the order given
    check_unregister_consumers(names, limits=Limits())  # a bad name: exit 2, before connecting
    async with opened(args) as store:
        await _require_registered(store, names)
        await store.unregister_consumers(names)
        for name in names:
            await audit.record(store, "unregister", consumer=name)
    if args.json:
        out.write_json(stdout, {"unregistered": names})
    else:
        stdout.write(f"unregistered: {', '.join(names)}\n")
    return EXIT_OK


async def _require_registered(store: Store, names: list[str]) -> None:
    registered = {c.name for c in await store.registered_consumers()}
    unknown = [n for n in names if n not in registered]
    if unknown:
        listed = ", ".join(f"'{n}'" for n in unknown)
        fail(EXIT_NOT_FOUND, f"not registered: {listed} (nothing unregistered)")


COMMANDS: dict[str, Command] = {"consumers": cmd_consumers}
