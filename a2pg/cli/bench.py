"""``a2pg bench``: runs the benchmark and prints its table (or JSON)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from typing import Any, TextIO

from ..bench.citus import CitusConfig
from ..bench.config import BenchConfig
from ..bench.sync import Sync
from ..bench.versus_config import VersusConfig
from . import bench_citus as citus
from . import bench_versus as versus
from . import output as out
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, AddCommand, Command, fail, site
from .options import add_options, from_args, given_options

BENCH_DETAILS = """\
Each run first measures the server's commit ceiling (N connections committing an
INSERT and an UPDATE per transaction), then every phase, and reports each figure
as a ratio to that ceiling. Without --dsn (or $A2PG_DSN) it runs on a throwaway
embedded PostgreSQL. With --dsn, give it a schema of its own (--schema bench):
its sessions stay behind there; its scratch ceiling table and history schemas
(<schema>_history_<n>_<id>) are dropped at the end.

With --versus pgqueuer (pip install 'a2pg[bench]') it measures a2pg and pgqueuer
head to head instead, on the same server and event loop (uvloop when installed):
appends (single jobs, batches of 100), a drain by 4 workers, appends while
draining, and an idle worker's wake latency, in interleaved rounds (--rounds),
each system in a fresh schema of its own (a2pg_vs_<id>, pgqueuer_vs_<id>,
dropped at the end), every job checked done exactly once. It reports each
system's medians and the median same-round ratio a2pg / pgqueuer against its
target. --sync off turns synchronous_commit off for the run's connections (both
benches).

With --citus it starts throwaway Citus clusters of the embedded wheel (1, 2 and 4
worker nodes, --citus-nodes; Citus must be installed into the wheel: a2pg does not
ship it) and one PostgreSQL of the same wheel, all with synchronous_commit off, and
drains the same backlog on each in interleaved rounds (--citus-rounds), checking
every head done once. It reports heads/s, every server's CPU per head (coordinator
and each node, from /proc), the balance across nodes, the price against one
PostgreSQL, and a projection, labelled as one, of what servers on machines of their
own would do: on one machine the nodes share the cores."""


def add_parsers(command: AddCommand) -> None:
    bench = command(
        "bench",
        "measure a2pg against the machine's commit ceiling (medians of --runs)",
        BENCH_DETAILS,
    )
    add_options(bench, BenchConfig)
    versus.add_options(bench)
    citus.add_options(bench)


def event_loop(args: argparse.Namespace) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop for ``bench --versus`` when installed (the systems compared share that loop:
    pgqueuer's own recommendation); asyncio's default loop for everything else."""
    if getattr(args, "versus", None) is None:
        return None
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


COLUMNS = ("figure", "median", "spread", "x ceiling", "target", "met")


def number(value: float | None, unit: str) -> str:
    """A figure's value as the table shows it: whole rates, ms to 0.1, ratios to 0.01."""
    if value is None:
        return "-"
    if unit in ("ms", "MB"):
        return f"{value:,.1f}"
    if unit == "x":
        return f"{value:.2f}"
    return f"{value:,.0f}"


def row(figure: dict[str, Any]) -> dict[str, str]:
    unit = figure["unit"]
    ratio = figure["ratio"]
    target = figure["target"]
    met = "" if target is None else {True: "yes", False: "NO", None: "-"}[target["met"]]
    times = ""
    if ratio is not None:
        times = f"{number(ratio['median'], 'x')}x ({number(ratio['min'], 'x')}-"
        times += f"{number(ratio['max'], 'x')})"
    return {
        "figure": figure["name"],
        "median": number(figure["median"], unit) + ("x" if unit == "x" else f" {unit}"),
        "spread": f"{number(figure['min'], unit)}-{number(figure['max'], unit)}",
        "x ceiling": times,
        "target": "" if target is None else target["text"],
        "met": met,
    }


def print_table(stdout: TextIO, data: dict[str, Any]) -> None:
    c, m = data["config"], data["machine"]
    runs = " / ".join(out.load(values) for values in m.get("load_average_runs") or [])
    stdout.write(
        f"a2pg bench on {data['database']}: medians of {c['runs']} runs, spread min-max\n"
        f"machine: {m['cpu_cores']} cores, {m['server']}, Python {m['python']}, {m['date']}\n"
        f"load average (1 min): {out.load(m.get('load_average_start'))} at start, "
        f"{runs or 'unknown'} as the runs began, {out.load(m.get('load_average_end'))} at end\n"
        f"ceiling: {data['ceiling']['shape']}, on N connections; N = {data['ceiling']['n']}\n"
    )
    rows = [row(figure) for figure in data["figures"].values()]
    stdout.write(out.render_table(COLUMNS, rows, empty="no figures"))
    out.write_outcome(stdout, data)


async def cmd_bench(args: argparse.Namespace, stdout: TextIO) -> int:
    from ..bench import BenchFailed, run_bench
    from ..bench.run import check_sync

    sync: Sync = "off" if getattr(args, "sync", "on") == "off" else "on"
    on_citus = bool(getattr(args, "citus", False))
    on_versus = getattr(args, "versus", None) is not None
    for given, flag, on in (
        (given_options(CitusConfig, args), "--citus", on_citus),
        (given_options(VersusConfig, args), "--versus", on_versus),
    ):
        if given and not on:
            fail(EXIT_USAGE, f"{', '.join(given)}: only with {flag}")
    if on_citus or on_versus:
        try:
            return await (citus.cmd_citus if on_citus else versus.cmd_versus)(args, stdout)
        except BenchFailed as exc:
            fail(EXIT_FAILED, str(exc))
    config = from_args(BenchConfig, args)
    database = site(args)
    check_sync(database, sync)
    throwaway = database.throwaway("bench", _quiet)  # its extra checked before anything
    try:
        with throwaway as (bench_site, where):
            data = await run_bench(bench_site, config, sys.stderr, sync=sync, where=where)
    except BenchFailed as exc:
        fail(EXIT_FAILED, str(exc))
    ok = out.write_report(stdout, data, as_json=args.json, table=print_table)
    return EXIT_OK if ok else EXIT_FAILED


def _quiet(text: str) -> None:
    """The bench's progress is its own (on stderr): a throwaway database starts silently."""


COMMANDS: dict[str, Command] = {"bench": cmd_bench}
