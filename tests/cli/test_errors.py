"""Clear one-line errors and documented exit codes: unreachable, unmigrated, unknown."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from a2pg import StoreUnavailable, backends
from a2pg.cli.common import EXIT_UNREACHABLE, translate
from a2pg.testing import create_database, drop_database, unique_name

from .conftest import Cli, closed_port_dsn, run_script

INSPECTIONS = [
    ["sessions"],
    ["cursors", "s1"],
    ["dead-letters"],
    ["dead-letters", "s1"],
    ["redrive", "s1", "c", "1", "--skip"],
    ["tail", "s1", "--no-follow"],
    ["redrive", "--retry", "--all"],
    ["clear", "s1"],
    ["clear", "--older-than", "1d"],
    ["reclaim", "s1"],
    ["reclaim", "--all"],
    ["consumers"],
    ["consumers", "--unregister", "audit"],
    ["workers"],
]
WORKER = ["worker", "tests.cli.sample_app:app", "--wait", "0"]
"""``--wait 0``: fail at once rather than wait for the database (tests/cli/test_wait.py)."""


@pytest.fixture
def empty_dsn(postgres_server_dsn: str) -> Iterator[str]:
    """A database with no a2pg tables."""
    name = unique_name("a2pg_cli")
    yield create_database(postgres_server_dsn, name)
    drop_database(postgres_server_dsn, name)


@pytest.mark.parametrize("argv", [["check"], ["migrate"], *INSPECTIONS, WORKER], ids=" ".join)
def test_unreachable_database_exits_3(cli: Cli, argv: list[str]) -> None:
    dsn = closed_port_dsn()
    result = cli(*argv, "--dsn", dsn)
    assert result.code == 3
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("a2pg: error: cannot reach the database at postgres@127.0.0.1:")
    assert "Connection refused" in lines[0]


@pytest.mark.parametrize("argv", [["check"], ["migrate"], *INSPECTIONS, WORKER], ids=" ".join)
def test_a_sqlite_file_that_cannot_be_opened_exits_3_as_an_unreachable_server_does(
    cli: Cli, tmp_path: Path, argv: list[str]
) -> None:
    result = cli(*argv, "--sqlite", str(tmp_path))  # a folder: no database opens there
    assert result.code == 3
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0] == "a2pg: error: cannot open the SQLite database: unable to open database file"


def test_a_sqlite_folder_that_cannot_be_made_exits_3(cli: Cli, tmp_path: Path) -> None:
    blocker = tmp_path / "notes"
    blocker.write_text("a file where the folder would go")
    result = cli("migrate", "--sqlite", str(blocker / "a2.db"))
    assert result.code == 3
    assert result.err.startswith(f"a2pg: error: cannot create the SQLite database {blocker}")
    assert "Traceback" not in result.err


async def _refused() -> BaseException:
    try:
        await psycopg.AsyncConnection.connect(closed_port_dsn(), connect_timeout=2)
    except psycopg.OperationalError as exc:
        return exc
    raise AssertionError("a closed port accepted a connection")


def _cannot_open(folder: Path) -> BaseException:
    try:
        sqlite3.connect(f"{folder.as_uri()}?mode=rw", uri=True)
    except sqlite3.OperationalError as exc:
        return exc
    raise AssertionError("a folder opened as a database")


def _locked(path: Path) -> BaseException:
    """A write that waited for another connection's lock past its busy timeout."""
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("create table t (x)")
    holder.execute("begin immediate")
    waiter = sqlite3.connect(path, isolation_level=None, timeout=0.01)
    try:
        waiter.execute("insert into t values (1)")
    except sqlite3.OperationalError as exc:
        return exc
    finally:
        waiter.close()
        holder.close()
    raise AssertionError("a write went through another's lock")


async def test_each_backend_reads_its_outage_as_the_same_error_and_exit_code(
    tmp_path: Path,
) -> None:
    """The drivers' own errors, as each raises them, read as one A2Error code and one
    exit code: a PostgreSQL server refusing, a SQLite file that cannot be opened or
    stays locked."""
    outages = [await _refused(), _cannot_open(tmp_path), _locked(tmp_path / "a2.db")]
    for exc in outages:
        error = backends.classify(exc)
        assert isinstance(error, StoreUnavailable), exc
        assert error.code == "STORE_UNAVAILABLE"
        cli_error = translate(exc, None)
        assert cli_error is not None and cli_error.exit_code == EXIT_UNREACHABLE
    assert backends.classify(sqlite3.IntegrityError("UNIQUE constraint failed")) is None
    assert backends.classify(psycopg.errors.UniqueViolation("duplicate key")) is None
    assert backends.classify(RuntimeError("a bug")) is None


def test_unreachable_database_from_the_script_has_no_traceback() -> None:
    result = run_script("sessions", env={"A2PG_DSN": closed_port_dsn()})
    assert result.code == 3
    assert "Traceback" not in result.err
    assert result.err.startswith("a2pg: error: cannot reach the database")


def test_check_on_an_unmigrated_database_exits_4_naming_the_fix(cli: Cli, empty_dsn: str) -> None:
    result = cli("check", "--dsn", empty_dsn)
    assert result.code == 4
    assert result.out == ""
    assert result.err.count("\n") == 1
    assert "has no a2pg tables" in result.err
    assert "`a2pg migrate`" in result.err


def test_check_json_reports_the_state_and_still_exits_4(cli: Cli, empty_dsn: str) -> None:
    import json

    result = cli("check", "--json", "--dsn", empty_dsn)
    assert result.code == 4
    data = json.loads(result.out)
    assert data["state"] == "empty"
    assert data["current"] is False
    assert "a2pg migrate" in data["fix"]


@pytest.mark.parametrize("argv", [*INSPECTIONS, WORKER], ids=" ".join)
def test_inspecting_an_unmigrated_database_exits_4(
    cli: Cli, empty_dsn: str, argv: list[str]
) -> None:
    result = cli(*argv, "--dsn", empty_dsn)
    assert result.code == 4, result
    assert result.err.startswith("a2pg: error: database not migrated:")
    assert "a2pg migrate" in result.err
    assert result.err.count("\n") == 1


def test_a_schema_from_the_environment_is_used(
    cli: Cli, postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("A2PG_SCHEMA", "elsewhere")
    result = cli("check", "--dsn", postgres_dsn)
    assert result.code == 4  # public is migrated, "elsewhere" is not
    assert "'elsewhere'" in result.err
