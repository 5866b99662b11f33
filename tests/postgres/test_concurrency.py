"""Concurrency on real connections: SKIP LOCKED claims across processes, contended appends."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
from collections import Counter

import psycopg
import pytest

from a2pg import NewEvent, Target
from a2pg.postgres import PostgresStore

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SESSIONS = 500
EVENTS_PER_SESSION = 10
CLAIMERS = 8


def _claim_until_empty(dsn: str, holder: str, queue: mp.Queue[list[tuple[str, str, int]]]) -> None:
    """Runs in a child process: claims batches across all sessions until none are left."""

    async def main() -> list[tuple[str, str, int]]:
        store = await PostgresStore.open(dsn, max_size=2)
        claimed: list[tuple[str, str, int]] = []
        empty_rounds = 0
        try:
            while empty_rounds < 3:
                heads = await store.claim_any(holder=holder, ttl=600.0, limit=10)
                if not heads:
                    empty_rounds += 1
                    await asyncio.sleep(0.05)
                    continue
                empty_rounds = 0
                claimed.extend((h.session_id, h.consumer, h.index) for h in heads)
        finally:
            await store.close()
        return claimed

    queue.put(asyncio.run(main()))


async def test_eight_processes_claim_every_head_exactly_once(postgres_dsn: str) -> None:
    store = await PostgresStore.open(postgres_dsn)
    try:
        for s in range(SESSIONS):
            await store.append(
                f"s{s:04d}",
                [
                    NewEvent("work", {"n": n}, targets=[Target("worker")])
                    for n in range(EVENTS_PER_SESSION)
                ],
            )
    finally:
        await store.close()

    ctx = mp.get_context("spawn")
    queue: mp.Queue[list[tuple[str, str, int]]] = ctx.Queue()
    procs = [
        ctx.Process(target=_claim_until_empty, args=(postgres_dsn, f"claimer-{i}", queue))
        for i in range(CLAIMERS)
    ]
    for proc in procs:
        proc.start()
    results = [queue.get(timeout=240) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
        assert proc.exitcode == 0

    claimed = [item for result in results for item in result]
    counts = Counter(claimed)
    duplicates = [item for item, n in counts.items() if n > 1]
    assert duplicates == []
    expected = {
        (f"s{s:04d}", "worker", i)
        for s in range(SESSIONS)
        for i in range(1, EVENTS_PER_SESSION + 1)
    }
    assert set(claimed) == expected
    # The work was shared: more than one process got heads.
    assert sum(1 for result in results if result) > 1


async def test_twenty_concurrent_appenders_get_dense_indexes(postgres_dsn: str) -> None:
    store = await PostgresStore.open(postgres_dsn, min_size=20, max_size=20)
    try:

        async def appender(a: int) -> None:
            for n in range(25):
                await store.append("shared", [NewEvent("turn", {"a": a, "n": n}, id=f"a{a}-{n}")])

        await asyncio.gather(*(appender(a) for a in range(20)))
        events = await store.read("shared")
    finally:
        await store.close()

    assert [e.index for e in events] == list(range(1, 501))
    assert len({e.id for e in events}) == 500
    for a in range(20):
        mine = [e.payload["n"] for e in events if e.payload["a"] == a]
        assert mine == list(range(25)), "each appender's events keep its order"


async def _blocked_by(dsn: str, pid: int) -> None:
    """Returns once the server reports a backend waiting for a lock that ``pid`` holds:
    proof that a call is blocked, where a fixed wait would only show it was slow."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as watcher:
        while True:
            cur = await watcher.execute(
                "select count(*) from pg_stat_activity where %s = any(pg_blocking_pids(pid))",
                (pid,),
            )
            if await cur.fetchone() != (0,):
                return
            await asyncio.sleep(0.01)


async def test_appenders_to_other_sessions_do_not_wait(postgres_dsn: str) -> None:
    """A transaction holding one session's row lock blocks that session only."""
    store = await PostgresStore.open(postgres_dsn, max_size=4)
    try:
        await store.append("locked", [NewEvent("seed")])
        await store.append("free", [NewEvent("seed")])
        async with await psycopg.AsyncConnection.connect(postgres_dsn) as holder:
            async with holder.transaction():
                await holder.execute(
                    "select 1 from a2_sessions where session_id = 'locked' for update"
                )
                result = await asyncio.wait_for(
                    store.append("free", [NewEvent("turn")]), timeout=10
                )
                assert result.events[0].index == 2
                blocked = asyncio.ensure_future(store.append("locked", [NewEvent("turn")]))
                await asyncio.wait_for(_blocked_by(postgres_dsn, holder.info.backend_pid), 10)
                assert not blocked.done(), "an append to the locked session must wait for the lock"
            # Lock released at commit: the waiting append now finishes.
            appended = await asyncio.wait_for(blocked, timeout=10)
            assert appended.events[0].index == 2
    finally:
        await store.close()
