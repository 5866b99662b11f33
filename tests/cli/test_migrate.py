"""``a2pg migrate`` and ``a2pg check``: idempotent migration, current layout, other schemas."""

from __future__ import annotations

import json
from collections.abc import Iterator

import psycopg
import pytest

from a2pg.postgres.layout import HEAD_REVISION
from a2pg.testing import create_database, drop_database, unique_name

from .conftest import Cli, run_script


@pytest.fixture
def empty_dsn(postgres_server_dsn: str) -> Iterator[str]:
    name = unique_name("a2pg_cli")
    yield create_database(postgres_server_dsn, name)
    drop_database(postgres_server_dsn, name)


def test_migrate_then_check(cli: Cli, empty_dsn: str) -> None:
    first = cli("migrate", "--dsn", empty_dsn)
    assert first.code == 0, first
    assert first.out.startswith("migrated: schema 'public' has the a2pg layout cursors-1")
    again = cli("migrate", "--dsn", empty_dsn)
    assert again.code == 0
    assert again.out.startswith("already current:")
    check = cli("check", "--dsn", empty_dsn)
    assert check.code == 0
    assert check.out == (
        f"ok: schema 'public' has the a2pg layout cursors-1 at revision {HEAD_REVISION} (current)\n"
    )


def test_migrate_json_reports_before_and_after(cli: Cli, empty_dsn: str) -> None:
    result = cli("migrate", "--json", "--dsn", empty_dsn)
    data = json.loads(result.out)
    assert data["before"]["state"] == "empty"
    assert data["after"]["state"] == "current"
    assert data["after"]["revision"] == data["after"]["expected"]


def test_migrate_and_check_another_schema_from_the_script(empty_dsn: str) -> None:
    env = {"A2PG_DSN": empty_dsn, "A2PG_SCHEMA": "a2"}
    assert run_script("check", env=env).code == 4
    migrated = run_script("migrate", env=env)
    assert migrated.code == 0, migrated
    assert "schema 'a2'" in migrated.out
    assert run_script("check", env=env).code == 0
    assert run_script("check", "--schema", "public", env=env).code == 4


def test_migrate_sql_prints_the_script_for_a_dba_without_a_database(empty_dsn: str) -> None:
    printed = run_script("migrate", "--sql", env={"A2PG_SCHEMA": "dba"})
    assert printed.code == 0, printed
    assert printed.err == ""
    assert printed.out.startswith("BEGIN;\n")
    assert "hashtextextended('a2pg.migrate:dba', 0)" in printed.out
    assert run_script("check", "--dsn", empty_dsn, "--schema", "dba").code == 4  # nothing ran
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(printed.out)  # as psql -f would
    check = run_script("check", "--dsn", empty_dsn, "--schema", "dba")
    assert check.code == 0, check
    again = run_script("migrate", "--dsn", empty_dsn, "--schema", "dba")
    assert again.out.startswith("already current:")


def test_migrate_sql_has_no_json_form(cli: Cli) -> None:
    result = cli("migrate", "--sql", "--json")
    assert result.code == 2
    assert result.out == ""
    assert result.err == "a2pg: error: --sql prints SQL, which has no --json form\n"
