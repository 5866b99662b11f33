"""MemoryStore against PostgreSQL and against SQLite, step by step: random sequences of
every Store operation.

``A2PG_MODEL_EXAMPLES`` (default 60) and ``A2PG_MODEL_STEPS`` (default 50) set the
budget; CI runs the defaults (at 200 examples the PostgreSQL run took 12 of CI's 20
minutes; ``A2PG_MODEL_EXAMPLES=200`` or more is the deeper run to do by hand). A
failure prints the shortest sequence of steps hypothesis found that makes the backends
disagree, and which call or observation differed. No difference is tolerated: each one
found so far was fixed, and its minimal reproducer
kept in ``tests/conformance/test_edges.py``.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from a2pg.memory import log as memory_log
from a2pg.memory.state import SessionState
from a2pg.models import Cursor

from .pair import Candidate, Pair, PostgresCandidate, SqliteCandidate
from .rules import StoreModel

EXAMPLES = int(os.environ.get("A2PG_MODEL_EXAMPLES", "60"))
STEPS = int(os.environ.get("A2PG_MODEL_STEPS", "50"))
SHRINKING = 600
"""Seconds a failing run may spend shrinking (hypothesis gives up after about 300)."""
SECONDS_PER_STEP = 0.05
"""A generous bound per step (both stores and the comparison) for the test's timeout."""

SETTINGS = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    database=None,  # the example database would write .hypothesis/ into the working tree
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)


def bound(pair: Pair) -> type[StoreModel]:
    """The machine on this run's stores (hypothesis makes one machine per example)."""

    class OnThisPair(StoreModel):
        def __init__(self) -> None:
            super().__init__(pair)

    return OnThisPair


def run_model(candidate: Candidate, run_settings: settings) -> None:
    with asyncio.Runner(loop_factory=asyncio.new_event_loop) as runner:
        pair = Pair(runner, candidate)
        try:
            run_state_machine_as_test(bound(pair), settings=run_settings)
        finally:
            pair.close()


@pytest.mark.postgres
@pytest.mark.generated
@pytest.mark.timeout(SHRINKING + int(EXAMPLES * STEPS * SECONDS_PER_STEP))
def test_memory_and_postgres_agree_after_every_step(postgres_dsn: str) -> None:
    run_model(PostgresCandidate(postgres_dsn), SETTINGS)


@pytest.mark.generated
@pytest.mark.timeout(SHRINKING + int(EXAMPLES * STEPS * SECONDS_PER_STEP))
def test_memory_and_sqlite_agree_after_every_step(tmp_path: Path) -> None:
    run_model(SqliteCandidate(tmp_path / "model.db"), SETTINGS)


@pytest.mark.parametrize(
    "backend", [pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"]
)
def test_a_memory_store_that_strays_fails_the_model(
    backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model is worth its run time only if a difference fails it: here memory lists a
    session's cursors in reverse order."""
    candidate: Candidate
    if backend == "postgres":
        candidate = PostgresCandidate(request.getfixturevalue("postgres_dsn"))
    else:
        candidate = SqliteCandidate(request.getfixturevalue("tmp_path") / "model.db")
    listed = memory_log.list_cursors

    def reversed_cursors(session: SessionState | None) -> list[Cursor]:
        return listed(session)[::-1]

    monkeypatch.setattr(memory_log, "list_cursors", reversed_cursors)
    quick = settings(SETTINGS, max_examples=20, phases=[Phase.generate])
    with pytest.raises(AssertionError, match=re.escape("cursors(")):
        run_model(candidate, quick)
