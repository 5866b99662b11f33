"""``a2pg bench``: runs the benchmark and prints its table (or JSON)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

from ..bench import BenchConfig, BenchFailed, run_bench
from ..bench.sync import Sync, synchronous_commit
from . import bench_versus as versus
from . import output as out
from .common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    export_store_options,
    fail,
    require_embedded_or_dsn,
    sqlite_path,
    store_options,
)
from .options import from_args

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
    if "sqlite" in m:
        server = f"SQLite {m['sqlite']} ({m['journal_mode']}, synchronous {m['synchronous']})"
    else:
        server = (
            f"PostgreSQL {m['postgres']}, fsync {m['fsync']}, "
            f"synchronous_commit {m['synchronous_commit']}"
        )
    stdout.write(
        f"a2pg bench on {data['database']}: medians of {c['runs']} runs, spread min-max\n"
        f"machine: {m['cpu_cores']} cores, {server}, Python {m['python']}, {m['date']}\n"
        f"load average (1 min): {out.load(m.get('load_average_start'))} at start, "
        f"{runs or 'unknown'} as the runs began, {out.load(m.get('load_average_end'))} at end\n"
        f"ceiling: {data['ceiling']['shape']}, on N connections; N = {data['ceiling']['n']}\n"
    )
    rows = [row(figure) for figure in data["figures"].values()]
    stdout.write(out.render_table(COLUMNS, rows, empty="no figures"))
    out.write_outcome(stdout, data)


async def _on_sqlite(args: argparse.Namespace, config: BenchConfig) -> dict[str, Any]:
    """The bench on ``--sqlite PATH``, or on a temporary file when PATH is left out."""
    from ..bench.sqlite_run import run_sqlite_bench

    path = sqlite_path(args)
    if path is not None:
        data = await run_sqlite_bench(path, config, sys.stderr)
        data["database"] = f"the SQLite file {path}"
        return data
    with tempfile.TemporaryDirectory(prefix="a2pg-bench-sqlite-") as folder:
        data = await run_sqlite_bench(Path(folder) / "bench.db", config, sys.stderr)
    data["database"] = f"a temporary SQLite file in {tempfile.gettempdir()}"
    return data


async def cmd_bench(args: argparse.Namespace, stdout: TextIO) -> int:
    sync: Sync = "off" if getattr(args, "sync", "on") == "off" else "on"
    if getattr(args, "versus", None) is not None:
        export_store_options(store_options(args))
        try:
            return await versus.cmd_versus(args, stdout)
        except BenchFailed as exc:
            fail(EXIT_FAILED, str(exc))
    given = versus.given_versus_options(args)
    if given:
        fail(EXIT_USAGE, f"{', '.join(given)}: only with --versus")
    config = from_args(BenchConfig, args)
    if getattr(args, "sqlite", None) is not None and sync != "on":
        fail(EXIT_USAGE, "--sync off applies to PostgreSQL, not to --sqlite")
    if args.dsn is None and getattr(args, "sqlite", None) is None:
        require_embedded_or_dsn()
    export_store_options(store_options(args))  # the bench's stores and worker processes
    try:
        if getattr(args, "sqlite", None) is not None:
            data = await _on_sqlite(args, config)
        elif args.dsn is not None:
            async with synchronous_commit(args.dsn, sync):
                data = await run_bench(args.dsn, args.schema, config, sys.stderr)
            data["database"] = f"the given PostgreSQL {data['machine']['postgres']}"
        else:
            from ..postgres.embedded import embedded_postgres

            with embedded_postgres() as dsn:
                async with synchronous_commit(dsn, sync):
                    data = await run_bench(dsn, args.schema, config, sys.stderr)
            data["database"] = f"embedded PostgreSQL {data['machine']['postgres']}"
    except BenchFailed as exc:
        fail(EXIT_FAILED, str(exc))
    if args.json:
        out.write_json(stdout, data)
    else:
        print_table(stdout, data)
    # Targets are reported, not enforced: only a failed correctness check fails the command.
    return EXIT_OK if data["ok"] else EXIT_FAILED
