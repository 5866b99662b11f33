"""a2pg's tables on Citus: the session tables sharded by ``session_id``, the rest on every node.

Every session table's key starts with ``session_id`` and a session's writes touch only
its own rows, so on Citus those tables are *distributed* by ``session_id``, co-located
with ``a2_sessions`` (a session's rows of every table sit in one shard group, on one
node). The few tables not keyed by session (the layout record, the consumer registry,
the workers' heartbeats, the audit log, presence) are small and read by every session's
statements: they are *reference* tables, copied to every node.

Revision 0007 distributes the tables of its day; a revision that creates a table later
distributes it with :func:`distribute`, the one way a2pg does it. On plain PostgreSQL
(no ``citus`` extension in the database) the helper's statement does nothing, so the
same revision, and the same ``a2pg migrate --sql`` script, serve both.

The statement is a ``DO`` block: PL/pgSQL plans each expression only when it first
runs, so its call of ``create_distributed_table`` (a function plain PostgreSQL lacks)
is never planned there. Being one statement, it also keeps a revision's rule of one
statement per ``op.execute``, which Citus needs on distributed tables. It names the
table schema-qualified: ``schema`` when given, else the migration's ``current_schema()``
(the schema its ``search_path`` selects, where the revision created the table).

A table that already holds rows is distributed with them: Citus copies the rows to the
shards (or, for a reference table, to every node), and the helper then truncates the
coordinator's local copy (``truncate_local_data_after_distributing_table``), which Citus
leaves behind and never reads again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

from psycopg import sql

from ..errors import A2Error

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext

Kind = Literal["distributed", "reference"]

SESSIONS = "a2_sessions"
"""The table every distributed table is co-located with."""
DISTRIBUTION_COLUMN = "session_id"

KINDS: Mapping[str, Kind] = {
    "a2_sessions": "distributed",
    "a2_events": "distributed",
    "a2_cursors": "distributed",
    "a2_lane_events": "distributed",
    "a2_snapshots": "distributed",
    "a2_snapshot_history": "distributed",
    "a2_snapshot_pins": "distributed",
    "a2_attempts": "distributed",
    "a2_meta": "reference",
    "a2_alembic_version": "reference",
    "a2_consumers": "reference",
    "a2_consumer_pauses": "reference",
    "a2_workers": "reference",
    "a2_audit": "reference",
    "a2_presence": "reference",
}
"""Each table of the head layout (and a2pg's version table) and its kind on Citus: a
test checks it against the tables a migrated schema holds and their primary keys. A
revision that adds a table adds it here and calls :func:`distribute`."""

SHARDS_ATTRIBUTE = "citus_shards"
"""The setting's name: Alembic's ``config.attributes`` key and ``-x citus_shards=N``."""
SHARDS_ENV = "A2PG_CITUS_SHARDS"
MAX_SHARDS = 64000
"""Citus's own bound on a table's shard count."""


def check_shards(value: object) -> int | None:
    """The shard count of ``a2_sessions`` (and so of every co-located table): a whole
    number from 1 to 64000, or None (empty) for Citus's default (``citus.shard_count``)."""
    if value is None or value == "":
        return None
    count: object = value
    if isinstance(value, str):
        try:
            count = int(value.strip())
        except ValueError:
            count = value
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_SHARDS:
        raise A2Error(
            "INVALID_ARGUMENT",
            f"the Citus shard count must be a whole number from 1 to {MAX_SHARDS}, got {value!r}",
        )
    return count


def shard_setting(config: Config | None) -> int | None:
    """The shard count a migration was given, first found wins: ``config.attributes``
    (``upgrade(citus_shards=N)``, ``a2pg migrate --citus-shards N``), ``-x
    citus_shards=N``, ``$A2PG_CITUS_SHARDS``."""
    if config is None:
        return check_shards(os.environ.get(SHARDS_ENV))
    given = config.attributes.get(SHARDS_ATTRIBUTE)
    if given is not None:
        return check_shards(given)
    for pair in getattr(config.cmd_opts, "x", None) or ():
        key, sep, value = str(pair).partition("=")
        if sep and key.strip() == SHARDS_ATTRIBUTE:
            return check_shards(value)
    return check_shards(os.environ.get(SHARDS_ENV))


class Migration(Protocol):
    """What the helpers use of Alembic's ``op`` (a revision passes the module itself)."""

    def execute(self, sqltext: Any, *, execution_options: Any = None) -> None: ...

    def get_context(self) -> MigrationContext: ...


def _qualified(table: str, schema: str | None) -> sql.Composable:
    """``"schema".table`` as an SQL text expression, computed where the block runs."""
    where: sql.Composable = (
        sql.SQL("pg_catalog.current_schema()") if schema is None else sql.Literal(schema)
    )
    return sql.SQL("pg_catalog.quote_ident({}) || '.' || pg_catalog.quote_ident({})").format(
        where, sql.Literal(table)
    )


_DISTRIBUTE = """
declare
    rel regclass default pg_catalog.to_regclass({table});
begin
    if rel is null then
        {missing}
    elsif exists (select from pg_catalog.pg_extension where extname = 'citus') then
        if not exists (select from pg_catalog.pg_dist_partition where logicalrelid = rel) then
            perform {create};
            perform pg_catalog.truncate_local_data_after_distributing_table(rel);
        end if;
    end if;
end
"""

_UNDISTRIBUTE = """
declare
    rel regclass default pg_catalog.to_regclass({table});
begin
    if rel is not null
       and exists (select from pg_catalog.pg_extension where extname = 'citus') then
        if exists (select from pg_catalog.pg_dist_partition where logicalrelid = rel) then
            perform pg_catalog.undistribute_table(rel);
        end if;
    end if;
end
"""
# The blocks hold no ``%`` and no ``:name``: Alembic passes a revision's text through
# SQLAlchemy, which would read them as parameters.


_TAG = "$a2pg$"


def _block(body: sql.Composed) -> str:
    """``do $a2pg$<body>$a2pg$``: one statement, readable in ``a2pg migrate --sql``; a
    body holding the tag (a schema named so) is quoted as a literal instead."""
    text = body.as_string()
    if _TAG in text:
        return sql.SQL("do {}").format(sql.Literal(text)).as_string()
    return f"do {_TAG}{text}{_TAG}"


def distribute_sql(
    table: str,
    kind: Kind,
    *,
    schema: str | None = None,
    shards: int | None = None,
    if_exists: bool = False,
) -> str:
    """The one statement that makes ``table`` of ``kind`` when Citus is there (else, and
    when it already is distributed, it does nothing). ``shards`` counts the shards of
    ``a2_sessions``, the table the others are co-located with (ignored for them). A
    missing table is an error, unless ``if_exists``."""
    create: sql.Composable
    if kind == "reference":
        create = sql.SQL("pg_catalog.create_reference_table(rel)")
    elif kind != "distributed":
        raise ValueError(f"kind must be 'distributed' or 'reference', got {kind!r}")
    elif table == SESSIONS:
        # A colocation group of its own: another schema's a2_sessions (or any table of
        # the same shard count) never shares its shards' placement by accident.
        create = sql.SQL(
            "pg_catalog.create_distributed_table(rel, {column}, colocate_with => 'none'{shards})"
        ).format(
            column=sql.Literal(DISTRIBUTION_COLUMN),
            shards=sql.SQL("")
            if shards is None
            else sql.SQL(", shard_count => {}").format(sql.Literal(check_shards(shards))),
        )
    else:
        create = sql.SQL(
            "pg_catalog.create_distributed_table(rel, {column}, colocate_with => {sessions})"
        ).format(column=sql.Literal(DISTRIBUTION_COLUMN), sessions=_qualified(SESSIONS, schema))
    missing = (
        sql.SQL("return;")
        if if_exists
        else sql.SQL(
            "raise exception using message = 'a2pg: no table to distribute: ' || {};"
        ).format(_qualified(table, schema))
    )
    body = sql.SQL(_DISTRIBUTE).format(
        table=_qualified(table, schema), missing=missing, create=create
    )
    return _block(body)


def undistribute_sql(table: str, *, schema: str | None = None) -> str:
    """The one statement that makes ``table`` a plain local table again (Citus copies its
    rows back to the coordinator); nothing without Citus, or when it is local already."""
    return _block(sql.SQL(_UNDISTRIBUTE).format(table=_qualified(table, schema)))


def _shards(op: Migration) -> int | None:
    return shard_setting(op.get_context().config)


def distribute(op: Migration, table: str, kind: Kind, *, if_exists: bool = False) -> None:
    """Distributes ``table`` (a revision's, in the migration's schema) as ``kind`` when the
    database has Citus; does nothing on plain PostgreSQL. For a revision: ``op`` is
    Alembic's ``op``; the shard count is the migration's setting (:func:`shard_setting`)."""
    op.execute(distribute_sql(table, kind, shards=_shards(op), if_exists=if_exists))


def undistribute(op: Migration, table: str) -> None:
    """Undoes :func:`distribute` in a revision's downgrade (nothing on plain PostgreSQL)."""
    op.execute(undistribute_sql(table))


# -- the layout check -------------------------------------------------------------------------

KINDS_SQL = """
select c.relname::text, p.partmethod::text, p.repmodel::text,
       case when p.partmethod = 'h'
            then pg_catalog.column_to_column_name(p.logicalrelid, p.partkey) end,
       p.partmethod = 'h' and s.partmethod = 'h' and p.colocationid = s.colocationid
  from pg_catalog.pg_class c
  join pg_catalog.pg_namespace n on n.oid = c.relnamespace
  left join pg_catalog.pg_dist_partition p on p.logicalrelid = c.oid
  left join pg_catalog.pg_class sc on sc.relnamespace = n.oid and sc.relname = 'a2_sessions'
  left join pg_catalog.pg_dist_partition s on s.logicalrelid = sc.oid
 where n.nspname = %(schema)s and c.relname = any(%(tables)s) and c.relkind in ('r', 'p')
"""
"""Each a2pg table of the schema and what Citus makes of it (run only where the
extension is: ``pg_dist_partition`` is Citus's catalog)."""


def kinds_params(schema: str) -> dict[str, Any]:
    return {"schema": schema, "tables": list(KINDS)}


KINDS_TEXT = (
    "the session tables distributed by session_id, co-located with a2_sessions; "
    "the others reference tables"
)
"""What a2pg makes of its tables on Citus, in a sentence (for messages)."""

_KIND_TEXT: Mapping[str, str] = {
    "distributed": "distributed by session_id",
    "reference": "a reference table",
}


def _actual(method: str | None, model: str | None, column: str | None, colocated: bool) -> str:
    """A table's Citus kind, from its ``pg_dist_partition`` row: a :data:`Kind` when it is
    one of a2pg's, else what it is."""
    if method is None:
        return "a local table"
    if method == "n":
        return "reference" if model == "t" else "a Citus local table"
    if method == "h":
        if column != DISTRIBUTION_COLUMN:
            return f"distributed by {column}"
        return "distributed" if colocated else "distributed by session_id, not co-located with it"
    return "distributed by range" if method == "r" else "distributed by append"


def misdistributed(rows: list[tuple[Any, ...]]) -> tuple[tuple[str, str], ...]:
    """``(table, what it is)`` for each table whose Citus kind is not a2pg's, from the
    rows of :data:`KINDS_SQL`, ``a2_sessions`` first; a table the schema lacks is
    another check's business."""
    wrong = []
    # a2_sessions first: when it is wrong, so are the tables co-located with it.
    for table, method, model, column, colocated in sorted(
        rows, key=lambda row: (row[0] != SESSIONS, str(row[0]))
    ):
        actual = _actual(method, model, column, bool(colocated))
        if actual != KINDS[table]:
            wrong.append((str(table), _KIND_TEXT.get(actual, actual)))
    return tuple(wrong)
