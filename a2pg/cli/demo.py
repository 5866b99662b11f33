"""``a2pg demo``: runs the demo workload on worker processes and prints its verification."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, TextIO

from ..demo.config import DemoConfig
from . import output as out
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, AddCommand, Command, fail, site
from .dashboard import add_demo_options
from .options import add_options, from_args

if TYPE_CHECKING:
    from ..backends import Site
    from ..demo import DemoRun
    from .dashboard import Serving

CITUS_NODES = 2
"""Worker nodes of ``a2pg demo --citus``'s cluster."""

DEMO_DETAILS = """\
Chat sessions whose turns go to a reply lane, a moderation consumer and an audit
log consumer, worked by `a2pg worker a2pg.demo:app` processes. About 10% of
attempts fail on purpose and one poison turn always fails. Then it checks that
every unit of work completed exactly once, lanes and logs kept their order,
failures were retried, and the poison was dead-lettered, shown BLOCKED and
skipped by redrive. Exits 1 if any check fails. Without --dsn (or $A2PG_DSN) it
runs on a throwaway embedded PostgreSQL (pip install 'a2pg[embedded]'); with
--citus, on a throwaway Citus cluster of that wheel (a coordinator and 2 worker
nodes; Citus must be installed into the wheel: a2pg does not ship it). To run it on a
cluster of your own, give its coordinator with --dsn."""


def add_parsers(command: AddCommand) -> None:
    demo = command(
        "demo", "run a realistic workload on worker processes and verify it", DEMO_DETAILS
    )
    add_options(demo, DemoConfig)
    add_demo_options(demo)
    demo.add_argument(
        "--citus",
        action="store_true",
        help="without --dsn: run on a throwaway Citus cluster (a coordinator and 2 worker "
        "nodes) of the embedded wheel, which must have Citus installed",
    )


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


async def cmd_demo(args: argparse.Namespace, stdout: TextIO) -> int:
    """The demo on the database the options name, else on a throwaway one (an embedded
    PostgreSQL, a temporary SQLite file) kept until the dashboard, if any, is done."""
    from ..demo import DemoFailed, run_demo
    from ..demo.progress import ProgressBar

    config = from_args(DemoConfig, args)
    bar = ProgressBar(config.units, sys.stderr, label="completions")
    database = site(args)
    if getattr(args, "citus", False):
        throwaway = _citus(args, database, bar.say)
    else:
        throwaway = database.throwaway("demo", bar.say)  # its extra checked before anything
    serving = _dashboard(args)
    try:
        with throwaway as (database, where):
            run = await run_demo(database, config, bar)
            bar.say("done")
            return await _finish(args, stdout, run, where, database, serving)
    except DemoFailed as exc:
        fail(EXIT_FAILED, str(exc))
    finally:
        if serving is not None:
            serving.listener.sock.close()


async def _finish(
    args: argparse.Namespace,
    stdout: TextIO,
    run: DemoRun,
    where: str,
    database: Site,
    serving: Serving | None,
) -> int:
    """The report; then, with ``--dashboard``, the dashboard on the demo's data."""
    data = report(run, where)
    if args.json:
        out.write_json(stdout, data)
    else:
        print_report(stdout, data, run)
    if serving is not None:
        from .dashboard import serve_store

        async with database.open_store() as store:
            await serve_store(store, serving, stdout)
    return EXIT_OK if data["ok"] else EXIT_FAILED


def _citus(
    args: argparse.Namespace, database: Site, say: Callable[[str], None]
) -> AbstractContextManager[tuple[Site, str]]:
    """``--citus``: a throwaway cluster, checked for Citus before anything starts."""
    from ..postgres.backend import PostgresSite
    from ..postgres.embedded import EmbeddedUnavailable
    from ..postgres.embedded_citus import embedded_citus, require_citus

    if not isinstance(database, PostgresSite) or database.dsn is not None:
        given = "--sqlite" if not isinstance(database, PostgresSite) else "--dsn"
        fail(EXIT_USAGE, f"--citus starts a cluster of its own: not with {given} (a cluster "
             "of your own: give its coordinator with --dsn, without --citus)")  # fmt: skip
    try:
        require_citus()
    except EmbeddedUnavailable as exc:
        fail(EXIT_USAGE, str(exc))

    @contextlib.contextmanager
    def started() -> Iterator[tuple[Site, str]]:
        say(f"starting an embedded Citus cluster ({CITUS_NODES} worker nodes)")
        with embedded_citus(CITUS_NODES) as cluster:
            try:
                yield dataclasses.replace(database, dsn=cluster.dsn()), "embedded Citus"
            finally:
                say("stopping the embedded Citus cluster")

    return started()


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


COMMANDS: dict[str, Command] = {"demo": cmd_demo}
