"""``a2pg consumers``: every consumer's work, registration and live workers; ``--unregister``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, TextIO

from ...contract.args import check_unregister_consumers
from ...contract.limits import Limits
from ...models import Consumer, ConsumerStats, WorkerInfo
from .. import output as out
from ..common import EXIT_NOT_FOUND, EXIT_OK, AddCommand, Command, fail
from .base import opened

if TYPE_CHECKING:
    from ...store import Store

CONSUMERS_DETAILS = """\
One row per consumer that is registered (log consumers, registered by the workers that
serve them) or has work in some session: its heads ready, claimed, backing off and
dead-lettered, its blocked lanes and the events held behind them, its lag (seconds the
oldest ready head has waited), and whether a live worker serves it. --unregister NAME
(repeatable) stops new events waking a log consumer; its cursors stay. Exits 5, and
unregisters nothing, when a NAME is not registered."""

COLUMNS = (
    "consumer",
    "registered",
    "served",
    "lane",
    "types",
    "ready",
    "claimed",
    "backing_off",
    "dead_letters",
    "blocked_lanes",
    "blocked",
    "lag",
)


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


async def cmd_consumers(args: argparse.Namespace, stdout: TextIO) -> int:
    if args.unregister:
        return await _unregister(args, stdout)
    async with opened(args) as store:
        registered = await store.registered_consumers()
        stats = await store.consumer_stats()
        workers = await store.workers()
    rows = consumer_rows(registered, stats, workers)
    if args.json:
        out.write_json(stdout, rows)
        return EXIT_OK
    table = [{**r, "types": _types_cell(r["types"]), "lag": _seconds_cell(r["lag"])} for r in rows]
    stdout.write(out.render_table(COLUMNS, table, empty="no consumers"))
    for row in rows:
        if row["registered"] and not row["served"]:
            stdout.write(f"consumer {row['consumer']}: registered, no live worker\n")
    return EXIT_OK


def served_by_live_workers(workers: list[WorkerInfo]) -> set[str]:
    """Consumer names some worker that is not stale serves."""
    return {name for w in workers if not w.stale for name in w.beat.consumers}


def consumer_rows(
    registered: list[Consumer], stats: list[ConsumerStats], workers: list[WorkerInfo]
) -> list[dict[str, Any]]:
    """One row per consumer, by name: the registry's spec joined to its work figures."""
    specs = {c.name: c for c in registered}
    by_name = {s.consumer: s for s in stats}
    served = served_by_live_workers(workers)
    rows = []
    for name in sorted(specs.keys() | by_name.keys()):
        spec = specs.get(name)
        stat = by_name.get(name)
        log = spec.log if spec is not None else None
        rows.append(
            {
                "consumer": name,
                "registered": spec is not None,
                "served": name in served,
                "lane": log.lane if log is not None else None,
                "types": list(log.types) if log is not None and log.types is not None else None,
                "backfill": log.backfill if log is not None else None,
                "ready": stat.ready if stat else 0,
                "claimed": stat.claimed if stat else 0,
                "backing_off": stat.backing_off if stat else 0,
                "dead_letters": stat.dead_letters if stat else 0,
                "blocked_lanes": stat.blocked_lanes if stat else 0,
                "blocked": stat.blocked if stat else 0,
                "lag": stat.oldest_ready_age if stat else None,
            }
        )
    return rows


def _seconds_cell(seconds: float | None) -> str | None:
    return None if seconds is None else f"{seconds:.1f}s"


def _types_cell(types: list[str] | None) -> str:
    return "" if types is None else ",".join(types)


async def _unregister(args: argparse.Namespace, stdout: TextIO) -> int:
    names = list(dict.fromkeys(args.unregister))  # once each, in the order given
    check_unregister_consumers(names, limits=Limits())  # a bad name: exit 2, before connecting
    async with opened(args) as store:
        await _require_registered(store, names)
        await store.unregister_consumers(names)
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
