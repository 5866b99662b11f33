"""Clear one-line errors and documented exit codes: unreachable, unmigrated, unknown."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

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
