"""Run a2pg's Alembic migrations: ``a2pg migrate`` calls :func:`upgrade`.

Migrations run in one transaction that first takes an advisory lock keyed on the
schema, so several deploy jobs may migrate the same database at once: the first
applies the scripts, the others wait, then find nothing left to do.

Behind that lock, each statement of :func:`upgrade` waits at most ``lock_timeout``
seconds for the table locks its DDL needs (``set local``: that transaction only). A
DDL lock queued behind an open transaction would otherwise stall every worker behind
it for as long as that transaction stays open; past the bound the migration rolls
back, whole, is tried again a few times, then raises :class:`MigrationLockTimeout`.

On Citus (the ``citus`` extension in the database), revision 0007 distributes the
tables (see :mod:`a2pg.postgres.citus`), ``citus_shards`` of :func:`upgrade` setting
the shard count; after the revisions, :func:`distribute_tables` puts right any table of
a current layout that is not of its Citus kind.

Running a2pg's migrations from your own Alembic environment
------------------------------------------------------------
a2pg's history is the Alembic branch ``a2pg`` with its own version table,
``<schema>.a2_alembic_version``, so it never collides with your history.
The recommended way is :mod:`a2pg.postgres.alembic_host`: its filters keep a2pg's
tables out of your autogenerate, and ``run_on_upgrade`` (which calls
:func:`upgrade_connection` on your connection, after your migrations) runs a2pg's
branch on ``alembic upgrade`` only. ``alembic upgrade head`` then brings both up to
date; your ``alembic downgrade`` never touches a2pg's tables; ``a2pg migrate`` and
``a2pg check`` keep working on the same database, since a2pg's state stays in
``a2_alembic_version``.

Alternatively, put a2pg's scripts in your ``version_locations`` (the directory
:func:`versions_dir` returns) and run ``alembic upgrade heads``: Alembic then
records the ``a2pg`` branch as a second row of *your* version table, a2pg's tables
land in your ``search_path`` schema, and ``alembic downgrade base`` would drop them
too. Should you later switch to ``a2pg migrate``, it adopts such a schema: it stamps
``a2_alembic_version`` from the revision recorded in ``a2_meta`` and carries on.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import psycopg
from psycopg import sql

from ..errors import invalid
from . import citus
from .dsn import to_libpq
from .layout import DEFAULT_SCHEMA, LayoutStatus, check_schema, inspect_connection

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.engine import Connection, Engine

BRANCH = "a2pg"
LOCK_KEY_PREFIX = "a2pg.migrate:"
"""Hashed with the schema name into the advisory lock key that serializes migrations."""

LOCK_TIMEOUT = 5.0
"""Seconds each statement of ``upgrade`` waits for a table lock (``a2pg migrate
--lock-timeout``): also the longest a worker stalls behind a migration's queued lock."""
LOCK_ATTEMPTS = 3
"""Tries of a migration whose lock timed out, before ``MigrationLockTimeout``."""
LOCK_RETRY_DELAY = 0.5
"""Seconds before the second try, doubling for each further one."""

log = logging.getLogger("a2pg.postgres.migrate")


class MigrationLockTimeout(TimeoutError):
    """``upgrade`` gave up: a lock its DDL needs stayed held by another transaction past
    ``lock_timeout``, on every try. The migration rolled back: nothing was changed."""


_PACKAGED_SCRIPTS = Path(__file__).resolve().parent.parent / "_alembic"
_CHECKOUT_SCRIPTS = Path(__file__).resolve().parents[2] / "alembic"


def script_location() -> Path:
    """a2pg's Alembic scripts: inside the installed package, else the source checkout's."""
    if (_PACKAGED_SCRIPTS / "env.py").is_file():
        return _PACKAGED_SCRIPTS
    if (_CHECKOUT_SCRIPTS / "env.py").is_file():
        return _CHECKOUT_SCRIPTS
    raise FileNotFoundError(
        f"a2pg's migration scripts are missing: neither {_PACKAGED_SCRIPTS} nor {_CHECKOUT_SCRIPTS}"
    )


def versions_dir() -> Path:
    """a2pg's revision files, for a host environment's ``version_locations``."""
    return script_location() / "versions"


def create_engine(dsn: str) -> Engine:
    """A SQLAlchemy engine on the psycopg 3 driver; any libpq DSN or URL works."""
    import sqlalchemy
    from sqlalchemy.pool import NullPool

    conninfo = to_libpq(dsn)
    return sqlalchemy.create_engine(
        "postgresql+psycopg://", creator=lambda: psycopg.connect(conninfo), poolclass=NullPool
    )


def alembic_config(
    dsn: str | None = None, schema: str = DEFAULT_SCHEMA, connection: Connection | None = None
) -> Config:
    """An Alembic ``Config`` for a2pg's scripts, with no ini file: DSN or connection, and schema."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(script_location()))
    config.attributes["schema"] = check_schema(schema)
    if dsn is not None:
        config.attributes["dsn"] = dsn
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def upgrade(
    dsn: str,
    schema: str = DEFAULT_SCHEMA,
    revision: str = "heads",
    *,
    lock_timeout: float | None = LOCK_TIMEOUT,
    attempts: int = LOCK_ATTEMPTS,
    citus_shards: int | None = None,
) -> None:
    """Applies a2pg's migrations up to ``revision``; safe to run concurrently and repeatedly.

    Each statement waits at most ``lock_timeout`` seconds for a table lock (None: as long
    as it takes); past it the whole migration rolls back and is tried again, ``attempts``
    times in all (0.5 s, then 1 s... apart), then :class:`MigrationLockTimeout` says
    which sessions hold locks on a2pg's tables and what to do. Waiting for another
    migration of the schema (its advisory lock) is not bounded.

    On Citus, ``citus_shards`` is the shard count of ``a2_sessions`` (and so of every
    table co-located with it) when the migration distributes it; None: ``-x`` or
    ``$A2PG_CITUS_SHARDS``, else Citus's default. Plain PostgreSQL ignores it.
    """
    if lock_timeout is not None and (
        isinstance(lock_timeout, bool)
        or not isinstance(lock_timeout, int | float)
        or not (lock_timeout > 0 and math.isfinite(lock_timeout))
    ):
        raise invalid(f"lock_timeout must be a positive number of seconds: got {lock_timeout!r}")
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise invalid(f"attempts must be a positive int: got {attempts!r}")
    config = alembic_config(dsn, schema)
    config.attributes["lock_timeout"] = lock_timeout
    if citus_shards is not None:
        config.attributes[citus.SHARDS_ATTRIBUTE] = citus.check_shards(citus_shards)
    for attempt in range(1, attempts + 1):
        try:
            _upgrade(config, revision)
            return
        except Exception as exc:
            if lock_timeout is None or not _lock_timed_out(exc):
                raise
            if attempt == attempts:
                raise MigrationLockTimeout(
                    _lock_message(dsn, schema, lock_timeout, attempts)
                ) from exc
            delay = LOCK_RETRY_DELAY * 2 ** (attempt - 1)
            log.warning(
                "a2pg migrate: a lock on schema %r was not granted within %gs "
                "(lock_timeout); nothing was changed; trying again in %gs (%d of %d)",
                schema,
                lock_timeout,
                delay,
                attempt + 1,
                attempts,
            )
            time.sleep(delay)


def _lock_timed_out(exc: BaseException) -> bool:
    """Whether ``exc`` (psycopg's, or SQLAlchemy's around it) is a lock timeout."""
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, psycopg.errors.LockNotAvailable):
            return True
        orig = getattr(error, "orig", None)
        if isinstance(orig, psycopg.errors.LockNotAvailable):
            return True
        error = error.__cause__ or error.__context__
    return False


_LOCK_HOLDERS = """
select l.pid, a.state, a.xact_start, a.application_name
from pg_catalog.pg_locks l
join pg_catalog.pg_class c on c.oid = l.relation
join pg_catalog.pg_namespace n on n.oid = c.relnamespace
left join pg_catalog.pg_stat_activity a on a.pid = l.pid
where n.nspname = %s and c.relname like 'a2\\_%%' and l.granted
  and l.pid <> pg_catalog.pg_backend_pid()
group by l.pid, a.state, a.xact_start, a.application_name
order by a.xact_start nulls last, l.pid
limit 5
"""


def _lock_holders(dsn: str, schema: str) -> str:
    """The sessions that hold locks on a2pg's tables now, for the message (best effort)."""
    try:
        with psycopg.connect(to_libpq(dsn), autocommit=True, connect_timeout=5) as conn:
            rows = conn.execute(_LOCK_HOLDERS, (schema,)).fetchall()
    except psycopg.Error:
        return ""
    if not rows:
        return ""
    held = []
    for pid, state, started, application in rows:
        what = f"pid {pid}"
        details = [str(state)] if state else []
        if started is not None:
            details.append(f"transaction open since {started:%Y-%m-%d %H:%M:%S%z}")
        if application:
            details.append(f"application_name {application!r}")
        held.append(f"{what} ({', '.join(details)})" if details else what)
    return f" Holding locks on its tables now: {'; '.join(held)}."


def _lock_message(dsn: str, schema: str, lock_timeout: float, attempts: int) -> str:
    return (
        f"a2pg migrate gave up: a lock its DDL needs on schema {schema!r} was not granted "
        f"within {lock_timeout:g}s (lock_timeout), {attempts} times: another transaction "
        "holds one (an open transaction that wrote to the a2_ tables, or a long query). "
        f"Nothing was changed.{_lock_holders(dsn, schema)} Commit or end that transaction "
        "(pg_stat_activity shows it; pg_terminate_backend(pid) ends it), then run "
        "`a2pg migrate` again; or wait longer for it with --lock-timeout SECONDS."
    )


def downgrade(dsn: str, schema: str = DEFAULT_SCHEMA, revision: str = "base") -> None:
    """Reverts a2pg's migrations down to ``revision`` (``base`` drops every a2pg table)."""
    from alembic import command

    command.downgrade(alembic_config(dsn, schema), revision)


def upgrade_connection(
    connection: Connection, schema: str = DEFAULT_SCHEMA, revision: str = "heads"
) -> None:
    """Runs a2pg's branch on a host environment's connection (see the module docstring).

    Joins the connection's transaction when one is open, else runs in one and commits.
    A joined transaction gets its search_path back (a2pg's migration sets it to
    ``schema`` for its own statements). The host ``env.py``'s ``alembic.context`` and
    ``alembic.op`` stay usable afterwards.
    """
    import sqlalchemy

    joined = connection.in_transaction()
    path = connection.scalar(sqlalchemy.text(_SHOW_SEARCH_PATH)) if joined else None
    with _host_proxies_kept():
        _upgrade(alembic_config(schema=schema, connection=connection), revision)
    if path is not None:
        connection.execute(sqlalchemy.text(_SET_SEARCH_PATH), {"path": path})


def write_script(
    output: TextIO,
    schema: str = DEFAULT_SCHEMA,
    start: str | None = None,
    *,
    citus_shards: int | None = None,
) -> None:
    """Writes the SQL that migrates ``schema`` from ``start`` (a2pg's base when None) to
    a2pg's head, with a2pg's lock and schema preamble, without connecting anywhere:
    ``a2pg migrate --sql``, and ``alembic upgrade --sql`` of a host environment. Its
    Citus statements do nothing where the database has no Citus (``citus_shards``: as
    for :func:`upgrade`)."""
    config = alembic_config(schema=schema)
    if citus_shards is not None:
        config.attributes[citus.SHARDS_ATTRIBUTE] = citus.check_shards(citus_shards)
    config.output_buffer = output
    with _host_proxies_kept():
        _upgrade(config, f"{start}:heads" if start else "heads", sql=True)


def _upgrade(config: Config, revision: str, *, sql: bool = False) -> None:
    from alembic import command

    command.upgrade(config, revision, sql=sql)


@contextlib.contextmanager
def _host_proxies_kept() -> Iterator[None]:
    """Running a2pg's environment replaces ``alembic.context`` and ``alembic.op``; a host
    ``env.py`` that called us gets its own back."""
    from alembic import context, op

    saved = [getattr(module, "_proxy", None) for module in (context, op)]
    try:
        yield
    finally:
        for proxy in saved:
            if proxy is not None:
                proxy._install_proxy()


_SHOW_SEARCH_PATH = "select pg_catalog.current_setting('search_path')"
_SET_SEARCH_PATH = "select pg_catalog.set_config('search_path', :path, true)"


def preamble(schema: str) -> list[sql.Composed]:
    """What every migration transaction runs first: the lock, the schema, the search_path."""
    key = sql.Literal(LOCK_KEY_PREFIX + check_schema(schema))
    ident = sql.Identifier(schema)
    return [
        sql.SQL(
            "select pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended({}, 0))"
        ).format(key),
        sql.SQL("create schema if not exists {}").format(ident),
        sql.SQL("set local search_path to {}").format(ident),
    ]


def _schema_exists(conn: psycopg.Connection[Any], schema: str) -> bool:
    row = conn.execute(
        "select exists (select from pg_catalog.pg_namespace where nspname = %s)", (schema,)
    ).fetchone()
    return bool(row and row[0])


def distribute_tables(connection: Connection, schema: str, shards: int | None) -> LayoutStatus:
    """After the revisions (env.py): on Citus, makes each table of a current layout that
    is not of its kind (``citus.KINDS``) that kind, in the migration's transaction. The
    wrong ones are made local first, then distributed again, ``a2_sessions`` first (a
    new ``a2_sessions`` is a new colocation group: the check then finds every table
    co-located with the old one wrong too). Returns the layout as it was found; on plain
    PostgreSQL, or when every table is right, it reads and changes nothing more."""
    raw: psycopg.Connection[Any] = connection.connection.driver_connection  # type: ignore[assignment]
    status = inspect_connection(raw, schema)
    tables = [table for table, _ in status.misdistributed]  # a2_sessions first
    for table in reversed(tables):
        raw.execute(citus.undistribute_sql(table, schema=schema))
    for table in tables:
        kind = citus.KINDS[table]
        raw.execute(citus.distribute_sql(table, kind, schema=schema, shards=shards))
    if tables:
        log.warning(
            "a2pg migrate: distributed again on Citus, as a2pg needs, in schema %r: %s",
            schema,
            ", ".join(tables),
        )
    return status


def prepare_schema(
    connection: Connection, schema: str, *, lock_timeout: float | None = None
) -> LayoutStatus:
    """Locks, creates and selects ``schema`` in the open transaction; refuses what can't migrate.

    Called by env.py before Alembic looks at its version table, so a second
    concurrent migration waits here and then sees the first one's commit. Then, with a
    ``lock_timeout``, every later statement of the transaction waits at most that long
    for a lock (``set_config(..., true)``: this transaction only).
    """
    raw: psycopg.Connection[Any] = connection.connection.driver_connection  # type: ignore[assignment]
    lock, create, select = preamble(schema)
    raw.execute(lock)
    if lock_timeout is not None:
        milliseconds = f"{max(1, math.ceil(lock_timeout * 1000))}ms"
        raw.execute("select pg_catalog.set_config('lock_timeout', %s, true)", (milliseconds,))
    # CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when the schema is
    # there: skipped then, so a runtime role's `a2pg migrate` of a current layout is a no-op.
    if not _schema_exists(raw, schema):
        raw.execute(create)
    raw.execute(select)
    status = inspect_connection(raw, schema)
    if status.state in ("newer", "pre-consumer", "unknown"):
        raise status.error()
    return status
