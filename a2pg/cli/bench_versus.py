"""``a2pg bench --versus SYSTEM``: its options, its run on a DSN or embedded, and its table."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any, TextIO

from ..bench.sync import SYNC_CHOICES
from ..bench.versus_config import SYSTEMS, VersusConfig
from . import output as out
from .common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    fail,
    require_embedded_or_dsn,
    store_options,
)
from .options import add_mode_options, from_given


def columns(other: str) -> tuple[str, ...]:
    return ("figure", "a2pg", other, f"a2pg/{other}", "target", "met")


VERSUS_MISSING = (
    "a2pg bench --versus pgqueuer needs pgqueuer and asyncpg, which are not installed: "
    "pip install 'a2pg[bench]'"
)
VERSUS_MODULES = ("pgqueuer", "asyncpg")

SYNC_HELP = (
    "off: ALTER DATABASE ... SET synchronous_commit = off before anything connects, so "
    "every connection of the run commits without waiting for the WAL flush, reset "
    "afterwards (needs the database's owner); on: the server's own setting, unchanged"
)


def add_options(parser: argparse.ArgumentParser) -> None:
    """``--versus``, ``--sync`` and one option per ``VersusConfig`` field (its default shown
    in the help, None in the namespace, so that giving one without ``--versus`` is seen)."""
    parser.add_argument(
        "--versus",
        choices=SYSTEMS,
        default=None,
        help="measure a2pg head to head against another job queue on the same server "
        "(pip install 'a2pg[bench]')",
    )
    parser.add_argument("--sync", choices=SYNC_CHOICES, default="on", help=SYNC_HELP)
    add_mode_options(parser, VersusConfig, "--versus")


def require_versus() -> None:
    """Without pgqueuer or asyncpg: one line naming the extra, exit 2, before anything runs."""
    for module in VERSUS_MODULES:
        try:
            importlib.import_module(module)
        except ImportError:
            fail(EXIT_USAGE, VERSUS_MISSING)


def export_store_options(options: dict[str, Any]) -> None:
    """Puts given pooler settings in this process's environment, where the a2pg side's
    stores read them (``a2pg.postgres.backend.open_store``'s variables)."""
    from ..postgres.backend import POOLER_ENV, PREPARE_ENV

    if options.get("pooler") is not None:
        os.environ[POOLER_ENV] = str(options["pooler"])
    if options.get("prepare") is not None:
        os.environ[PREPARE_ENV] = "1" if options["prepare"] else "0"


async def cmd_versus(args: argparse.Namespace, stdout: TextIO) -> int:
    from ..bench.versus import run_versus

    export_store_options(store_options(args))
    require_versus()
    if getattr(args, "sqlite", None) is not None:
        fail(EXIT_USAGE, "--versus runs on PostgreSQL: give --dsn (or nothing), not --sqlite")
    c = from_given(VersusConfig, args)
    if args.dsn is None:
        require_embedded_or_dsn()
    if args.dsn is not None:
        data = await run_versus(args.dsn, args.versus, c, args.sync, sys.stderr)
        data["database"] = f"the given PostgreSQL {data['machine']['postgres']}"
    else:
        from ..postgres.embedded import embedded_postgres

        with embedded_postgres() as dsn:
            data = await run_versus(dsn, args.versus, c, args.sync, sys.stderr)
        data["database"] = f"embedded PostgreSQL {data['machine']['postgres']}"
    ok = out.write_report(stdout, data, as_json=args.json, table=print_table)
    return EXIT_OK if ok else EXIT_FAILED


def _number(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "ms":
        return f"{value:,.2f}"
    if unit == "x":
        return f"{value:.2f}"
    return f"{value:,.0f}"


def _cell(summary: dict[str, Any], unit: str) -> str:
    """``median unit (min-max)``; ``x`` right after a ratio's numbers."""
    median, low, high = (_number(summary[k], unit) for k in ("median", "min", "max"))
    if unit == "x":
        return f"{median}x ({low}-{high})"
    return f"{median} {unit} ({low}-{high})"


def row(figure: dict[str, Any], other: str) -> dict[str, str]:
    unit, target = figure["unit"], figure["target"]
    return {
        "figure": figure["name"],
        "a2pg": _cell(figure["a2pg"], unit),
        other: _cell(figure[other], unit),
        f"a2pg/{other}": _cell(figure["ratio"], "x"),
        "target": target["text"],
        "met": {True: "yes", False: "NO", None: "-"}[target["met"]],
    }


def print_table(stdout: TextIO, data: dict[str, Any]) -> None:
    c, m, other = data["config"], data["machine"], data["versus"]
    rounds = " / ".join(out.load(values) for values in m.get("load_average_rounds") or [])
    stdout.write(
        f"a2pg bench --versus {other} on {data['database']}: medians of {c['rounds']} "
        "interleaved rounds, spread min-max\n"
        f"machine: {m['cpu_cores']} cores, PostgreSQL {m['postgres']}, fsync {m['fsync']}, "
        f"synchronous_commit {m['synchronous_commit']} (--sync {c['sync']}; asyncpg's "
        f"connections: {m.get('synchronous_commit_asyncpg', 'unknown')}), "
        f"Python {m['python']}, {m['date']}\n"
        f"event loop: {m['loop']}, the same for both; a2pg {m['a2pg']} (psycopg "
        f"{m['psycopg']}), {other} {m[other]} (asyncpg {m['asyncpg']})\n"
        f"load average (1 min): {out.load(m.get('load_average_start'))} at start, "
        f"{rounds or 'unknown'} as the rounds began, {out.load(m.get('load_average_end'))} at end\n"
    )
    rows = [row(figure, other) for figure in data["figures"].values()]
    stdout.write(out.render_table(columns(other), rows, empty="no figures"))
    stdout.write(
        f"ratio: a2pg / {other} in the same round, median (spread) over rounds; "
        "wake latency: lower is better, so its target is <= 1.0x\n"
    )
    out.write_outcome(stdout, data)
