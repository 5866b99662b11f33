"""NOTIFY: sent only where work became claimable, once per change, never for a repeat.

Each check listens on the channel, runs the writes, then sends a marker of its own:
everything the writes notified arrives before the marker, so "nothing" needs no wait.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import pytest
from psycopg import sql

from a2pg import Claimed, NewEvent, ReleaseResult
from a2pg.postgres import PostgresStore
from tests.postgres.support import TIMEOUT, work

pytestmark = pytest.mark.postgres

CHANNEL = "a2pg_public"


async def _notifications(
    dsn: str, channel: str, action: Callable[[], Awaitable[object]]
) -> list[dict[str, Any]]:
    """The payloads sent on ``channel`` while ``action`` ran (and a marker after it)."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(sql.SQL("listen {}").format(sql.Identifier(channel)))
        await action()
        await conn.execute("select pg_notify(%s, 'end')", (channel,))
        received = []
        async for notify in conn.notifies(timeout=TIMEOUT):
            if notify.payload == "end":
                break
            if notify.payload.startswith("{"):
                received.append(json.loads(notify.payload))
        return received


async def test_notify_only_where_work_became_claimable(
    store: PostgresStore, postgres_dsn: str
) -> None:
    async def writes() -> None:
        await store.append("quiet", [NewEvent("note")], consumers=[])
        await store.append("busy", work(3), consumers=[])

    got = await _notifications(postgres_dsn, CHANNEL, writes)
    assert got == [{"session_id": "busy", "head": 3}]


async def test_a_claim_and_a_retry_backoff_notify_nothing(
    store: PostgresStore, postgres_dsn: str
) -> None:
    await store.append("s", work(), consumers=[])

    async def writes() -> None:
        result = await store.claim_available("s", holder="h", ttl=30)
        assert isinstance(result, Claimed)
        [head] = result.heads
        await store.fail_attempt(
            "s",
            consumer="worker",
            lane=None,
            index=1,
            attempt=head.attempt,
            error="x",
            max_failures=5,
            retry_after=10,
        )

    assert await _notifications(postgres_dsn, CHANNEL, writes) == []


async def test_a_release_notifies_once_and_a_repeat_not_at_all(
    store: PostgresStore, postgres_dsn: str
) -> None:
    await store.append("s", work(2), consumers=[])
    result = await store.claim_available("s", holder="a", ttl=30)
    assert isinstance(result, Claimed)
    refs = [head.attempt_ref for head in result.heads]

    async def release() -> None:
        released = await store.release_claims("s", holder="a", claims=refs)
        assert len(released.released) == 2

    got = await _notifications(postgres_dsn, CHANNEL, release)
    assert got == [{"session_id": "s", "head": 2}]

    async def repeat() -> None:
        assert await store.release_claims("s", holder="a", claims=refs) == ReleaseResult([], [])

    assert await _notifications(postgres_dsn, CHANNEL, repeat) == []
