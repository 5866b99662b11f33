"""The ``a2pg`` command line: migrate, check, run workers, inspect and operate, demo, bench.

Exit codes (also in ``a2pg --help``):

- 0 ok
- 1 check or verification failed (demo, bench), ``clear --if-last-index`` found another
  head, or a database error
- 2 usage error (bad arguments, no DSN or a malformed one, bad MODULE:APP)
- 3 database unreachable
- 4 database not migrated (``STORE_NOT_CONFIGURED``): run ``a2pg migrate``
- 5 not found (unknown session, no such dead letter, ``consumers --unregister`` of a
  consumer that is not registered)

The database comes from ``--dsn`` or ``A2PG_DSN``, the schema from ``--schema`` or
``A2PG_SCHEMA``, the pooler settings from ``--pooler``/``--prepare`` (or
``A2PG_POOLER``/``A2PG_PREPARE``); ``--sqlite PATH`` names a SQLite file instead.
Listings print aligned tables; ``--json`` prints JSON for scripts. No DSN is ever shown
with its password: not in errors, not in logs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TextIO

from .. import __version__
from ..bench.config import BenchConfig
from ..demo.config import DemoConfig
from . import dashboard, operate
from .common import (
    EXIT_CODES_HELP,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    TEMPORARY_SQLITE,
    CliError,
    check_dsn,
    resolve_dsn,
    resolve_schema,
    resolve_sqlite,
    translate,
)
from .options import add_options, non_negative_float, positive_float, positive_int
from .secrets import scrubbed_logs, scrubbed_traceback

Command = Callable[[argparse.Namespace, TextIO], Awaitable[int]]

# Commands that start an embedded PostgreSQL when no DSN is given.
EMBEDDED_OK = frozenset({"demo", "bench"})


DEMO_DETAILS = """\
Chat sessions whose turns go to a reply lane, a moderation consumer and an audit
log consumer, worked by `a2pg worker a2pg.demo:app` processes. About 10% of
attempts fail on purpose and one poison turn always fails. Then it checks that
every unit of work completed exactly once, lanes and logs kept their order,
failures were retried, and the poison was dead-lettered, shown BLOCKED and
skipped by redrive. Exits 1 if any check fails. Without --dsn (or $A2PG_DSN) it
runs on a throwaway embedded PostgreSQL (pip install 'a2pg[embedded]')."""

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
benches)."""


MIGRATE_SQL_HELP = (
    "print the migration's SQL (from an empty schema to the head, for a DBA to run) "
    "instead of running it; needs no database"
)


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the epilog's layout and shows each option's default where it has one."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        is_flag = action.nargs == 0  # --x / --no-x: its default says nothing useful
        if (
            not is_flag
            and action.default not in (None, False, argparse.SUPPRESS)
            and "%(default)" not in text
        ):
            text += " (default: %(default)s)"
        return text


POOLERS = ("none", "session", "transaction")
"""What may stand between the workers and PostgreSQL (``--pooler``)."""


def _connection_options(*, top: bool) -> argparse.ArgumentParser:
    """--dsn, --schema, --pooler, --prepare, --sqlite and --json, accepted before or after the
    command (``--sqlite`` with no PATH goes after it: ``a2pg demo --sqlite``).

    The top-level parser sets the defaults; the per-command copies use SUPPRESS so
    that giving an option in either place works and neither clobbers the other.
    """
    default = None if top else argparse.SUPPRESS
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--dsn", default=default, help="PostgreSQL connection string (default: $A2PG_DSN)"
    )
    options.add_argument(
        "--schema", default=default, help="schema of the a2_ tables (default: $A2PG_SCHEMA)"
    )
    options.add_argument(
        "--pooler",
        choices=POOLERS,
        default=default,
        help="connection pooler in front of PostgreSQL; transaction mode turns off prepared "
        "statements and LISTEN (default: $A2PG_POOLER, else none)",
    )
    options.add_argument(
        "--prepare",
        action=argparse.BooleanOptionalAction,
        default=default,
        help="use server-side prepared statements (default: $A2PG_PREPARE, else on unless "
        "--pooler transaction)",
    )
    options.add_argument(
        "--sqlite",
        nargs="?",
        const=TEMPORARY_SQLITE,
        default=default,
        metavar="PATH",
        help="a SQLite database file instead of PostgreSQL (demo, bench: a temporary one "
        "when PATH is left out)",
    )
    options.add_argument(
        "--json",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="print machine-readable JSON instead of tables",
    )
    return options


def _add_worker_options(worker: argparse.ArgumentParser) -> None:
    """One option per ``WorkerSettings`` field; ``backoff`` as ``--retry-base/--retry-cap``."""
    from ..backoff import Backoff
    from ..worker.settings import WorkerSettings
    from .startup import DEFAULT_WAIT

    add_options(worker, WorkerSettings, skip={"backoff"})
    backoff = Backoff()
    worker.add_argument(
        "--retry-base",
        type=positive_float,
        default=None,
        help=f"seconds before the first retry; doubles per failure (default: {backoff.base})",
    )
    worker.add_argument(
        "--retry-cap",
        type=positive_float,
        default=None,
        help=f"longest wait before a retry, seconds (default: {backoff.cap})",
    )
    worker.add_argument(
        "--no-listen", action="store_true", help="poll only; do not LISTEN for notifications"
    )
    worker.add_argument(
        "--wait",
        type=non_negative_float,
        default=DEFAULT_WAIT,
        metavar="SECONDS",
        help="how long to wait for an unreachable database at start, retrying with backoff "
        "and a warning per try, before exiting 3; 0 exits 3 at once",
    )
    worker.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="logging level",
    )
    from .observe import add_worker_observability_options

    add_worker_observability_options(worker)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="a2pg",
        description="a2pg: the A2 session store on PostgreSQL.",
        epilog=EXIT_CODES_HELP,
        formatter_class=_Formatter,
        parents=[_connection_options(top=True)],
    )
    parser.add_argument("--version", action="version", version=f"a2pg {__version__}")
    common = _connection_options(top=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, help_text: str, details: str = "") -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            help=help_text,
            description=help_text + ("\n\n" + details if details else ""),
            parents=[common],
            epilog=EXIT_CODES_HELP,
            formatter_class=_Formatter,
        )

    migrate = command(
        "migrate", "create or upgrade the a2pg schema (idempotent, safe to run concurrently)"
    )
    migrate.add_argument("--sql", action="store_true", help=MIGRATE_SQL_HELP)
    command("check", "check the schema layout is current (exit 4 when `a2pg migrate` is needed)")

    worker = command("worker", "run the consumers of MODULE:APP until SIGINT/SIGTERM")
    worker.add_argument("app", metavar="MODULE:APP", help="where the App is, e.g. myproj.jobs:app")
    _add_worker_options(worker)

    demo = command(
        "demo",
        "run a realistic workload on worker processes and verify it",
        DEMO_DETAILS,
    )
    add_options(demo, DemoConfig)
    dashboard.add_demo_options(demo)

    bench = command(
        "bench",
        "measure a2pg against the machine's commit ceiling (medians of --runs)",
        BENCH_DETAILS,
    )
    add_options(bench, BenchConfig)
    from .bench_versus import add_options as add_versus_options

    add_versus_options(bench)

    sessions = command(
        "sessions", "list sessions: head, clear index, pending, blocked, dead letters, last event"
    )
    sessions.add_argument("--after", default=None, help="list sessions after this id")
    sessions.add_argument("--limit", type=positive_int, default=100, help="at most this many")

    cursors = command("cursors", "list a session's cursors and what each is doing")
    cursors.add_argument("session", metavar="SESSION")

    dead = command("dead-letters", "list dead-lettered heads (blocked lanes shown as BLOCKED)")
    dead.add_argument("session", metavar="SESSION", nargs="?", default=None)

    operate.add_parsers(command)  # redrive, clear, reclaim, consumers, workers

    from .metrics import METRICS_DETAILS, METRICS_HELP, add_metrics_options

    add_metrics_options(command("metrics", METRICS_HELP, METRICS_DETAILS))

    tail = command("tail", "print a session's events, then follow new ones until Ctrl-C")
    tail.add_argument("session", metavar="SESSION")
    tail.add_argument("--after", type=int, default=0, help="start after this index")
    tail.add_argument(
        "--no-follow",
        dest="follow",
        action="store_false",
        help="print the stored events and exit",
    )
    dashboard.add_parser(command)
    return parser


def _commands() -> dict[str, Command]:
    """Command name to implementation; imported lazily so `a2pg --help` stays fast."""
    from . import admin, inspect
    from .metrics import cmd_metrics

    commands: dict[str, Command] = {
        "migrate": admin.cmd_migrate,
        "check": admin.cmd_check,
        "worker": admin.cmd_worker,
        "sessions": inspect.cmd_sessions,
        "cursors": inspect.cmd_cursors,
        "dead-letters": inspect.cmd_dead_letters,
        "tail": inspect.cmd_tail,
        "metrics": cmd_metrics,
        "dashboard": dashboard.cmd_dashboard,
    }
    commands.update(operate.commands())
    return commands


async def _run(args: argparse.Namespace, stdout: TextIO) -> int:
    if args.command == "demo":
        from .demo import cmd_demo

        return await cmd_demo(args, stdout)
    if args.command == "bench":
        from .bench import cmd_bench

        return await cmd_bench(args, stdout)
    return await _commands()[args.command](args, stdout)


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None) -> int:
    """Runs one command; returns its exit code (the console script exits with it)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    stream = stdout or sys.stdout
    try:
        if args.sqlite is None:
            no_database = args.command in EMBEDDED_OK or getattr(args, "sql", False)
            args.dsn = resolve_dsn(args.dsn, required=not no_database)
        else:
            resolve_sqlite(args)
        args.schema = resolve_schema(args.schema)
        check_dsn(args.dsn)
        with scrubbed_logs(args.dsn), asyncio.Runner(loop_factory=_loop_factory(args)) as runner:
            return runner.run(_run(args, stream))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `a2pg tail ... | head` closed the pipe: not an error. Point stdout at devnull so
        # the interpreter's final flush does not complain about it either.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except BaseException as exc:
        error = _cli_error(exc, args.dsn)
        if error is not None:
            sys.stderr.write(f"a2pg: error: {error.message}\n")
            return error.exit_code
        if not isinstance(exc, Exception):
            raise
        # A bug: its traceback, but never with the password a driver message may quote.
        sys.stderr.write("a2pg: internal error\n" + scrubbed_traceback(exc, args.dsn))
        return EXIT_FAILED


def _loop_factory(args: argparse.Namespace) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop for ``bench --versus`` when installed (the systems compared share that loop:
    pgqueuer's own recommendation); asyncio's default loop for everything else."""
    if args.command != "bench" or getattr(args, "versus", None) is None:
        return None
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def _cli_error(exc: BaseException, dsn: str | None) -> CliError | None:
    """The reportable error in ``exc`` (looking inside exception groups), if any."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _cli_error(inner, dsn)
            if found is not None:
                return found
        return None
    return translate(exc, dsn)
