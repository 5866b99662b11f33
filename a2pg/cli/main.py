"""The ``a2pg`` command line: migrate, check, run workers, inspect and operate, demo, bench.

Exit codes (also in ``a2pg --help``):

- 0 ok
- 1 check or verification failed (demo, bench), ``clear --if-last-index`` found another
  head, or a database error
- 2 usage error (bad arguments, no DSN or a malformed one, bad MODULE:APP)
- 3 database unreachable (``STORE_UNAVAILABLE``, on PostgreSQL and SQLite alike)
- 4 database not migrated (``STORE_NOT_CONFIGURED``): run ``a2pg migrate``
- 5 not found (unknown session, no such dead letter, ``consumers --unregister`` of a
  consumer that is not registered)
- 6 ``worker`` stopped with sync handlers still running after ``--shutdown-grace``: it
  exited without waiting for their threads; their claims were kept (never released
  while a handler runs) and lapse after ``--ttl``, as after a crash

The database comes from ``--dsn`` or ``A2PG_DSN``, the schema from ``--schema`` or
``A2PG_SCHEMA``, the pooler settings from ``--pooler``/``--prepare`` (or
``A2PG_POOLER``/``A2PG_PREPARE``); ``--sqlite PATH`` names a SQLite file instead.
Listings print aligned tables; ``--json`` prints JSON for scripts. No DSN is ever shown
with its password: not in errors, not in logs.

Each command module adds its parsers (``add_parsers``) and names its implementations
(``COMMANDS``); this one holds the shared options, the dispatch and the error handling.
Where the store is, and what a failure means, comes from ``a2pg.backends``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from .. import __version__
from ..backends import NOWHERE
from . import admin, bench, dashboard, demo, grants, inspect, metrics, operate, tail
from .common import (
    EXIT_CODES_HELP,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    TEMPORARY_OK,
    TEMPORARY_SQLITE,
    CliError,
    Command,
    resolve_dsn,
    resolve_schema,
    resolve_sqlite,
    site,
    translate,
)
from .secrets import scrubbed_logs, scrubbed_traceback

MODULES = (admin, grants, demo, bench, inspect, operate, metrics, tail, dashboard)
"""The command modules, in the order ``a2pg --help`` lists their commands; each has
``add_parsers(command)`` and ``COMMANDS`` (name to implementation)."""

COMMANDS: dict[str, Command] = {
    name: run for module in MODULES for name, run in module.COMMANDS.items()
}


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

    for module in MODULES:
        module.add_parsers(command)
    return parser


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None) -> int:
    """Runs one command; returns its exit code (the console script exits with it)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    stream = stdout or sys.stdout
    where = NOWHERE
    try:
        if args.sqlite is None:
            # `migrate --sql` and `grants` without --apply print SQL, connecting nowhere.
            no_database = (
                args.command in TEMPORARY_OK
                or getattr(args, "sql", False)
                or getattr(args, "print_only", False)
            )
            args.dsn = resolve_dsn(args.dsn, required=not no_database)
        else:
            resolve_sqlite(args)
        args.schema = resolve_schema(args.schema)
        database = site(args)
        where = database.describe()
        database.check()  # a malformed DSN: exit 2, before anything connects
        loop = bench.event_loop(args) if args.command in bench.COMMANDS else None
        with scrubbed_logs(args.dsn), asyncio.Runner(loop_factory=loop) as runner:
            return runner.run(_run(COMMANDS[args.command], args, stream))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `a2pg tail ... | head` closed the pipe: not an error. Point stdout at devnull so
        # the interpreter's final flush does not complain about it either.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except BaseException as exc:
        error = _cli_error(exc, args.dsn, where)
        if error is not None:
            sys.stderr.write(f"a2pg: error: {error.message}\n")
            return error.exit_code
        if not isinstance(exc, Exception):
            raise
        # A bug: its traceback, but never with the password a driver message may quote.
        sys.stderr.write("a2pg: internal error\n" + scrubbed_traceback(exc, args.dsn))
        return EXIT_FAILED


async def _run(command: Command, args: argparse.Namespace, stdout: TextIO) -> int:
    return await command(args, stdout)


def _cli_error(exc: BaseException, dsn: str | None, where: str) -> CliError | None:
    """The reportable error in ``exc`` (looking inside exception groups), if any."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _cli_error(inner, dsn, where)
            if found is not None:
                return found
        return None
    return translate(exc, dsn, where)
