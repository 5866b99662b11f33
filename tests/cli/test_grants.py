"""``a2pg grants ROLE``: the runtime role's grants, printed (stable, quoted names, the
page's copy) and applied on real PostgreSQL (the same rights as the printed script).

That a role given exactly this output runs the whole store is
``tests/postgres/test_least_privilege.py``'s job: its ``runtime_grants`` is the printed script.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from a2pg.cli.main import main
from a2pg.postgres import grants
from a2pg.postgres.layout import TABLES, VERSION_TABLE
from a2pg.postgres.migrate import upgrade
from a2pg.testing import scratch_database, unique_name

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "operating" / "schemas-roles.md"

EXPECTED = """\
-- a2pg's runtime role 'app_runtime' on schema 'a2': run after every `a2pg migrate`
grant usage on schema "a2" to "app_runtime";
grant select, insert, update, delete on
    "a2"."a2_sessions",
    "a2"."a2_events",
    "a2"."a2_cursors",
    "a2"."a2_lane_events",
    "a2"."a2_snapshots",
    "a2"."a2_snapshot_history",
    "a2"."a2_snapshot_pins",
    "a2"."a2_presence",
    "a2"."a2_consumers",
    "a2"."a2_consumer_pauses",
    "a2"."a2_workers",
    "a2"."a2_attempts",
    "a2"."a2_audit"
    to "app_runtime";
grant select on "a2"."a2_meta" to "app_runtime";
"""
"""What ``a2pg grants app_runtime --schema a2`` prints: a change here is a change of what
every deployment grants, so it is spelled out."""


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), stdout=out)
    return code, out.getvalue()


def test_the_printed_grants_are_stable_and_need_no_database(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("A2PG_DSN", raising=False)
    assert run("grants", "app_runtime", "--schema", "a2") == (0, EXPECTED)
    monkeypatch.setenv("A2PG_SCHEMA", "a2")
    assert run("grants", "app_runtime") == (0, EXPECTED)


def test_every_table_but_the_meta_table_is_read_and_written() -> None:
    assert grants.READ_ONLY_TABLES == ("a2_meta",)
    assert set(grants.RUNTIME_TABLES) | {"a2_meta"} == set(TABLES)
    assert VERSION_TABLE not in EXPECTED


def test_the_schema_and_roles_page_shows_what_the_command_prints() -> None:
    page = PAGE.read_text()
    blocks = re.findall(r"```sql\n(.*?)```", page, re.DOTALL)
    assert EXPECTED in blocks
    assert "a2pg grants app_runtime --schema a2" in page


def test_names_are_quoted_identifiers_never_pasted() -> None:
    code, out = run("grants", 'ro"le; drop table x', "--schema", "My Schema")
    assert code == 0
    assert 'grant usage on schema "My Schema" to "ro""le; drop table x";' in out
    assert '"My Schema"."a2_events"' in out
    assert out.startswith("-- a2pg's runtime role 'ro\"le; drop table x' on schema 'My Schema'")


def test_json_lists_the_statements() -> None:
    code, out = run("grants", "app_runtime", "--schema", "a2", "--json")
    assert code == 0
    printed = json.loads(out)
    assert (printed["role"], printed["schema"], printed["applied"]) == ("app_runtime", "a2", False)
    script = "".join(f"{statement};\n" for statement in printed["statements"])
    assert script == EXPECTED.split("\n", 1)[1]  # the script without its comment line


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["grants", "public"], "role public is every role"),
        (["grants", "PUBLIC"], "role public is every role"),
        (["grants", ""], "role must be a non-empty name"),
        (["grants", "r" * 64], "longer than 63 bytes"),
        (["grants", "app", "--schema", "s" * 64], "longer than 63 bytes"),
        (["grants", "app", "--sqlite", "x.db"], "grants are PostgreSQL's"),
    ],
    ids=["public", "PUBLIC", "empty", "long-role", "long-schema", "sqlite"],
)
def test_a_bad_role_or_backend_is_a_usage_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(*argv)
    assert (code, out) == (2, "")
    assert message in capsys.readouterr().err


def test_apply_needs_a_database(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("A2PG_DSN", raising=False)
    assert run("grants", "app_runtime", "--apply") == (2, "")
    assert "no database given" in capsys.readouterr().err


# --- On PostgreSQL -----------------------------------------------------------------------

SCHEMA = "a2"
RIGHTS = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")


@pytest.fixture
def database(postgres_server_dsn: str) -> Iterator[str]:
    """A scratch database migrated into schema a2; the superuser's DSN."""
    with scratch_database(postgres_server_dsn, "a2pg_grants") as dsn:
        upgrade(dsn, schema=SCHEMA)
        yield dsn


@pytest.fixture
def make_role(postgres_server_dsn: str, database: str) -> Iterator[list[str]]:
    """Roles the test names in the returned list are created and dropped afterwards."""
    made: list[str] = []
    yield made
    with psycopg.connect(database, autocommit=True) as conn:
        for role in made:
            conn.execute(sql.SQL("drop owned by {}").format(sql.Identifier(role)))
    with psycopg.connect(postgres_server_dsn, autocommit=True) as conn:
        for role in made:
            conn.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(role)))


def create_role(server_dsn: str, made: list[str], name: str) -> str:
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("create role {}").format(sql.Identifier(name)))
    made.append(name)
    return name


def rights(dsn: str, role: str) -> dict[str, object]:
    """What ``role`` may do in schema a2: on the schema, and on each of its tables."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        found: dict[str, object] = {
            "schema": conn.execute(
                "select has_schema_privilege(%s, %s, 'USAGE'),"
                " has_schema_privilege(%s, %s, 'CREATE')",
                (role, SCHEMA, role, SCHEMA),
            ).fetchone()
        }
        for (table,) in conn.execute(
            "select tablename from pg_tables where schemaname = %s", (SCHEMA,)
        ).fetchall():
            found[table] = {
                right
                for right in RIGHTS
                if conn.execute(
                    "select has_table_privilege(%s, format('%%I.%%I', %s::text, %s::text), %s)",
                    (role, SCHEMA, table, right),
                ).fetchone()
                == (True,)
            }
    return found


@pytest.mark.postgres
def test_apply_grants_what_the_printed_script_grants(
    postgres_server_dsn: str, database: str, make_role: list[str]
) -> None:
    printed_role = create_role(postgres_server_dsn, make_role, unique_name("a2pg_printed"))
    applied_role = create_role(postgres_server_dsn, make_role, unique_name("a2pg_applied"))
    code, script = run("grants", printed_role, "--schema", SCHEMA)
    assert code == 0
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL(script))
    for _ in range(2):  # idempotent: a redeploy grants again
        code, out = run("grants", applied_role, "--schema", SCHEMA, "--apply", "--dsn", database)
        assert (code, out) == (
            0,
            f"granted {applied_role!r} the runtime rights on schema {SCHEMA!r} (3 statements)\n",
        )
    expected: dict[str, object] = {
        name: {"SELECT", "INSERT", "UPDATE", "DELETE"} for name in TABLES
    }
    expected |= {"schema": (True, False), "a2_meta": {"SELECT"}, VERSION_TABLE: set()}
    assert rights(database, printed_role) == expected
    assert rights(database, applied_role) == expected


@pytest.mark.postgres
def test_apply_takes_any_name_postgres_accepts(
    postgres_server_dsn: str, database: str, make_role: list[str]
) -> None:
    odd = create_role(postgres_server_dsn, make_role, f'{unique_name("Odd")} "role"; --')
    code, out = run("grants", odd, "--schema", SCHEMA, "--apply", "--dsn", database, "--json")
    assert code == 0
    assert json.loads(out)["applied"] is True
    assert rights(database, odd)["a2_events"] == {"SELECT", "INSERT", "UPDATE", "DELETE"}


@pytest.mark.postgres
def test_apply_on_an_unmigrated_schema_exits_4_naming_migrate(
    database: str,
    make_role: list[str],
    postgres_server_dsn: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    role = create_role(postgres_server_dsn, make_role, unique_name("a2pg_early"))
    assert run("grants", role, "--schema", "empty", "--apply", "--dsn", database) == (4, "")
    err = capsys.readouterr().err
    assert (
        "schema 'empty' has no a2pg tables; run `a2pg migrate` (schema 'empty'), then grant" in err
    )


@pytest.mark.postgres
def test_apply_by_a_role_that_does_not_own_the_tables_is_refused(
    database: str,
    make_role: list[str],
    postgres_server_dsn: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A role without the rights to give gives none: PostgreSQL only warns ("no
    privileges were granted"), which is an error here, exit 1, and nothing is granted."""
    role = create_role(postgres_server_dsn, make_role, unique_name("a2pg_target"))
    stranger = create_role(postgres_server_dsn, make_role, unique_name("a2pg_stranger"))
    with psycopg.connect(postgres_server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("alter role {} login password 'pw'").format(sql.Identifier(stranger)))
    with psycopg.connect(database, autocommit=True) as conn:
        # It may read every table (so the layout check passes), but grant nothing.
        for grant in (
            "grant usage on schema a2 to {}",
            "grant select on all tables in schema a2 to {}",
        ):
            conn.execute(sql.SQL(grant).format(sql.Identifier(stranger)))
    as_stranger = make_conninfo(database, user=stranger, password="pw")
    code, _ = run("grants", role, "--schema", SCHEMA, "--apply", "--dsn", as_stranger)
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("a2pg: error: database error: no privileges were granted for"), err
    assert "the --dsn user must own the schema's tables" in err
    assert rights(database, role)["a2_events"] == set()
