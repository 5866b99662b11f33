"""release_claims on PostgreSQL: lapsed claims, other holders' claims and cleared heads."""

from __future__ import annotations

import pytest

from a2pg import Busy, ReleaseResult, Superseded
from a2pg.ids import FakeClock
from a2pg.postgres import PostgresStore
from tests.postgres.support import claim, work

pytestmark = pytest.mark.postgres


async def test_a_released_lapsed_claim_is_reclaimed_without_a_failure(postgres_dsn: str) -> None:
    clock = FakeClock()
    store = await PostgresStore.open(postgres_dsn, clock=clock)
    try:
        await store.append("s", work(), consumers=[])
        first = await claim(store, "a")
        await store.fail_attempt(
            "s",
            consumer="worker",
            lane=None,
            index=1,
            attempt=first.attempt,
            error="x",
            max_failures=5,
        )
        held = await claim(store, "a")
        clock.advance(60)  # the lease lapsed: a plain reclaim would count a failure
        result = await store.release_claims("s", holder="a", claims=[held.attempt_ref])
        assert result == ReleaseResult([held.attempt_ref.ref], [])
        again = await store.release_claims("s", holder="a", claims=[held.attempt_ref])
        assert again == ReleaseResult([], [])
        [next_] = await store.claim_any(holder="b", ttl=30)
        assert (next_.attempt, next_.failure_count) == (held.attempt + 1, 1)
        assert next_.dispatch.last_error == "x"
        assert (
            await store.complete_attempt(
                "s", consumer="worker", lane=None, index=1, attempt=held.attempt
            )
            == Superseded()
        )
    finally:
        await store.close()


async def test_a_release_leaves_another_holders_claim_alone(store: PostgresStore) -> None:
    await store.append("s", work(), consumers=[])
    head = await claim(store, "a")
    result = await store.release_claims("s", holder="b", claims=[head.attempt_ref])
    assert result == ReleaseResult([], [])
    assert isinstance(await store.claim_available("s", holder="b", ttl=30), Busy)
    renewed = await store.renew_claims("s", holder="a", claims=[head.attempt_ref], ttl=30)
    assert renewed.renewed == [head.attempt_ref.ref]


async def test_a_release_or_renewal_below_the_clear_leaves_the_head_parked(
    postgres_dsn: str,
) -> None:
    """A cleared head keeps its claim columns but no ready_at: neither call may give it
    one, or claim_any (which looks at ready_at alone) would hand it out again."""
    clock = FakeClock()
    store = await PostgresStore.open(postgres_dsn, clock=clock)
    try:
        await store.append("s", work(), consumers=[])
        head = await claim(store, "a")
        await store.clear("s")
        renewed = await store.renew_claims("s", holder="a", claims=[head.attempt_ref], ttl=30)
        assert renewed.superseded == [head.attempt_ref.ref]
        result = await store.release_claims("s", holder="a", claims=[head.attempt_ref])
        assert result == ReleaseResult([], [head.attempt_ref.ref])
        clock.advance(60)
        assert await store.claim_any(holder="b", ttl=30) == []
    finally:
        await store.close()
