"""A server restart costs a store one failed operation, not one per pooled connection."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from a2pg import NewEvent, Target
from a2pg.postgres import PostgresStore
from a2pg.postgres.migrate import upgrade
from a2pg.testing import EmbeddedPostgres

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
POOL = 4


async def test_a_restart_fails_one_operation_then_the_pool_recovers(
    private_postgres: EmbeddedPostgres,
) -> None:
    dsn = private_postgres.dsn()
    upgrade(dsn)
    store = await PostgresStore.open(dsn, min_size=POOL, max_size=POOL)
    try:
        # Fill the pool: every connection has been used and sits idle.
        await asyncio.gather(
            *(store.append(f"s{n}", [NewEvent("e", targets=[Target("c")])]) for n in range(8))
        )
        await asyncio.wait_for(store.pool.wait(), timeout=30)
        assert store.pool.get_stats()["pool_available"] == POOL

        private_postgres.restart()

        # claim_any is not idempotent, so the dead connection's error reaches the caller...
        with pytest.raises(psycopg.OperationalError):
            await store.claim_any(holder="h", ttl=30.0)
        # ...and the pool tests its other connections meanwhile: what follows succeeds,
        # even operations that are never retried, all at once on every connection.
        for _ in range(100):
            await asyncio.sleep(0.05)
            if store.pool.get_stats().get("connections_lost", 0) >= POOL - 1:
                break
        heads = await asyncio.gather(
            *(store.claim_any(holder=f"h{n}", ttl=30.0, limit=2) for n in range(POOL))
        )
        assert sum(len(batch) for batch in heads) == 8
    finally:
        await store.close()
