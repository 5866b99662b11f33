"""``a2pg demo``: runs the demo workload and prints its verification."""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

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

if TYPE_CHECKING:
    from ..store import Store
    from .dashboard import Serving


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


Opener = Callable[[], contextlib.AbstractAsyncContextManager["Store"]]
"""Opens the store the demo ran on again (for ``--dashboard``)."""
Finish = Callable[[DemoRun, str, Opener], Awaitable[int]]


async def _on_sqlite(
    args: argparse.Namespace, config: DemoConfig, bar: ProgressBar, finish: Finish
) -> int:
    """The demo on ``--sqlite PATH``, or on a temporary file when PATH is left out (kept
    until ``finish`` is done with it)."""
    from ..demo.targets import SqliteTarget

    path = sqlite_path(args)
    if path is not None:
        target = SqliteTarget(path)
        run = await run_demo(target, None, config, bar)
        return await finish(run, f"the file {path},", target.open_store)
    with tempfile.TemporaryDirectory(prefix="a2pg-demo-sqlite-") as folder:
        bar.say(f"a temporary SQLite file in {folder}")
        target = SqliteTarget(Path(folder) / "demo.db")
        run = await run_demo(target, None, config, bar)
        return await finish(run, "a temporary file,", target.open_store)


async def cmd_demo(args: argparse.Namespace, stdout: TextIO) -> int:
    config = from_args(DemoConfig, args)
    if args.dsn is None and getattr(args, "sqlite", None) is None:
        require_embedded_or_dsn()
    serving = _dashboard(args)
    bar = ProgressBar(config.units, sys.stderr, label="completions")

    async def finish(run: DemoRun, where: str, opener: Opener) -> int:
        bar.say("done")
        data = report(run, where)
        if args.json:
            out.write_json(stdout, data)
        else:
            print_report(stdout, data, run)
        if serving is not None:
            from .dashboard import serve_store

            async with opener() as store:
                await serve_store(store, serving, stdout)
        return EXIT_OK if data["ok"] else EXIT_FAILED

    try:
        if getattr(args, "sqlite", None) is not None:
            return await _on_sqlite(args, config, bar, finish)
        if args.dsn is not None:
            run = await run_demo(args.dsn, args.schema, config, bar, store_options(args))
            return await finish(run, "the given", _postgres(args, args.dsn))
        from ..postgres.embedded import embedded_postgres

        bar.say("starting an embedded PostgreSQL in a temporary directory")
        with embedded_postgres() as dsn:
            run = await run_demo(dsn, args.schema, config, bar, store_options(args))
            try:
                return await finish(run, "embedded", _postgres(args, dsn))
            finally:
                bar.say("stopping the embedded PostgreSQL")
    except DemoFailed as exc:
        fail(EXIT_FAILED, str(exc))
    finally:
        if serving is not None:
            serving.listener.sock.close()


def _postgres(args: argparse.Namespace, dsn: str) -> Opener:
    def opener() -> contextlib.AbstractAsyncContextManager[Store]:
        from ..postgres.connect import open_store

        return open_store(dsn, args.schema, **store_options(args))

    return opener


def _dashboard(args: argparse.Namespace) -> Serving | None:
    """``--dashboard``: the address checked and taken before the demo runs."""
    if not getattr(args, "dashboard", False):
        return None
    from .dashboard import prepare

    return prepare(
        host=args.dashboard_host,
        port=args.dashboard_port,
        root_path=args.dashboard_root_path,
        refresh=args.dashboard_refresh,
        read_only=False,
    )
