"""``a2pg attempts`` (a head's attempt history) and ``a2pg prune-attempts``."""

from __future__ import annotations

import json

import pytest

from a2pg.models import NewEvent, Target
from a2pg.postgres import PostgresStore

from .conftest import Cli
from .stores import with_store


@pytest.fixture
def dsn(postgres_dsn: str) -> str:
    """s: consumer c's head at 1 failed once (with a two-line error), then completed."""

    async def populate(store: PostgresStore) -> None:
        await store.append("s", [NewEvent("x", targets=[Target("c")])])
        [head] = await store.claim_any(holder="w1", ttl=30)
        await store.fail_attempt(
            "s",
            consumer="c",
            lane=None,
            index=1,
            attempt=head.attempt,
            error="ValueError: bad\nTraceback line",
            max_failures=5,
        )
        [again] = await store.claim_any(holder="w2", ttl=30)
        await store.complete_attempt("s", consumer="c", lane=None, index=1, attempt=again.attempt)

    with_store(postgres_dsn, populate)
    return postgres_dsn


def test_attempts_lists_each_attempt_and_its_error(cli: Cli, dsn: str) -> None:
    result = cli("attempts", "s", "c", "1", "--dsn", dsn)
    assert result.code == 0, result
    lines = result.out.splitlines()
    assert lines[0].startswith("attempt 1: failed after ") and lines[0].endswith(" by w1")
    assert "s (waited " in lines[0]
    assert lines[1] == "    ValueError: bad"
    assert lines[2].startswith("attempt 2: completed after ") and lines[2].endswith(" by w2")
    whole = cli("attempts", "s", "c", "1", "--traceback", "--dsn", dsn)
    assert "    Traceback line" in whole.out.splitlines()


def test_attempts_json_and_an_unknown_session(cli: Cli, dsn: str) -> None:
    result = cli("attempts", "s", "c", "1", "--json", "--event-cursor", "--dsn", dsn)
    rows = json.loads(result.out)
    assert [(r["attempt"], r["outcome"], r["holder"]) for r in rows] == [
        (1, "failed", "w1"),
        (2, "completed", "w2"),
    ]
    assert all(r["duration"] >= 0 and r["wait"] >= 0 and r["ready_at"] for r in rows)
    assert cli("attempts", "nowhere", "c", "1", "--dsn", dsn).code == 5


def test_prune_attempts_deletes_what_is_old_enough(cli: Cli, dsn: str) -> None:
    kept = cli("prune-attempts", "--older-than", "1h", "--dsn", dsn)
    assert kept.code == 0 and kept.out.startswith("pruned 0 attempts"), kept
    gone = cli("prune-attempts", "--older-than", "0.001s", "--json", "--dsn", dsn)
    assert json.loads(gone.out)["deleted"] == 2
    assert json.loads(cli("attempts", "s", "c", "1", "--json", "--dsn", dsn).out) == []
    assert cli("prune-attempts", "--older-than", "soon", "--dsn", dsn).code == 2
