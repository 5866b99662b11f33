"""complete_attempts on PostgreSQL: each completion of a batch is fenced on its own, and
rolled-back fast paths leave the connection's prepared statements usable."""

from __future__ import annotations

import pytest

from a2pg import Completed, Completion, Superseded
from a2pg.postgres import PostgresStore
from tests.postgres.support import work

pytestmark = pytest.mark.postgres


async def test_a_batch_fences_each_completion_on_its_own(store: PostgresStore) -> None:
    await store.append("a", work(2), consumers=[])
    await store.append("b", work(1), consumers=[])
    heads = await store.claim_any(holder="h", ttl=30, limit=10)
    completions = [Completion(h.session_id, h.consumer, h.lane, h.index, h.attempt) for h in heads]
    stale = Completion("a", "worker", None, 1, heads[0].attempt + 1)
    results = await store.complete_attempts([*completions, stale, completions[0]])
    assert results[:3] == [Completed([]), Completed([]), Completed([])]
    assert results[3] == Superseded()
    assert results[4] == Completed([])
    assert await store.claim_any(holder="h", ttl=30) == []


async def test_failed_transactions_leave_prepared_statements_consistent(
    postgres_dsn: str,
) -> None:
    """One connection, many rolled-back fast paths between successes: psycopg prepares
    statements after a few runs, and a rollback must not leave it naming dropped ones."""
    store = await PostgresStore.open(postgres_dsn, max_size=1, min_size=1)
    try:
        for round_ in range(12):
            await store.append("s", work(), consumers=[])
            [head] = await store.claim_any(holder="h", ttl=30)
            stale = Completion("s", head.consumer, None, head.index, head.attempt + 1)
            assert await store.complete_attempts([stale]) == [Superseded()], round_
            done = Completion("s", head.consumer, None, head.index, head.attempt)
            assert await store.complete_attempts([done]) == [Completed([])], round_
            assert await store.complete_attempts([done]) == [Completed([])], round_
    finally:
        await store.close()
