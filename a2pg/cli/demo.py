"""``a2pg demo``: runs the demo workload and prints its verification."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

from ..demo import DemoConfig, DemoFailed, DemoRun, run_demo
from ..demo.progress import ProgressBar
from . import output as out
from .common import (
    EXIT_FAILED,
    EXIT_OK,
    fail,
    require_embedded_or_dsn,
    sqlite_path,
    store_options,
)
from .options import from_args


def report(run: DemoRun, where: str) -> dict[str, Any]:
    c = run.config
    found = run.checks
    return {
        "ok": all(check.ok for check in found),
        "database": f"{where} {run.server}",
        "sessions": c.sessions,
        "turns": c.turns,
        "workers": c.workers,
        "concurrency": c.concurrency,
        "appended": run.appended,
        "units": c.units,
        "append_events_per_s": run.appended / run.append_seconds if run.append_seconds else 0.0,
        "seconds": run.drain_seconds,
        "units_per_s": c.units / run.drain_seconds if run.drain_seconds else 0.0,
        "checks": [{"name": k.name, "ok": k.ok, "detail": k.detail} for k in found],
    }


def print_report(stdout: TextIO, data: dict[str, Any], run: DemoRun) -> None:
    stdout.write(
        f"a2pg demo: {data['sessions']} sessions x {data['turns']} turns on "
        f"{data['workers']} worker processes ({data['database']})\n"
    )
    for check in data["checks"]:
        mark = "ok  " if check["ok"] else "FAIL"
        stdout.write(f"  {mark} {check['name']}: {check['detail']}\n")
        if check["name"] == "poison dead-lettered" and run.dead_letters:
            rows = [out.dead_letter_row(head) for head in run.dead_letters]
            table = out.render_table(out.DEAD_LETTER_COLUMNS, rows, empty="")
            stdout.write("".join(f"         {line}\n" for line in table.splitlines()))
    stdout.write(
        f"  throughput: {data['units_per_s']:,.0f} completions/s "
        f"({data['units']:,} in {data['seconds']:.1f} s, each appending its result event); "
        f"{data['appended']:,} user turns appended at {data['append_events_per_s']:,.0f}/s "
        "meanwhile\n"
    )
    if not data["ok"] and run.worker_log.strip():
        stdout.write("worker output (last lines):\n" + run.worker_log[-1500:] + "\n")


async def _on_sqlite(
    args: argparse.Namespace, config: DemoConfig, bar: ProgressBar
) -> tuple[DemoRun, str]:
    """The demo on ``--sqlite PATH``, or on a temporary file when PATH is left out."""
    from ..demo.targets import SqliteTarget

    path = sqlite_path(args)
    if path is not None:
        return await run_demo(SqliteTarget(path), None, config, bar), f"the file {path},"
    with tempfile.TemporaryDirectory(prefix="a2pg-demo-sqlite-") as folder:
        bar.say(f"a temporary SQLite file in {folder}")
        run = await run_demo(SqliteTarget(Path(folder) / "demo.db"), None, config, bar)
    return run, "a temporary file,"


async def cmd_demo(args: argparse.Namespace, stdout: TextIO) -> int:
    config = from_args(DemoConfig, args)
    if args.dsn is None and getattr(args, "sqlite", None) is None:
        require_embedded_or_dsn()
    bar = ProgressBar(config.units, sys.stderr, label="completions")
    try:
        if getattr(args, "sqlite", None) is not None:
            run, where = await _on_sqlite(args, config, bar)
            data = report(run, where)
        elif args.dsn is not None:
            run = await run_demo(args.dsn, args.schema, config, bar, store_options(args))
            data = report(run, "the given")
        else:
            from ..postgres.embedded import embedded_postgres

            bar.say("starting an embedded PostgreSQL in a temporary directory")
            with embedded_postgres() as dsn:
                run = await run_demo(dsn, args.schema, config, bar, store_options(args))
                bar.say("stopping the embedded PostgreSQL")
            data = report(run, "embedded")
    except DemoFailed as exc:
        fail(EXIT_FAILED, str(exc))
    bar.say("done")
    if args.json:
        out.write_json(stdout, data)
    else:
        print_report(stdout, data, run)
    return EXIT_OK if data["ok"] else EXIT_FAILED
