"""``a2pg bench --citus``: its options, its run on throwaway clusters, and its table."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, TextIO

from ..bench.citus import CitusConfig
from . import output as out
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail
from .options import add_mode_options, from_given

COLUMNS = ("setup", "heads/s", "server CPU/head", "coordinator", "per node", "node balance",
           "x one PostgreSQL", "projected heads/s")  # fmt: skip

FOOTER = """\
server CPU/head: every server's user+system CPU (/proc) during the drain, per head; per
node: each worker node's; node balance: busiest node / idlest; x one PostgreSQL: server
CPU per head against one PostgreSQL's in the same round (Citus's price).
2 shared cores cannot show throughput scaling: every server and this client run on
the same cores, so heads/s here says nothing of what more machines would do.
projected heads/s is a PROJECTION, not a measurement: the rate at which the busiest
server would use one core of its own (1000 / its CPU ms per head), with every server
on a machine of its own, clients elsewhere, and no network cost.
"""


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--citus",
        action="store_true",
        help="drain on throwaway Citus clusters (1, 2, 4 worker nodes) and one PostgreSQL, "
        "and report each server's CPU per head (needs Citus in the embedded wheel)",
    )
    add_mode_options(parser, CitusConfig, "--citus")


async def cmd_citus(args: argparse.Namespace, stdout: TextIO) -> int:
    from ..bench.citus import run_citus_bench
    from ..postgres.embedded import EmbeddedUnavailable
    from ..postgres.embedded_citus import require_citus

    explicit_dsn = args.dsn is not None and args.dsn != os.environ.get("A2PG_DSN")
    for option, given in (("--dsn", explicit_dsn), ("--sqlite", getattr(args, "sqlite", None)),
                          ("--versus", getattr(args, "versus", None))):  # fmt: skip
        if given:
            fail(EXIT_USAGE, f"--citus starts its own servers (it reads their CPU): not {option}")
    c = from_given(CitusConfig, args)
    try:
        require_citus()
        data = await run_citus_bench(c, sys.stderr)
    except EmbeddedUnavailable as exc:
        fail(EXIT_USAGE, str(exc))
    ok = out.write_report(stdout, data, as_json=args.json, table=print_table)
    return EXIT_OK if ok else EXIT_FAILED


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} ms"


def row(figures: dict[str, Any]) -> dict[str, str]:
    rate, total, price = (figures[k] for k in ("heads_per_s", "server_cpu_ms_per_head",
                                               "price_x_one_postgresql"))  # fmt: skip
    cpu = figures["cpu_ms_per_head"]
    nodes = [f"{cpu[name]:.2f}" for name in figures["heads_share"]]
    shares = [f"{share:.0%}" for share in figures["heads_share"].values()]
    balance = figures["node_cpu_balance"]
    projected = figures["projected_heads_per_s"]
    return {
        "setup": figures["setup"],
        "heads/s": f"{rate['median']:,.0f} ({rate['min']:,.0f}-{rate['max']:,.0f})",
        "server CPU/head": f"{_ms(total['median'])} ({total['min']:.2f}-{total['max']:.2f})",
        "coordinator": _ms(cpu.get("coordinator")),
        "per node": " / ".join(nodes) + (f" ms (heads {' / '.join(shares)})" if nodes else "-"),
        "node balance": "-" if balance is None else f"{balance:.2f}x",
        "x one PostgreSQL": f"{price['median']:.2f}x ({price['min']:.2f}-{price['max']:.2f})",
        "projected heads/s": "-" if projected is None else f"{projected:,.0f}",
    }


def print_table(stdout: TextIO, data: dict[str, Any]) -> None:
    c, m = data["config"], data["machine"]
    rounds = " / ".join(out.load(values) for values in m.get("load_average_rounds") or [])
    stdout.write(
        f"a2pg bench --citus: medians of {c['citus_rounds']} interleaved rounds, spread "
        f"min-max; {c['citus_heads']:,} heads per drain over {c['sessions']} sessions, "
        f"{c['workers']} workers x {c['worker_concurrency']} handlers, {c['shards']} shards\n"
        f"machine: {m['cpu_cores']} cores, PostgreSQL {m['postgres']} (the embedded wheel) "
        f"with Citus {m['citus']}, synchronous_commit {m['synchronous_commit']}, "
        f"Python {m['python']}, {m['loop']}, {m['date']}\n"
        f"load average (1 min): {out.load(m.get('load_average_start'))} at start, "
        f"{rounds or 'unknown'} as the rounds began, {out.load(m.get('load_average_end'))} at end\n"
    )
    stdout.write(out.render_table(COLUMNS, [row(f) for f in data["setups"]], empty="no setups"))
    stdout.write(FOOTER)
    passed = [check for check in data["checks"] if check["ok"]]
    stdout.write(f"checks passed: {len(passed)} of {len(data['checks'])}\n")
    for check in data["checks"]:
        if not check["ok"]:
            stdout.write(f"FAIL {check['name']}: {check['detail']}\n")
