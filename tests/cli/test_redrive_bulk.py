"""Bulk ``a2pg redrive``: by session, consumer or error, or ``--all``; ``--dry-run``; parsing."""

from __future__ import annotations

import pytest

from .conftest import Cli

SOMEWHERE = "postgresql://postgres@127.0.0.1:1/nothing"
"""A well-formed DSN nothing listens on: usage errors come before anything connects."""

NO_FILTER = (
    "redrive needs SESSION CONSUMER INDEX, or --session, --consumer or --error, "
    "or --all to redrive every dead letter"
)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--retry"], NO_FILTER),
        (["--skip", "--dry-run"], NO_FILTER),
        (["s1", "--retry"], "redrive needs SESSION CONSUMER INDEX, or --session"),
        (["s1", "reply", "--retry"], "redrive needs SESSION CONSUMER INDEX, or --session"),
        (
            ["s1", "reply", "1", "--retry", "--consumer", "reply"],
            "--consumer: not with SESSION CONSUMER INDEX (one head)",
        ),
        (
            ["s1", "reply", "1", "--skip", "--all", "--dry-run"],
            "--all, --dry-run: not with SESSION CONSUMER INDEX (one head)",
        ),
        (["--retry", "--all", "--lane", "turns"], "--lane and --event-cursor pick one head"),
        (["--retry", "--session", "s1", "--event-cursor"], "--lane and --event-cursor pick one"),
    ],
    ids=" ".join,
)
def test_redrive_usage_errors_exit_2(cli: Cli, argv: list[str], message: str) -> None:
    result = cli("redrive", *argv, "--dsn", SOMEWHERE)
    assert result.code == 2
    assert result.err.startswith(f"a2pg: error: {message}"), result.err
    assert result.err.count("\n") == 1
    assert result.out == ""


def test_redrive_still_needs_an_action(cli: Cli) -> None:
    result = cli("redrive", "--all", "--dsn", SOMEWHERE)
    assert result.code == 2
    assert "one of the arguments --retry --skip is required" in result.err
