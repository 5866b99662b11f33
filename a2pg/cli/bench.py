"""``a2pg bench``: runs the benchmark and prints its table (or JSON)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import Any, TextIO

from ..bench import BenchConfig, BenchFailed, run_bench
from . import output as out
from .common import EXIT_FAILED, EXIT_OK, fail
from .options import from_args


def print_table(stdout: TextIO, data: dict[str, Any]) -> None:
    c = data["config"]
    stdout.write(
        f"a2pg bench ({data['database']}): medians of {c['runs']} runs; drain of "
        f"{c['events']:,} events over {c['sessions']} sessions, concurrency {c['concurrency']}\n"
    )
    rows = [
        {
            "measurement": r["name"],
            "median": f"{r['median']:,.1f} {r['unit']}"
            if r["unit"] == "ms"
            else f"{r['median']:,.0f} {r['unit']}",
            "runs": " / ".join(
                f"{v:,.1f}" if r["unit"] == "ms" else f"{v:,.0f}" for v in r["runs"]
            ),
        }
        for r in data["results"].values()
    ]
    stdout.write(out.render_table(("measurement", "median", "runs"), rows, empty="no results"))
    if data["extra_completions"]:
        stdout.write(
            f"FAIL: worker completions differ from the backlog by {data['extra_completions']}\n"
        )


async def cmd_bench(args: argparse.Namespace, stdout: TextIO) -> int:
    config = from_args(BenchConfig, args)
    config = replace(config, sessions=min(config.sessions, config.events))
    try:
        if args.dsn is not None:
            data = await run_bench(args.dsn, args.schema, config, sys.stderr)
            data["database"] = f"the given PostgreSQL {data['server']}"
        else:
            from ..postgres.embedded import embedded_postgres

            with embedded_postgres() as dsn:
                data = await run_bench(dsn, args.schema, config, sys.stderr)
            data["database"] = f"embedded PostgreSQL {data['server']}"
    except BenchFailed as exc:
        fail(EXIT_FAILED, str(exc))
    ok = data["extra_completions"] == 0  # each backlog head completed exactly once
    if args.json:
        out.write_json(stdout, {"ok": ok, **data})
    else:
        print_table(stdout, data)
    return EXIT_OK if ok else EXIT_FAILED
