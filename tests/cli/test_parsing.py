"""Argument parsing, help text and usage errors: no database needed."""

from __future__ import annotations

import pytest

from a2pg.cli.common import EXIT_CODES_HELP
from a2pg.cli.main import build_parser

from .conftest import Cli, closed_port_dsn

SOMEWHERE = "postgresql://postgres@127.0.0.1:1/nothing"
"""A well-formed DSN: these tests fail before anything connects."""


def parse(*argv: str) -> object:
    return build_parser().parse_args(list(argv))


def test_connection_options_work_before_and_after_the_command() -> None:
    before = parse("--dsn", "postgresql://a/b", "--schema", "s", "--json", "sessions")
    after = parse("sessions", "--dsn", "postgresql://a/b", "--schema", "s", "--json")
    for args in (before, after):
        assert vars(args)["dsn"] == "postgresql://a/b"
        assert vars(args)["schema"] == "s"
        assert vars(args)["json"] is True


def test_options_given_only_before_the_command_survive_the_subparser() -> None:
    args = vars(parse("--dsn", "x", "cursors", "s1"))
    assert args["dsn"] == "x"
    assert args["json"] is False
    assert args["session"] == "s1"


def test_redrive_needs_exactly_one_action(cli: Cli) -> None:
    assert vars(parse("redrive", "s", "c", "3", "--skip"))["skip"] is True
    neither = cli("redrive", "s", "c", "3", "--dsn", SOMEWHERE)
    assert neither.code == 2
    assert "--retry" in neither.err
    both = cli("redrive", "s", "c", "3", "--retry", "--skip", "--dsn", SOMEWHERE)
    assert both.code == 2


def test_redrive_names_a_lane_or_the_event_cursor_not_both(cli: Cli) -> None:
    assert vars(parse("redrive", "s", "c", "3", "--skip"))["lane"] is None
    assert vars(parse("redrive", "s", "c", "3", "--skip"))["event_cursor"] is False
    assert vars(parse("redrive", "s", "c", "3", "--skip", "--lane", "x"))["lane"] == "x"
    assert vars(parse("redrive", "s", "c", "3", "--retry", "--event-cursor"))["event_cursor"]
    both = cli("redrive", "s", "c", "3", "--skip", "--lane", "x", "--event-cursor")
    assert both.code == 2
    assert "not allowed with" in both.err


@pytest.mark.parametrize("index", ["0", "-1", "x"])
def test_redrive_index_must_be_positive(cli: Cli, index: str) -> None:
    result = cli("redrive", "s", "c", index, "--skip", "--dsn", SOMEWHERE)
    assert result.code == 2
    assert "argument INDEX: must be a whole number of 1 or more" in result.err or (
        f"must be at least 1, got {index}" in result.err
    )
    assert "positive_int" not in result.err  # a function's name means nothing to a user


def test_tail_defaults_to_following_from_the_start() -> None:
    args = vars(parse("tail", "s1"))
    assert args["after"] == 0
    assert args["follow"] is True
    assert vars(parse("tail", "s1", "--no-follow", "--after", "5"))["follow"] is False


def test_worker_options_parse() -> None:
    args = vars(
        parse(
            "worker",
            "pkg.mod:app",
            "--concurrency",
            "8",
            "--ttl",
            "12.5",
            "--max-failures",
            "3",
            "--log-level",
            "debug",
        )
    )
    assert args["app"] == "pkg.mod:app"
    assert (args["concurrency"], args["ttl"], args["max_failures"]) == (8, 12.5, 3)
    assert args["log_level"] == "DEBUG"


@pytest.mark.parametrize(
    "bad",
    [
        ["--concurrency", "0"],
        ["--concurrency", "many"],
        ["--ttl", "0"],
        ["--ttl", "nan"],
        ["--ttl", "soon"],
        ["--wait", "-1"],
        ["--wait", "x"],
    ],
)
def test_worker_rejects_non_positive_numbers(cli: Cli, bad: list[str]) -> None:
    result = cli("worker", "m:app", *bad, "--dsn", closed_port_dsn())
    assert result.code == 2
    assert f"argument {bad[0]}: must be " in result.err
    assert "invalid" not in result.err


def test_help_lists_commands_and_exit_codes(cli: Cli) -> None:
    result = cli("--help")
    assert result.code == 0
    for command in ("migrate", "check", "worker", "demo", "bench", "sessions", "cursors"):
        assert command in result.out
    for command in ("dead-letters", "redrive", "tail"):
        assert command in result.out
    assert EXIT_CODES_HELP.splitlines()[0] in result.out
    assert "4  database not migrated" in result.out
    assert "A2PG_DSN" in result.out
    sub = cli("check", "--help")
    assert "5  not found" in sub.out


def test_no_command_is_a_usage_error(cli: Cli) -> None:
    result = cli()
    assert result.code == 2
    assert "COMMAND" in result.err


def test_no_dsn_is_a_usage_error(cli: Cli) -> None:
    result = cli("sessions")
    assert result.code == 2
    assert result.err.strip() == "a2pg: error: no database given: pass --dsn or set A2PG_DSN"


def test_dsn_comes_from_the_environment(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("A2PG_DSN", closed_port_dsn())
    result = cli("sessions")
    assert result.code == 3  # it used the DSN: the database is unreachable, not missing


def test_unknown_command_is_a_usage_error(cli: Cli) -> None:
    assert cli("frobnicate").code == 2


@pytest.mark.parametrize("command", [["sessions"], ["worker", "m:app"], ["tail", "s1"]])
def test_pooler_options_go_before_or_after_the_command(command: list[str]) -> None:
    from a2pg.cli.common import store_options

    def given(*argv: str) -> dict[str, object]:
        return store_options(build_parser().parse_args(list(argv)))

    options = ["--pooler", "transaction", "--no-prepare"]
    for argv in ([*options, *command], [*command, *options]):
        assert given(*argv) == {"pooler": "transaction", "prepare": False}
    assert given(*command, "--prepare") == {"prepare": True}
    assert given(*command) == {}  # the store reads A2PG_POOLER and A2PG_PREPARE itself


def test_an_unknown_pooler_is_a_usage_error(cli: Cli) -> None:
    result = cli("sessions", "--pooler", "pgbouncer", "--dsn", SOMEWHERE)
    assert result.code == 2
    assert "argument --pooler: invalid choice: 'pgbouncer'" in result.err


def test_worker_waits_five_minutes_by_default(cli: Cli) -> None:
    from a2pg.cli.startup import DEFAULT_WAIT

    assert vars(parse("worker", "m:app"))["wait"] == DEFAULT_WAIT == 300.0
    assert vars(parse("worker", "m:app", "--wait", "0"))["wait"] == 0.0
    shown = " ".join(cli("worker", "--help").out.split())
    assert "--wait SECONDS" in shown and "(default: 300.0)" in shown
