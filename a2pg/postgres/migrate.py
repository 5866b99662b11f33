"""Run a2pg's Alembic migrations, and check a schema's layout before a store uses it.

``a2pg migrate`` calls :func:`upgrade`; ``a2pg check`` calls :func:`inspect_layout`;
``PostgresStore.open`` calls :func:`ensure_layout`, which refuses anything but the
current layout: the store never creates or alters tables itself.

Migrations run in one transaction that first takes an advisory lock keyed on the
schema, so several deploy jobs may migrate the same database at once: the first
applies the scripts, the others wait, then find nothing left to do.

Running a2pg's migrations from your own Alembic environment
------------------------------------------------------------
a2pg's history is the Alembic branch ``a2pg`` with its own version table,
``<schema>.a2_alembic_version``, so it never collides with your history.
The recommended way: call :func:`upgrade_connection` from your ``env.py``, on the
connection your own migrations use, after they ran::

    from a2pg.postgres.migrate import upgrade_connection

    with connectable.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata)
        with context.begin_transaction():
            context.run_migrations()
        upgrade_connection(connection, schema="a2")  # a2pg's branch, a2pg's version table

``alembic upgrade head`` then brings both up to date; your ``alembic downgrade``
never touches a2pg's tables; ``a2pg migrate`` and ``a2pg check`` keep working on the
same database, since a2pg's state stays in ``a2_alembic_version``.

Alternatively, put a2pg's scripts in your ``version_locations`` (the directory
:func:`versions_dir` returns) and run ``alembic upgrade heads``: Alembic then
records the ``a2pg`` branch as a second row of *your* version table, a2pg's tables
land in your ``search_path`` schema, and ``alembic downgrade base`` would drop them
too. Should you later switch to ``a2pg migrate``, it adopts such a schema: it stamps
``a2_alembic_version`` from the revision recorded in ``a2_meta`` and carries on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus

from ..errors import A2Error

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.engine import Connection, Engine

LAYOUT = "cursors-1"
"""The layout a2pg's store reads and writes, recorded in ``a2_meta``."""

REVISIONS = ("0001", "0002")
"""a2pg's revisions, oldest first; a test checks them against the shipped scripts."""

HEAD_REVISION = REVISIONS[-1]
BRANCH = "a2pg"
VERSION_TABLE = "a2_alembic_version"
DEFAULT_SCHEMA = "public"

TABLES = (
    "a2_meta",
    "a2_sessions",
    "a2_events",
    "a2_cursors",
    "a2_lane_events",
    "a2_snapshots",
    "a2_snapshot_history",
    "a2_snapshot_pins",
    "a2_presence",
    "a2_consumers",
)
"""Every table the head revision creates; a test checks this against a migrated schema."""

LOCK_KEY_PREFIX = "a2pg.migrate:"
"""Hashed with the schema name into the advisory lock key that serializes migrations."""

LayoutState = Literal["current", "empty", "older", "newer", "pre-consumer", "unknown"]

_PACKAGED_SCRIPTS = Path(__file__).resolve().parent.parent / "_alembic"
_CHECKOUT_SCRIPTS = Path(__file__).resolve().parents[2] / "alembic"
_DRIVER_PREFIX = re.compile(r"^postgres(?:ql)?(?:\+\w+)?://")

_CATALOG_SQL = """
select
    to_regclass(format('%%I.a2_meta', %(schema)s::text)) is not null,
    exists (
        select 1 from pg_attribute
        where attrelid = to_regclass(format('%%I.a2_events', %(schema)s::text))
          and attname = 'processed_at' and not attisdropped
    ),
    exists (
        select 1 from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = %(schema)s and c.relname = any(%(tables)s)
    )
"""


@dataclass(frozen=True, slots=True)
class LayoutStatus:
    """What a schema holds, compared with what this a2pg expects."""

    state: LayoutState
    schema: str
    revision: str | None
    """The revision recorded in ``a2_meta``, if any."""
    expected: str = HEAD_REVISION

    @property
    def is_current(self) -> bool:
        return self.state == "current"

    def describe(self) -> str:
        """One line for a human: what the schema holds."""
        where = f"schema {self.schema!r}"
        if self.state == "current":
            return f"{where} has the a2pg layout {LAYOUT} at revision {self.revision} (current)"
        if self.state == "empty":
            return f"{where} has no a2pg tables"
        if self.state == "older":
            return f"{where} is at a2pg revision {self.revision}, older than {self.expected}"
        if self.state == "newer":
            return (
                f"{where} is at a2pg revision {self.revision}, which this a2pg "
                f"(head {self.expected}) does not know: a newer a2pg migrated it"
            )
        if self.state == "pre-consumer":
            return f"{where} holds the pre-consumer A2 layout (a2_events.processed_at, no a2_meta)"
        return f"{where} has a2pg tables but no {LAYOUT} layout record in a2_meta"

    def fix(self) -> str:
        """What to do about it; every state but current names ``a2pg migrate``."""
        if self.state == "current":
            return "nothing to do"
        if self.state in ("empty", "older"):
            return f"run `a2pg migrate` (schema {self.schema!r})"
        if self.state == "newer":
            return (
                "deploy the newer a2pg whose `a2pg migrate` made it, "
                f"or downgrade the schema to {self.expected} with that a2pg"
            )
        if self.state == "pre-consumer":
            return (
                "a2pg cannot convert it: point the store at a fresh schema or database "
                "and run `a2pg migrate` there"
            )
        return "move those tables aside and run `a2pg migrate`, or point the store elsewhere"

    def error(self) -> A2Error:
        """The ``STORE_NOT_CONFIGURED`` error a store raises on this schema."""
        return A2Error("STORE_NOT_CONFIGURED", f"{self.describe()}; {self.fix()}")

    def __str__(self) -> str:
        return self.describe()


def check_schema(schema: object) -> str:
    """A schema name PostgreSQL accepts: 1 to 63 bytes, no NUL."""
    if not isinstance(schema, str) or not schema or "\x00" in schema:
        raise A2Error("INVALID_ARGUMENT", f"schema must be a non-empty name, got {schema!r}")
    if len(schema.encode()) > 63:
        raise A2Error("INVALID_ARGUMENT", f"schema name {schema!r} is longer than 63 bytes")
    return schema


def _classify(
    schema: str, has_meta: bool, pre_consumer: bool, has_tables: bool, meta: dict[str, str]
) -> LayoutStatus:
    """Turns what the catalog and a2_meta say into a LayoutStatus (no I/O)."""
    revision = meta.get("revision")
    if not has_meta:
        if pre_consumer:
            return LayoutStatus("pre-consumer", schema, None)
        return LayoutStatus("unknown" if has_tables else "empty", schema, None)
    if revision is not None and revision not in REVISIONS:
        return LayoutStatus("newer", schema, revision)
    if meta.get("layout") != LAYOUT or revision is None:
        return LayoutStatus("unknown", schema, revision)
    return LayoutStatus("current" if revision == HEAD_REVISION else "older", schema, revision)


def _meta_query(schema: str) -> sql.Composed:
    return sql.SQL("select key, value from {}.a2_meta").format(sql.Identifier(schema))


def _inspect(conn: psycopg.Connection[Any], schema: str) -> LayoutStatus:
    row = conn.execute(_CATALOG_SQL, {"schema": schema, "tables": list(TABLES)}).fetchone()
    assert row is not None
    has_meta, pre_consumer, has_tables = row
    meta: dict[str, str] = {}
    if has_meta:
        meta = dict(conn.execute(_meta_query(schema)).fetchall())
    return _classify(schema, has_meta, pre_consumer, has_tables, meta)


def inspect_layout(
    conn_or_dsn: psycopg.Connection[Any] | str, schema: str = DEFAULT_SCHEMA
) -> LayoutStatus:
    """What ``schema`` holds. Read-only; a DSN gets its own short connection.

    On a connection in a transaction the queries join it; on an idle
    non-autocommit connection they run in a transaction of their own.
    """
    check_schema(schema)
    if isinstance(conn_or_dsn, str):
        with psycopg.connect(to_libpq_dsn(conn_or_dsn), autocommit=True) as conn:
            return _inspect(conn, schema)
    conn = conn_or_dsn
    if conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE:
        return _inspect(conn, schema)
    with conn.transaction():
        return _inspect(conn, schema)


async def _inspect_async(conn: psycopg.AsyncConnection[Any], schema: str) -> LayoutStatus:
    cur = await conn.execute(_CATALOG_SQL, {"schema": schema, "tables": list(TABLES)})
    row = await cur.fetchone()
    assert row is not None
    has_meta, pre_consumer, has_tables = row
    meta: dict[str, str] = {}
    if has_meta:
        cur = await conn.execute(_meta_query(schema))
        meta = dict(await cur.fetchall())
    return _classify(schema, has_meta, pre_consumer, has_tables, meta)


async def ensure_layout(
    conn: psycopg.AsyncConnection[Any], schema: str = DEFAULT_SCHEMA
) -> LayoutStatus:
    """Raises ``STORE_NOT_CONFIGURED`` (naming ``a2pg migrate``) unless the layout is current."""
    check_schema(schema)
    if conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE:
        status = await _inspect_async(conn, schema)
    else:
        async with conn.transaction():
            status = await _inspect_async(conn, schema)
    if not status.is_current:
        raise status.error()
    return status


# --- Running the Alembic scripts -------------------------------------------------------------


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


def to_libpq_dsn(dsn: str) -> str:
    """``postgresql+psycopg://`` and ``postgres://`` URLs as libpq reads them; other DSNs as is."""
    return _DRIVER_PREFIX.sub("postgresql://", dsn, count=1)


def create_engine(dsn: str) -> Engine:
    """A SQLAlchemy engine on the psycopg 3 driver; any libpq DSN or URL works."""
    import sqlalchemy
    from sqlalchemy.pool import NullPool

    conninfo = to_libpq_dsn(dsn)
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


def upgrade(dsn: str, schema: str = DEFAULT_SCHEMA, revision: str = "heads") -> None:
    """Applies a2pg's migrations up to ``revision``; safe to run concurrently and repeatedly."""
    from alembic import command

    command.upgrade(alembic_config(dsn, schema), revision)


def downgrade(dsn: str, schema: str = DEFAULT_SCHEMA, revision: str = "base") -> None:
    """Reverts a2pg's migrations down to ``revision`` (``base`` drops every a2pg table)."""
    from alembic import command

    command.downgrade(alembic_config(dsn, schema), revision)


def upgrade_connection(
    connection: Connection, schema: str = DEFAULT_SCHEMA, revision: str = "heads"
) -> None:
    """Runs a2pg's branch on a host environment's connection (see the module docstring).

    Joins the connection's transaction when one is open, else runs in one and commits.
    The host ``env.py``'s ``alembic.context`` and ``alembic.op`` stay usable afterwards.
    """
    from alembic import command, context, op

    saved = [getattr(module, "_proxy", None) for module in (context, op)]
    try:
        command.upgrade(alembic_config(schema=schema, connection=connection), revision)
    finally:
        for proxy in saved:
            if proxy is not None:
                proxy._install_proxy()


def preamble(schema: str) -> list[sql.Composed]:
    """What every migration transaction runs first: the lock, the schema, the search_path."""
    key = sql.Literal(LOCK_KEY_PREFIX + check_schema(schema))
    ident = sql.Identifier(schema)
    return [
        sql.SQL("select pg_advisory_xact_lock(hashtextextended({}, 0))").format(key),
        sql.SQL("create schema if not exists {}").format(ident),
        sql.SQL("set local search_path to {}").format(ident),
    ]


def prepare_schema(connection: Connection, schema: str) -> LayoutStatus:
    """Locks, creates and selects ``schema`` in the open transaction; refuses what can't migrate.

    Called by env.py before Alembic looks at its version table, so a second
    concurrent migration waits here and then sees the first one's commit.
    """
    raw: psycopg.Connection[Any] = connection.connection.driver_connection  # type: ignore[assignment]
    for statement in preamble(schema):
        raw.execute(statement)
    status = _inspect(raw, schema)
    if status.state in ("newer", "pre-consumer", "unknown"):
        raise status.error()
    return status
