"""``a2pg metrics``: the store's per-consumer gauges, printed once or served over HTTP."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from typing import TextIO

from ..observability.logs import TEXT_FORMAT
from ..observability.snapshot import read_snapshot, snapshot_json
from . import output as out
from .common import EXIT_OK, EXIT_USAGE, AddCommand, Command, fail, open_cli_store
from .observe import DEFAULT_METRICS_HOST, port, require_metrics, start_endpoint
from .options import non_negative_float

log = logging.getLogger("a2pg.metrics")

METRICS_HELP = "print (--once) or serve (--port) the store's per-consumer gauges"

METRICS_DETAILS = """\
Per consumer (every one registered, paused, served by a live worker or holding work,
with zeros where it has nothing): ready heads, the oldest ready head's age (the lag),
claimed heads, heads backing off, heads scheduled for later, dead letters, blocked lanes,
the events behind them and the oldest blocked lane's age, whether it is registered or
paused, its live workers and its backfill's progress; and how many workers' heartbeats
are live or stale. --once prints the Prometheus text format, for
node-exporter's textfile collector (write a temporary file, then rename it:
`a2pg metrics --once > a2pg.prom.tmp && mv a2pg.prom.tmp a2pg.prom`); --once --json
prints the same numbers as JSON. --port serves them at http://HOST:PORT/metrics until
SIGINT/SIGTERM, reading the store at most every --max-age seconds. The Prometheus forms
need pip install 'a2pg[metrics]'."""


def add_parsers(command: AddCommand) -> None:
    add_metrics_options(command("metrics", METRICS_HELP, METRICS_DETAILS))


def add_metrics_options(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="print the gauges once and exit")
    mode.add_argument(
        "--port", type=port, default=None, help="serve the gauges over HTTP on this port"
    )
    parser.add_argument(
        "--host",
        default=DEFAULT_METRICS_HOST,
        help="the address --port listens on (default: %(default)s, this machine only; "
        "0.0.0.0 for a scraper elsewhere, as in a container)",
    )
    parser.add_argument(
        "--max-age",
        type=non_negative_float,
        default=5.0,
        metavar="SECONDS",
        help="with --port: how long one reading of the store is served",
    )


async def cmd_metrics(args: argparse.Namespace, stdout: TextIO) -> int:
    if not args.once and args.port is None:
        fail(EXIT_USAGE, "give --once (print the gauges) or --port PORT (serve them)")
    if args.port is not None:
        if args.json:
            fail(EXIT_USAGE, "--json goes with --once, not with --port")
        return await _serve(args)
    if not args.json:
        require_metrics("a2pg metrics --once")
    async with open_cli_store(args) as store:
        snapshot = await read_snapshot(store)
    if args.json:
        out.write_json(stdout, snapshot_json(snapshot))
        return EXIT_OK
    from prometheus_client import CollectorRegistry, generate_latest

    from ..observability.collector import SnapshotCollector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snapshot))
    stdout.write(generate_latest(registry).decode())
    return EXIT_OK


async def _serve(args: argparse.Namespace) -> int:
    """Serves the store's gauges until SIGINT/SIGTERM."""
    require_metrics("a2pg metrics --port")
    from prometheus_client import CollectorRegistry

    from ..observability.collector import StoreCollector

    logging.basicConfig(level=logging.INFO, format=TEXT_FORMAT, stream=sys.stderr)
    registry = CollectorRegistry(auto_describe=True)
    with contextlib.ExitStack() as stack:
        endpoint = start_endpoint(stack, registry, args.host, args.port)  # before connecting
        async with open_cli_store(args) as store:
            collector = StoreCollector(store, asyncio.get_running_loop(), max_age=args.max_age)
            registry.register(collector)
            log.info("store metrics at %s", endpoint.url)
            try:
                await _until_signalled()
            finally:
                registry.unregister(collector)  # no scrape reaches a closed store
    return EXIT_OK


async def _until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)


COMMANDS: dict[str, Command] = {"metrics": cmd_metrics}
