"""``a2pg cancel`` (one live head, skipped or dead-lettered) and ``a2pg backfill``."""

from __future__ import annotations

import json

import pytest

from a2pg.models import Consumer, LogSpec, NewEvent, Target
from a2pg.postgres import PostgresStore

from .conftest import Cli
from .stores import with_store


@pytest.fixture
def dsn(postgres_dsn: str) -> str:
    """s: two events on consumer c's lane l; b1..b3: one user.message each."""

    async def populate(store: PostgresStore) -> None:
        lane = [Target("c", "l")]
        await store.append("s", [NewEvent("a", targets=lane), NewEvent("b", targets=lane)])
        for session in ("b1", "b2", "b3"):
            await store.append(session, [NewEvent("user.message")])

    with_store(postgres_dsn, populate)
    return postgres_dsn


def heads(dsn: str, session: str) -> list[tuple[str, int | None, bool]]:
    cursors = with_store(dsn, lambda store: store.cursors(session))
    return [(c.consumer, c.head, c.dispatch.failed_at is not None) for c in cursors]


def test_cancel_skip_moves_the_lane_on(cli: Cli, dsn: str) -> None:
    result = cli("cancel", "s", "c", "1", "--skip", "--dsn", dsn)
    assert result.code == 0, result
    assert result.out == "skipped: s c@1\n"
    assert heads(dsn, "s") == [("c", 2, False)]


def test_cancel_dead_letter_json(cli: Cli, dsn: str) -> None:
    result = cli("cancel", "s", "c", "1", "--dead-letter", "--lane", "l", "--json", "--dsn", dsn)
    assert result.code == 0, result
    assert json.loads(result.out) == {
        "session_id": "s",
        "consumer": "c",
        "index": 1,
        "action": "dead_letter",
        "cancelled": True,
        "held_until": None,
        "has_pending": False,
    }
    assert heads(dsn, "s") == [("c", 1, True)]


def test_cancel_of_no_live_head_exits_5_and_changes_nothing(cli: Cli, dsn: str) -> None:
    result = cli("cancel", "s", "c", "2", "--skip", "--dsn", dsn)
    assert result.code == 5, result
    assert "no live head of consumer 'c' at index 2" in result.err
    assert heads(dsn, "s") == [("c", 1, False)]


def test_cancel_needs_an_action(cli: Cli, dsn: str) -> None:
    result = cli("cancel", "s", "c", "1", "--dsn", dsn)
    assert result.code == 2
    assert heads(dsn, "s") == [("c", 1, False)]


def test_backfill_runs_to_its_end_and_resumes_nothing_twice(cli: Cli, dsn: str) -> None:
    audit = Consumer("audit", LogSpec(types=("user.message",), backfill=True))
    with_store(dsn, lambda store: store.register_consumers([audit]))
    result = cli("backfill", "audit", "--batch", "2", "--dsn", dsn)
    assert result.code == 0, result
    assert result.out.splitlines() == [
        "backfill audit: running, 2 sessions, last b2",
        "backfill audit: running, 4 sessions, last s",
        "backfill audit: done, 4 sessions, last s",  # a full batch: one more call to be sure
    ]
    assert heads(dsn, "b3") == [("audit", 1, False)]
    again = cli("backfill", "audit", "--json", "--dsn", dsn)
    assert json.loads(again.out)["sessions"] == 4


def test_backfill_of_a_consumer_without_one_exits_5(cli: Cli, dsn: str) -> None:
    result = cli("backfill", "nobody", "--dsn", dsn)
    assert result.code == 5
    assert "has no backfill" in result.err


def test_consumers_register_with_backfill_reaches_existing_sessions(cli: Cli, dsn: str) -> None:
    result = cli(
        "consumers", "--register", "audit", "--types", "user.message", "--backfill", "--dsn", dsn
    )
    assert result.code == 0, result
    lines = result.out.splitlines()
    assert lines[0] == "registered audit (lane log, with backfill)"
    assert lines[-1] == "backfill audit: done, 4 sessions, last s"
    for session in ("b1", "b2", "b3"):
        assert heads(dsn, session) == [("audit", 1, False)]
    listed = json.loads(cli("consumers", "--json", "--dsn", dsn).out)
    [audit] = [row for row in listed if row["consumer"] == "audit"]
    assert audit["registered"] is True


def test_consumers_register_without_backfill_waits_for_new_events(cli: Cli, dsn: str) -> None:
    result = cli("consumers", "--register", "feed", "--json", "--dsn", dsn)
    assert result.code == 0, result
    assert json.loads(result.out) == {"registered": "feed", "backfill": False}
    assert heads(dsn, "b1") == []


@pytest.mark.parametrize(
    "argv",
    [
        ("--register", ""),
        ("--register", "a", "--types", ""),
        ("--register", "a", "--lane", ""),
        ("--types", "x"),
        ("--backfill",),
        ("--register", "a", "--unregister", "b"),
    ],
)
def test_bad_registrations_exit_2_and_register_nothing(
    cli: Cli, dsn: str, argv: tuple[str, ...]
) -> None:
    result = cli("consumers", *argv, "--dsn", dsn)
    assert result.code == 2, result
    assert with_store(dsn, lambda store: store.registered_consumers()) == []
