"""The layout check: a store refuses every schema but the current layout, naming `a2pg migrate`."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg.pq import TransactionStatus

from a2pg import A2Error, StoreNotConfigured
from a2pg.postgres.layout import (
    HEAD_REVISION,
    LAYOUT,
    LayoutState,
    LayoutStatus,
    ensure_layout,
    inspect_layout,
)
from a2pg.postgres.migrate import upgrade
from a2pg.testing import DatabaseTemplate, scratch_database

pytestmark = pytest.mark.postgres

PRE_CONSUMER_EVENTS = """
create table a2_events (
    session_id text not null, idx integer not null, event_type text not null,
    payload text not null, event_id text not null, created_at integer not null,
    cause text, lane text, lane_ready integer not null default 0, processed_at integer,
    primary key (session_id, idx)
)
"""


@pytest.fixture
def db(postgres_server_dsn: str) -> Iterator[str]:
    with scratch_database(postgres_server_dsn, "a2pg_mig") as dsn:
        yield dsn


def run(dsn: str, *statements: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


async def refusal(dsn: str, schema: str = "public") -> StoreNotConfigured:
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        with pytest.raises(StoreNotConfigured) as caught:
            await ensure_layout(conn, schema)
    assert caught.value.code == "STORE_NOT_CONFIGURED"
    assert "a2pg migrate" in caught.value.message
    return caught.value


async def test_empty_database_is_refused(db: str) -> None:
    error = await refusal(db)
    assert "no a2pg tables" in error.message
    assert inspect_layout(db) == LayoutStatus("empty", "public", None)


async def test_pre_consumer_layout_is_refused(db: str) -> None:
    run(db, PRE_CONSUMER_EVENTS)
    error = await refusal(db)
    assert "pre-consumer" in error.message
    assert inspect_layout(db).state == "pre-consumer"


async def test_older_revision_is_refused(db: str) -> None:
    upgrade(db, revision="0001")
    error = await refusal(db)
    assert "0001" in error.message and HEAD_REVISION in error.message
    assert inspect_layout(db) == LayoutStatus("older", "public", "0001")


async def test_newer_revision_is_refused(db: str) -> None:
    upgrade(db)
    run(
        db,
        "update a2_meta set value = '9999' where key = 'revision'",
        "update a2_alembic_version set version_num = '9999'",
    )
    error = await refusal(db)
    assert "9999" in error.message and "newer" in error.message
    assert inspect_layout(db) == LayoutStatus("newer", "public", "9999")


async def test_tables_without_a_layout_record_are_refused(db: str) -> None:
    upgrade(db)
    run(db, "delete from a2_meta where key = 'layout'")
    assert "no cursors-1 layout record" in (await refusal(db)).message
    run(db, "drop table a2_meta")
    await refusal(db)
    assert inspect_layout(db).state == "unknown"


async def test_current_layout_passes(db: str) -> None:
    upgrade(db)
    async with await psycopg.AsyncConnection.connect(db) as conn:
        status = await ensure_layout(conn)
        assert conn.info.transaction_status == TransactionStatus.IDLE
    assert status == LayoutStatus("current", "public", HEAD_REVISION)
    assert status.is_current
    assert f"layout {LAYOUT} at revision {HEAD_REVISION} (current)" in status.describe()


async def test_the_check_looks_only_at_its_schema(db: str) -> None:
    upgrade(db, schema="a2 tenant")
    await refusal(db, "public")
    async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
        assert (await ensure_layout(conn, "a2 tenant")).is_current


def test_inspect_on_a_connection_leaves_its_transaction_as_it_was(db: str) -> None:
    upgrade(db)
    with psycopg.connect(db) as conn:
        assert inspect_layout(conn).is_current
        idle = conn.info.transaction_status
        conn.execute("select 1")
        assert inspect_layout(conn).is_current
        in_transaction = conn.info.transaction_status
    assert (idle, in_transaction) == (TransactionStatus.IDLE, TransactionStatus.INTRANS)


def test_every_state_describes_itself_on_one_line_and_names_the_fix() -> None:
    states: tuple[LayoutState, ...] = ("empty", "older", "newer", "pre-consumer", "unknown")
    for state in states:
        status = LayoutStatus(state, "s", "0001")
        error = status.error()
        assert isinstance(error, StoreNotConfigured)
        assert "\n" not in error.message and "a2pg migrate" in error.message
        assert str(status) == status.describe()


def test_migrate_refuses_a_pre_consumer_schema_and_leaves_it_alone(db: str) -> None:
    run(db, PRE_CONSUMER_EVENTS)
    with pytest.raises(StoreNotConfigured, match="pre-consumer"):
        upgrade(db)
    with psycopg.connect(db) as conn:
        tables = conn.execute("select tablename from pg_tables where schemaname = 'public'")
        assert [name for (name,) in tables] == ["a2_events"]


def test_migrate_refuses_a_newer_schema(db: str) -> None:
    upgrade(db)
    run(db, "update a2_meta set value = '9999' where key = 'revision'")
    with pytest.raises(StoreNotConfigured, match="9999"):
        upgrade(db)


def test_bad_schema_names_are_invalid_arguments(db: str) -> None:
    for schema in ("", "x" * 64, "a\x00b"):
        with pytest.raises(A2Error) as caught:
            inspect_layout(db, schema)
        assert caught.value.code == "INVALID_ARGUMENT"


def test_the_plugin_gives_each_test_a_current_database(
    postgres_dsn: str, postgres_template: DatabaseTemplate
) -> None:
    assert inspect_layout(postgres_dsn).is_current
    assert postgres_template.name not in postgres_dsn
