"""Bulk ``a2pg redrive``: by session, consumer or error, or ``--all``; ``--dry-run``; parsing."""

from __future__ import annotations

import json

import pytest

from a2pg.models import Claimed, DeadLetterQuery, NewEvent, Target
from a2pg.postgres import PostgresStore

from .conftest import Cli
from .stores import with_store

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


async def dead_letter(store: PostgresStore, session: str, target: Target, error: str) -> None:
    """Appends an event for ``target`` and dead-letters its head with ``error``."""
    await store.append(session, [NewEvent("job", error, targets=(target,))])
    claimed = await store.claim_available(session, holder="t", ttl=30)
    assert isinstance(claimed, Claimed)
    for head in claimed.heads:
        if (head.consumer, head.lane) == (target.consumer, target.lane):
            failed = await store.fail_attempt(
                session,
                consumer=head.consumer,
                lane=head.lane,
                index=head.index,
                attempt=head.attempt,
                error=f"Traceback (most recent call last):\n  File x\n{error}\n",
                max_failures=1,
            )
            assert failed.outcome == "dead_lettered"


REPLY = Target("reply", "turns")
MAILER = Target("mailer")
DEAD = [
    ("s1", REPLY, "RuntimeError: model crashed"),
    ("s1", MAILER, "TimeoutError: SMTP timeout"),
    ("s10", REPLY, "RuntimeError: Model CRASHED again"),
    ("s2", MAILER, "OSError: smtp TIMEOUT"),
]
"""Four dead letters: s10 shares s1's prefix; errors differ in case only."""


@pytest.fixture
def dsn(postgres_dsn: str) -> str:
    async def populate(store: PostgresStore) -> None:
        for session, target, error in DEAD:
            await dead_letter(store, session, target, error)
        await store.append("s3", [NewEvent("job", None, targets=(MAILER,))])  # pending

    with_store(postgres_dsn, populate)
    return postgres_dsn


def dead(dsn: str) -> list[tuple[str, str]]:
    """(session, consumer) of every dead letter left."""
    heads = with_store(dsn, lambda store: store.find_dead_letters(DeadLetterQuery(limit=1000)))
    return [(h.session_id, h.consumer) for h in heads]


ALL = [("s1", "mailer"), ("s1", "reply"), ("s10", "reply"), ("s2", "mailer")]


def test_dry_run_lists_and_changes_nothing(cli: Cli, dsn: str) -> None:
    result = cli("redrive", "--retry", "--all", "--dry-run", "--dsn", dsn)
    assert result.code == 0, result
    lines = result.out.splitlines()
    assert lines[0].split() == [
        "SESSION",
        "ID",
        "CONSUMER",
        "LANE",
        "INDEX",
        "TYPE",
        "FAILURES",
        "LAST",
        "ERROR",
        "OUTCOME",
    ]
    assert [tuple(line.split()[:2]) for line in lines[2:-1]] == ALL
    assert lines[3].split()[:6] == ["s1", "reply", "turns", "1", "job", "1"]
    assert all(line.endswith("would redrive") for line in lines[2:-1])
    assert "RuntimeError: model crashed" in result.out
    assert lines[-1] == "would retry 4 dead-lettered heads (dry run: nothing changed)"
    assert dead(dsn) == ALL


FILTERS: list[tuple[list[str], list[tuple[str, str]]]] = [
    (["--session", "s1"], [("s1", "mailer"), ("s1", "reply")]),
    (["--consumer", "mailer"], [("s1", "mailer"), ("s2", "mailer")]),
    (["--error", "smtp timeout"], [("s1", "mailer"), ("s2", "mailer")]),
    (["--error", "CRASHED", "--consumer", "reply"], [("s1", "reply"), ("s10", "reply")]),
    (["--session", "s1", "--error", "crash"], [("s1", "reply")]),
    (["--all"], ALL),
    (["--consumer", "nobody"], []),
]
"""Filters and the (session, consumer) heads they pick."""


@pytest.mark.parametrize(("filters", "picked"), FILTERS, ids=[" ".join(f) for f, _ in FILTERS])
def test_each_filter_redrives_what_it_picks(
    cli: Cli, dsn: str, filters: list[str], picked: list[tuple[str, str]]
) -> None:
    dry = cli("redrive", "--skip", *filters, "--dry-run", "--json", "--dsn", dsn)
    assert dry.code == 0, dry
    listed = json.loads(dry.out)
    assert [(h["session_id"], h["consumer"]) for h in listed["heads"]] == picked
    assert (listed["matched"], listed["redriven"], listed["dry_run"]) == (len(picked), 0, True)
    result = cli("redrive", "--skip", *filters, "--dsn", dsn)
    assert result.code == 0, result
    assert dead(dsn) == [head for head in ALL if head not in picked]
    if picked:
        assert result.out.splitlines()[-1] == (
            f"redriven (skip): {len(picked)} of {len(picked)} dead-lettered heads"
        )
    else:
        assert result.out == "no dead letters match\n"


def test_json_output(cli: Cli, dsn: str) -> None:
    result = cli("redrive", "--retry", "--session", "s2", "--json", "--dsn", dsn)
    assert result.code == 0, result
    data = json.loads(result.out)
    assert data == {
        "action": "retry",
        "dry_run": False,
        "filters": {"session": "s2", "consumer": None, "error": None},
        "heads": [
            {
                "session_id": "s2",
                "consumer": "mailer",
                "lane": None,
                "index": 1,
                "type": "job",
                "failures": 1,
                "last_error": "OSError: smtp TIMEOUT",
                "outcome": "redriven",
                "has_pending": True,
            }
        ],
        "matched": 1,
        "redriven": 1,
    }


def test_pages_through_every_match(cli: Cli, dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from a2pg.cli.operate import redrive

    monkeypatch.setattr(redrive, "PAGE", 1)
    result = cli("redrive", "--skip", "--all", "--json", "--dsn", dsn)
    assert json.loads(result.out)["redriven"] == 4
    assert dead(dsn) == []


def test_the_single_head_form_still_works(cli: Cli, dsn: str) -> None:
    result = cli("redrive", "s10", "reply", "1", "--retry", "--lane", "turns", "--dsn", dsn)
    assert result.code == 0, result
    assert result.out == "redriven (retry): s10 reply@1 on lane 'turns'; pending work: yes\n"
    assert ("s10", "reply") not in dead(dsn)


def test_an_unknown_session_exits_5(cli: Cli, dsn: str) -> None:
    result = cli("redrive", "--retry", "--session", "nope", "--dsn", dsn)
    assert result.code == 5
    assert result.err == "a2pg: error: unknown session 'nope'\n"


@pytest.mark.parametrize("filters", [["--error", ""], ["--consumer", ""], ["--session", ""]])
def test_an_empty_filter_exits_2_and_redrives_nothing(
    cli: Cli, dsn: str, filters: list[str]
) -> None:
    result = cli("redrive", "--retry", *filters, "--dsn", dsn)
    assert result.code == 2, result
    assert result.err.startswith("a2pg: error: ")
    assert result.err.count("\n") == 1
    assert dead(dsn) == ALL
