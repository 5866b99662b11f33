"""``a2pg migrate`` and ``a2pg check`` on Citus: revision 0007 distributes every table.

Read off Citus's own catalog (``pg_dist_partition``, ``pg_dist_shard``), not through
a2pg's layout check: the session tables hash-distributed by ``session_id`` in one
colocation group with ``a2_sessions``, of the shard count asked for; the others
reference tables. Then down to 0006 and up again, a half-distributed schema refused and
put right, and rows that were there before the distribution kept.
"""

from __future__ import annotations

import asyncio
import io
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from psycopg import sql

from a2pg import Consumer, LogSpec, NewEvent, Target
from a2pg.errors import A2Error
from a2pg.postgres import PostgresStore, migrate, queries
from a2pg.postgres.layout import HEAD_REVISION, inspect_layout
from a2pg.testing import scratch_database
from tests.postgres.test_queries import assert_every_statement_parses

from .conftest import Cli

pytestmark = [pytest.mark.citus, pytest.mark.postgres]

SESSION_TABLES = {
    "a2_sessions",
    "a2_events",
    "a2_cursors",
    "a2_lane_events",
    "a2_snapshots",
    "a2_snapshot_history",
    "a2_snapshot_pins",
    "a2_attempts",
}
REFERENCE_TABLES = {
    "a2_meta",
    "a2_alembic_version",
    "a2_consumers",
    "a2_consumer_pauses",
    "a2_workers",
    "a2_audit",
    "a2_presence",
}


@dataclass(frozen=True)
class Placement:
    """What Citus's catalog says of one table."""

    method: str | None
    """``h`` hash-distributed, ``n`` reference (or Citus local), None a plain table."""
    model: str | None
    column: str | None
    colocation: int | None
    shards: int


CATALOG = """
select c.relname, p.partmethod::text, p.repmodel::text,
       case when p.partmethod = 'h'
            then pg_catalog.column_to_column_name(p.logicalrelid, p.partkey) end,
       p.colocationid,
       (select count(*) from pg_catalog.pg_dist_shard d where d.logicalrelid = c.oid)
  from pg_catalog.pg_class c
  join pg_catalog.pg_namespace n on n.oid = c.relnamespace
  left join pg_catalog.pg_dist_partition p on p.logicalrelid = c.oid
 where n.nspname = %s and c.relkind = 'r' and c.relname like 'a2\\_%%'
"""


def placements(dsn: str, schema: str) -> dict[str, Placement]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(CATALOG, [schema]).fetchall()
    return {name: Placement(*rest) for name, *rest in rows}


def assert_distributed(dsn: str, schema: str, shards: int | None = None) -> None:
    """Every table of its kind; every session table of ``shards`` shards (when given)."""
    found = placements(dsn, schema)
    assert set(found) == SESSION_TABLES | REFERENCE_TABLES
    sessions = found["a2_sessions"]
    for table in SESSION_TABLES:
        placement = found[table]
        assert (placement.method, placement.column) == ("h", "session_id"), (table, placement)
        assert placement.colocation == sessions.colocation, table
        assert placement.shards == (shards or sessions.shards), table
    for table in REFERENCE_TABLES:
        placement = found[table]
        assert (placement.method, placement.model, placement.shards) == ("n", "t", 1), table


def assert_local(dsn: str, schema: str) -> None:
    found = placements(dsn, schema)
    assert found and {p.method for p in found.values()} == {None}, found


def run(dsn: str, statement: sql.Composed) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(statement)


def undistribute(dsn: str, schema: str, table: str) -> None:
    """What an operator's hand may do: make one table local again."""
    run(
        dsn,
        sql.SQL("select pg_catalog.undistribute_table({})").format(
            sql.Literal(sql.Identifier(schema, table).as_string())
        ),
    )


def test_cli_migrate_distributes_every_table_and_check_passes(
    cli: Cli, citus_dsn: str, schema: str
) -> None:
    migrated = cli("migrate", "--dsn", citus_dsn, "--schema", schema, "--citus-shards", "3")
    assert migrated.code == 0, migrated
    assert migrated.out.startswith("migrated: "), migrated
    assert_distributed(citus_dsn, schema, shards=3)
    check = cli("check", "--dsn", citus_dsn, "--schema", schema)
    assert check.code == 0, check
    assert f"at revision {HEAD_REVISION} (current)" in check.out
    again = cli("migrate", "--dsn", citus_dsn, "--schema", schema)
    assert again.code == 0 and again.out.startswith("already current: "), again


def test_downgrade_to_0006_makes_every_table_local_and_upgrade_distributes_again(
    citus_dsn: str, own_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrate.upgrade(citus_dsn, own_schema, citus_shards=2)
    assert_distributed(citus_dsn, own_schema, shards=2)
    migrate.downgrade(citus_dsn, own_schema, "0006")
    assert_local(citus_dsn, own_schema)
    status = inspect_layout(citus_dsn, own_schema)
    assert (status.state, status.revision) == ("older", "0006")
    monkeypatch.setenv("A2PG_CITUS_SHARDS", "5")  # the setting's other way in
    migrate.upgrade(citus_dsn, own_schema)
    assert_distributed(citus_dsn, own_schema, shards=5)
    assert inspect_layout(citus_dsn, own_schema).is_current
    migrate.downgrade(citus_dsn, own_schema, "base")
    assert set(placements(citus_dsn, own_schema)) == {"a2_alembic_version"}
    migrate.upgrade(citus_dsn, own_schema)
    assert_distributed(citus_dsn, own_schema, shards=5)


def test_the_migration_script_distributes_too(citus_dsn: str, own_schema: str) -> None:
    """``a2pg migrate --sql``, run by a DBA with psql, makes the same layout."""
    psql = shutil.which("psql")
    assert psql is not None, "psql (PostgreSQL's client) is needed to run the script"
    script = io.StringIO()
    migrate.write_script(script, own_schema, citus_shards=2)
    done = subprocess.run(
        [psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", citus_dsn, "-f", "-"],
        input=script.getvalue(),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert_distributed(citus_dsn, own_schema, shards=2)
    assert inspect_layout(citus_dsn, own_schema).is_current


async def open_store(dsn: str, schema: str) -> None:
    store = await PostgresStore.open(dsn, schema=schema, max_size=1)
    await store.close()


@pytest.mark.parametrize("table", ["a2_events", "a2_meta", "a2_sessions"])
def test_a_half_distributed_schema_is_refused_until_migrate_puts_it_right(
    cli: Cli, citus_dsn: str, own_schema: str, table: str
) -> None:
    migrate.upgrade(citus_dsn, own_schema, citus_shards=2)
    undistribute(citus_dsn, own_schema, table)
    status = inspect_layout(citus_dsn, own_schema)
    assert status.state == "undistributed"
    assert f"{table} is a local table" in status.describe()
    assert "a2pg migrate" in status.fix()
    with pytest.raises(A2Error) as refused:  # the CLI runs its own loop: not an async test
        asyncio.run(open_store(citus_dsn, own_schema))
    assert refused.value.code == "STORE_NOT_CONFIGURED"
    assert table in refused.value.message and "a2pg migrate" in refused.value.message
    check = cli("check", "--dsn", citus_dsn, "--schema", own_schema)
    assert check.code == 4, check
    assert "a2pg migrate" in check.err
    migrated = cli("migrate", "--dsn", citus_dsn, "--schema", own_schema)
    assert migrated.code == 0, migrated
    assert_distributed(citus_dsn, own_schema)
    assert cli("check", "--dsn", citus_dsn, "--schema", own_schema).code == 0
    asyncio.run(open_store(citus_dsn, own_schema))


def contents(dsn: str, schema: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the session tables and of the registry, as text, in key order."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {
            table: conn.execute(
                sql.SQL("select t::text from {} t order by 1").format(sql.Identifier(schema, table))
            ).fetchall()
            for table in sorted(KEPT)
        }


KEPT = SESSION_TABLES | {"a2_consumers"}
"""The tables whose rows the test carries over (a2_meta's differ by the revision)."""


async def appended_rows(server_dsn: str) -> dict[str, list[str]]:
    """What the store's append writes, as JSON rows per table: a session, its events,
    their event and lane cursors, and a log consumer's cursor. Written on plain
    PostgreSQL: the store's append does not run on Citus's distributed tables yet."""
    with scratch_database(server_dsn, "a2pg_citus_rows") as dsn:
        migrate.upgrade(dsn)
        store = await PostgresStore.open(dsn, max_size=1)
        try:
            await store.register_consumers([Consumer("audit", LogSpec())])
            events = [
                NewEvent("order.placed", {"n": 1}, targets=[Target("mailer")]),
                NewEvent("order.placed", {"n": 2}, targets=[Target("shipper", lane="orders")]),
            ]
            await store.append("s-1", events)
            await store.append("s-2", events[:1])
        finally:
            await store.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            return {
                table: [
                    text
                    for (text,) in conn.execute(
                        sql.SQL("select pg_catalog.row_to_json(t)::text from {} t").format(
                            sql.Identifier(table)
                        )
                    )
                ]
                for table in sorted(KEPT)
            }


def local_bytes(dsn: str, schema: str) -> int:
    """The size of the coordinator's own copy of the tables (their shards are elsewhere)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "select sum(pg_catalog.pg_relation_size(pg_catalog.format('%%I.%%I', %s::text, t)))"
            " from pg_catalog.unnest(%s::text[]) t",
            [schema, sorted(KEPT)],
        ).fetchone()
    assert row is not None
    return int(row[0])


def insert(dsn: str, schema: str, rows: dict[str, list[str]]) -> None:
    with psycopg.connect(dsn) as conn:
        for table, values in rows.items():
            target = sql.Identifier(schema, table)
            for value in values:
                conn.execute(
                    sql.SQL(
                        "insert into {} select * from pg_catalog.json_populate_record(null::{}, %s)"
                    ).format(target, target),
                    [value],
                )


async def test_rows_written_before_the_distribution_are_kept(
    citus_dsn: str, schema: str, postgres_server_dsn: str
) -> None:
    """A schema at 0006 on Citus that already holds sessions (rows as the store's append
    writes them) keeps every row through 0007's distribution and its downgrade."""
    rows = await appended_rows(postgres_server_dsn)
    assert rows["a2_events"] and rows["a2_cursors"] and rows["a2_lane_events"]
    migrate.upgrade(citus_dsn, schema, revision="0006")
    insert(citus_dsn, schema, rows)
    before = contents(citus_dsn, schema)
    assert {table: len(found) for table, found in before.items()} == {
        table: len(values) for table, values in rows.items()
    }
    assert local_bytes(citus_dsn, schema) > 0
    migrate.upgrade(citus_dsn, schema, citus_shards=4)
    assert_distributed(citus_dsn, schema, shards=4)
    assert contents(citus_dsn, schema) == before
    assert local_bytes(citus_dsn, schema) == 0  # the coordinator's stale copy is gone
    assert inspect_layout(citus_dsn, schema).is_current
    migrate.downgrade(citus_dsn, schema, "0006")
    assert_local(citus_dsn, schema)
    assert contents(citus_dsn, schema) == before


def test_every_statement_parses_on_citus(citus_dsn: str, own_schema: str) -> None:
    """The Citus variants and the statements that call Citus's functions (which plain
    PostgreSQL cannot parse: ``queries.CITUS_ONLY``), on the coordinator."""
    migrate.upgrade(citus_dsn, own_schema)
    assert_every_statement_parses(citus_dsn, "citus", queries.names(), schema=own_schema)
