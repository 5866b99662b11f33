"""The layout check: what a schema holds, compared with what this a2pg reads and writes.

``a2pg check`` calls :func:`inspect_layout`; ``PostgresStore.open`` calls
:func:`ensure_layout`, which refuses anything but the current layout: the store
never creates or alters tables itself (``a2pg migrate`` does, see ``migrate``).

On a database with the ``citus`` extension, a current layout is also one whose tables
are each of their Citus kind (``citus.KINDS``): one left local, or distributed another
way, makes the schema ``undistributed``, which ``a2pg migrate`` puts right. The catalog
query says whether the extension is there, so plain PostgreSQL pays no extra statement.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, replace
from typing import Any, Literal

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row

from ..errors import A2Error
from . import citus
from .dsn import to_libpq

LAYOUT = "cursors-1"
"""The layout a2pg's store reads and writes, recorded in ``a2_meta``."""

REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006", "0007")
"""a2pg's revisions, oldest first; a test checks them against the shipped scripts."""

HEAD_REVISION = REVISIONS[-1]
VERSION_TABLE = "a2_alembic_version"
DEFAULT_SCHEMA = "public"
CONNECT_TIMEOUT_SECONDS = 10
"""How long ``inspect_layout`` waits for a connection of its own."""

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
    "a2_consumer_pauses",
    "a2_workers",
    "a2_attempts",
    "a2_audit",
)
"""Every table the head revision creates; a test checks this against a migrated schema."""

LayoutState = Literal[
    "current", "empty", "older", "newer", "pre-consumer", "unknown", "undistributed"
]


# Catalogs and functions are pg_catalog's by name, as in every statement of the store:
# nothing here depends on the connection's search_path.
CATALOG_SQL = """
select
    pg_catalog.to_regclass(pg_catalog.format('%%I.a2_meta', %(schema)s::text)) is not null,
    exists (
        select 1 from pg_catalog.pg_attribute
        where attrelid = pg_catalog.to_regclass(
                  pg_catalog.format('%%I.a2_events', %(schema)s::text))
          and attname = 'processed_at' and not attisdropped
    ),
    exists (
        select 1
          from pg_catalog.pg_class c
          join pg_catalog.pg_namespace n on n.oid = c.relnamespace
        where n.nspname = %(schema)s and c.relname = any(%(tables)s)
    ),
    exists (select 1 from pg_catalog.pg_extension where extname = 'citus')
"""

_STATEMENT_TIMEOUT_SQL = "select pg_catalog.set_config('statement_timeout', %(ms)s, true)"
"""The startup checks' timeout, for their transaction only (``SET LOCAL``): a session
setting or a startup parameter would not survive a transaction-mode pooler."""


@dataclass(frozen=True, slots=True)
class LayoutStatus:
    """What a schema holds, compared with what this a2pg expects."""

    state: LayoutState
    schema: str
    revision: str | None
    """The revision recorded in ``a2_meta``, if any."""
    expected: str = HEAD_REVISION
    misdistributed: tuple[tuple[str, str], ...] = ()
    """On Citus, ``(table, what it is)`` for each table not of its kind (``undistributed``)."""
    distributed: bool = False
    """A current layout on Citus, every table of its kind: the store runs its Citus
    statements (``queries.DIALECTS``)."""

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
        if self.state == "undistributed":
            wrong = [f"{table} is {actual}" for table, actual in self.misdistributed]
            if len(wrong) > 3:
                wrong[2:] = [f"and {len(wrong) - 2} more tables"]
            return (
                f"{where} is at a2pg revision {self.revision} on Citus, but not every table "
                f"is of its kind ({citus.KINDS_TEXT}): {'; '.join(wrong)}"
            )
        return f"{where} has a2pg tables but no {LAYOUT} layout record in a2_meta"

    def fix(self) -> str:
        """What to do about it; every state but current names ``a2pg migrate``."""
        if self.state == "current":
            return "nothing to do"
        if self.state in ("empty", "older"):
            return f"run `a2pg migrate` (schema {self.schema!r})"
        if self.state == "undistributed":
            return f"run `a2pg migrate` (schema {self.schema!r}): it distributes them"
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


def classify(
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


def meta_query(schema: str) -> sql.Composed:
    return sql.SQL("select key, value from {}.a2_meta").format(sql.Identifier(schema))


Query = tuple[str | sql.Composed, dict[str, Any] | None]
Reads = Generator[Query, list[tuple[Any, ...]], LayoutStatus]


def layout_reads(schema: str) -> Reads:
    """The reading of ``schema``'s layout, without I/O: it yields each query with its
    parameters, is sent the query's rows, and returns the status. The catalog first,
    then ``a2_meta`` when there is one, then, only for a current layout on a database
    with Citus, each table's Citus kind. The drivers (sync and async) run it."""
    [row] = yield CATALOG_SQL, {"schema": schema, "tables": list(TABLES)}
    has_meta, pre_consumer, has_tables, has_citus = row
    meta: dict[str, str] = {}
    if has_meta:
        rows = yield meta_query(schema), None
        meta = {str(key): str(value) for key, value in rows}
    status = classify(schema, has_meta, pre_consumer, has_tables, meta)
    if has_citus and status.is_current:
        kinds = yield citus.KINDS_SQL, citus.kinds_params(schema)
        wrong = citus.misdistributed(kinds)
        if wrong:
            status = replace(status, state="undistributed", misdistributed=wrong)
        else:
            status = replace(status, distributed=True)
    return status


def inspect_connection(conn: psycopg.Connection[Any], schema: str) -> LayoutStatus:
    """What ``schema`` holds, read on ``conn`` as it is (in its transaction, if any), on
    a cursor of its own (whatever the connection's row factory), nothing prepared."""
    cur = conn.cursor(row_factory=tuple_row)
    reads = layout_reads(schema)
    query = next(reads)
    while True:
        rows = cur.execute(*query, prepare=False).fetchall()
        try:
            query = reads.send(rows)
        except StopIteration as done:
            status: LayoutStatus = done.value
            return status


async def inspect_async(conn: psycopg.AsyncConnection[Any], schema: str) -> LayoutStatus:
    """``inspect_connection`` on an async connection."""
    cur = conn.cursor(row_factory=tuple_row)
    reads = layout_reads(schema)
    query = next(reads)
    while True:
        await cur.execute(*query, prepare=False)
        rows = await cur.fetchall()
        try:
            query = reads.send(rows)
        except StopIteration as done:
            status: LayoutStatus = done.value
            return status


def inspect_layout(
    conn_or_dsn: psycopg.Connection[Any] | str, schema: str = DEFAULT_SCHEMA
) -> LayoutStatus:
    """What ``schema`` holds. Read-only; a DSN gets its own short connection.

    On a connection in a transaction the queries join it; on an idle
    non-autocommit connection they run in a transaction of their own.
    """
    check_schema(schema)
    if isinstance(conn_or_dsn, str):
        with psycopg.connect(
            to_libpq(conn_or_dsn), autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS
        ) as conn:
            return inspect_connection(conn, schema)
    conn = conn_or_dsn
    if conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE:
        return inspect_connection(conn, schema)
    with conn.transaction():
        return inspect_connection(conn, schema)


async def ensure_layout(
    conn: psycopg.AsyncConnection[Any],
    schema: str = DEFAULT_SCHEMA,
    *,
    statement_timeout: float | None = None,
) -> LayoutStatus:
    """Raises ``STORE_NOT_CONFIGURED`` (naming ``a2pg migrate``) unless the layout is current.

    With ``statement_timeout`` (seconds), the check runs in a transaction of its own
    under that timeout: a lock held by a migration cannot hang a store's startup. A
    connection already in a transaction is read as it is.
    """
    check_schema(schema)
    in_transaction = conn.info.transaction_status != TransactionStatus.IDLE
    if in_transaction or (conn.autocommit and statement_timeout is None):
        status = await inspect_async(conn, schema)
    else:
        async with conn.transaction():
            if statement_timeout is not None:
                ms = str(max(1, round(statement_timeout * 1000)))
                await conn.execute(_STATEMENT_TIMEOUT_SQL, {"ms": ms})
            status = await inspect_async(conn, schema)
    if not status.is_current:
        raise status.error()
    return status
