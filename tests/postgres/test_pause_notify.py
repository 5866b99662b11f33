"""A resume's NOTIFY: once per session where a resumed consumer has a ready head, nothing for
a pause or for a resume of what was not paused, and heard by another process's wakeups
without waiting for its poll; and the runtime role's grants cover the pause table.

As in test_notify.py, each check listens on the channel, runs the writes, then sends a
marker of its own: everything the writes notified arrives before the marker.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import pytest
from psycopg import sql

from a2pg import NewEvent, Settled, Target
from a2pg.postgres import PostgresStore
from tests.postgres.support import TIMEOUT, work
from tests.postgres.test_least_privilege import (  # noqa: F401 - its fixtures
    SCHEMA,
    MakeRole,
    as_role,
    database,
    make_role,
    runtime_grants,
)

pytestmark = pytest.mark.postgres

CHANNEL = "a2pg_public"


async def notified(dsn: str, action: Callable[[], Awaitable[object]]) -> list[dict[str, Any]]:
    """The JSON payloads sent on the store's channel while ``action`` ran."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(sql.SQL("listen {}").format(sql.Identifier(CHANNEL)))
        await action()
        await conn.execute("select pg_notify(%s, 'end')", (CHANNEL,))
        received = []
        async for notify in conn.notifies(timeout=TIMEOUT):
            if notify.payload == "end":
                break
            if notify.payload.startswith("{"):
                received.append(json.loads(notify.payload))
        return received


async def test_a_resume_notifies_each_session_with_ready_heads_once(
    store: PostgresStore, postgres_dsn: str
) -> None:
    await store.append("s", work(3), consumers=[])
    await store.append("t", work(1), consumers=[])
    other = [NewEvent("other", None, targets=[Target("other")])]
    await store.append("u", other, consumers=[])
    await store.pause_consumers(["worker", "other"])
    leased = await store.claim_any(holder="h", ttl=30, limit=10)
    assert leased == []

    async def resume() -> None:
        await store.resume_consumers(["worker"])

    got = await notified(postgres_dsn, resume)
    assert sorted(got, key=lambda n: n["session_id"]) == [
        {"session_id": "s", "head": 3},
        {"session_id": "t", "head": 1},
    ]


async def test_a_pause_and_a_resume_of_nothing_paused_notify_nothing(
    store: PostgresStore, postgres_dsn: str
) -> None:
    await store.append("s", work(2), consumers=[])

    async def writes() -> None:
        await store.pause_consumers(["worker"])
        await store.pause_consumers(["worker"])
        await store.resume_consumers(["nobody"])

    assert await notified(postgres_dsn, writes) == []


async def test_a_resume_reaches_another_stores_wakeups_before_its_poll(
    store: PostgresStore, postgres_dsn: str
) -> None:
    """The watcher polls once an hour: only the NOTIFY can wake it in time. Its first
    poll, as it connects, does not announce the paused consumer's session."""
    watcher = await PostgresStore.open(postgres_dsn, poll_interval=3600)
    try:
        await store.append("s", work(1), consumers=[])
        await store.pause_consumers(["worker"])
        wakeups = watcher.wakeups()
        first = await asyncio.wait_for(anext(wakeups), TIMEOUT)  # the listener connected
        assert first is None
        await store.resume_consumers(["worker"])

        async def woken_for_s() -> None:
            while await anext(wakeups) != "s":
                pass

        await asyncio.wait_for(woken_for_s(), TIMEOUT)
        await wakeups.aclose()
    finally:
        await watcher.close()


async def test_the_runtime_role_of_a2pg_grants_pauses_and_resumes(
    database: str,  # noqa: F811 - the fixture imported above
    make_role: MakeRole,  # noqa: F811
) -> None:
    """``a2pg grants`` covers ``a2_consumer_pauses``: a runtime role writes and reads it."""
    dsn = as_role(database, make_role(runtime_grants))
    store = await PostgresStore.open(dsn, schema=SCHEMA)
    try:
        await store.append("s", work(1), consumers=[])
        await store.pause_consumers(["worker"])
        assert await store.claim_any(holder="h", ttl=30) == []
        assert await store.claim_available("s", holder="h", ttl=30) == Settled()
        await store.resume_consumers(["worker"])
        [head] = await store.claim_any(holder="h", ttl=30)
        assert head.consumer == "worker"
    finally:
        await store.close()
