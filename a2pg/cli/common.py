"""What every ``a2pg`` command shares: exit codes, one-line errors, opening the store."""

from __future__ import annotations

import os
from typing import NoReturn

import psycopg
from psycopg.conninfo import conninfo_to_dict

from ..errors import A2Error

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_NOT_MIGRATED = 4
EXIT_NOT_FOUND = 5

EXIT_CODES_HELP = """\
exit codes:
  0  ok
  1  check or verification failed (demo, bench), or a database error
  2  usage error (bad arguments, no DSN, bad MODULE:APP)
  3  database unreachable
  4  database not migrated (STORE_NOT_CONFIGURED): run `a2pg migrate`
  5  not found (unknown session, no such dead letter)

environment:
  A2PG_DSN     the database, when --dsn is not given
  A2PG_SCHEMA  the schema of the a2_ tables, when --schema is not given"""

MIGRATE_HINT = "run `a2pg migrate`"


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


def resolve_schema(schema: str | None) -> str | None:
    """``--schema``, else ``A2PG_SCHEMA``, else the store's default."""
    return schema or os.environ.get("A2PG_SCHEMA") or None


def describe_dsn(dsn: str) -> str:
    """Where a DSN points, without its password: ``user@host:port/dbname``."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "the given DSN"
    host = str(parts.get("host") or "localhost")
    port = parts.get("port")
    user = parts.get("user")
    where = f"{host}:{port}" if port else host
    who = f"{user}@" if user else ""
    return f"{who}{where}/{parts.get('dbname') or ''}"


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
    """The CLI error for a store or driver exception; None for anything else (a bug)."""
    if isinstance(exc, CliError):
        return exc
    orig = getattr(exc, "orig", None)  # SQLAlchemy (under Alembic) wraps the driver's error
    if isinstance(orig, psycopg.Error):
        return translate(orig, dsn)
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
