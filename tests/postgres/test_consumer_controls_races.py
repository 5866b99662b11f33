"""Backfills, cancels and delays under contention, on real connections."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from a2pg import Completed, Consumer, LogSpec, NewEvent, Superseded, Target
from a2pg.postgres import PostgresStore

pytestmark = [pytest.mark.postgres]

AUDIT = Consumer("audit", LogSpec(types=("note",), backfill=True))


async def test_backfillers_at_once_share_the_batches_and_count_each_session_once(
    postgres_dsn: str,
) -> None:
    setup = await PostgresStore.open(postgres_dsn)
    sessions = [f"s{n:04}" for n in range(400)]
    try:
        for session in sessions:
            await setup.append(session, [NewEvent("note")])
        await setup.register_consumers([AUDIT])
    finally:
        await setup.close()
    stores = [await PostgresStore.open(postgres_dsn, max_size=2) for _ in range(4)]

    async def run(store: PostgresStore) -> None:
        while True:
            progress = await store.backfill("audit", limit=7)
            assert progress is not None
            if progress.done_at is not None:
                return

    try:
        await asyncio.wait_for(asyncio.gather(*(run(store) for store in stores)), 120)
        final = await stores[0].backfill("audit")
        assert final is not None and final.sessions == len(sessions)
        for session in sessions:
            [cursor] = await stores[0].cursors(session)
            assert (cursor.kind, cursor.head) == ("log", 1)
    finally:
        for store in stores:
            await store.close()


async def test_a_cancel_racing_the_completion_lets_exactly_one_win(postgres_dsn: str) -> None:
    a = await PostgresStore.open(postgres_dsn)
    b = await PostgresStore.open(postgres_dsn)
    try:
        for round_ in range(30):
            session = f"race-{round_}"
            lane = [Target("c", "l")]
            await a.append(session, [NewEvent("x", targets=lane), NewEvent("y", targets=lane)])
            [head] = await a.claim_any(holder="w", ttl=30, limit=1)
            done, cancelled = await asyncio.gather(
                a.complete_attempt(
                    session,
                    consumer="c",
                    lane="l",
                    index=1,
                    attempt=head.attempt,
                    events=[NewEvent("out", id=f"o{round_}")],
                ),
                b.cancel_head(session, consumer="c", index=1, action="skip"),
            )
            # One of them moved the lane past index 1, never both.
            assert isinstance(done, Completed) != cancelled.cancelled, (done, cancelled)
            if isinstance(done, Superseded):
                assert [e.type for e in await a.read(session)] == ["x", "y"]
            [cursor] = await a.cursors(session)
            assert (cursor.position, cursor.head) == (1, 2)
    finally:
        await a.close()
        await b.close()


async def test_many_delayed_heads_are_claimed_once_each_when_due(postgres_dsn: str) -> None:
    store = await PostgresStore.open(postgres_dsn)
    claimers = [await PostgresStore.open(postgres_dsn, max_size=2) for _ in range(3)]
    try:
        soon = timedelta(seconds=5)
        for n in range(60):
            await store.append(f"d{n}", [NewEvent("t", targets=[Target("c", not_before=soon)])])
        assert await store.claim_any(holder="early", ttl=30, limit=100) == []
        await asyncio.sleep(5.1)

        async def take(who: PostgresStore, holder: str) -> list[str]:
            got: list[str] = []
            while heads := await who.claim_any(holder=holder, ttl=30, limit=7):
                got.extend(head.session_id for head in heads)
            return got

        taken = await asyncio.gather(*(take(c, f"w{i}") for i, c in enumerate(claimers)))
        every = [session for part in taken for session in part]
        assert sorted(every) == sorted(f"d{n}" for n in range(60))
    finally:
        await store.close()
        for claimer in claimers:
            await claimer.close()
