"""Worker processes sharing one SQLite file: each head is claimed and completed once, and a
worker killed with SIGKILL mid-attempt loses nothing (its leases lapse, another completes).

Real ``a2pg worker --sqlite`` processes, no fakes. The full size runs 4 processes over
5,000 heads (well under 30 s on 2 cores); ``A2PG_SOAK=1`` adds 20,000.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from a2pg.sqlite import SqliteStore
from a2pg.store import Store

from .jobs import STALL_ENV
from .processes import eventually, fill, held, outstanding, results, start_worker, stop

DRAIN_TIMEOUT = 120.0
"""A bound, not a measure: 5,000 heads drain in a few seconds here."""


async def drain_with_processes(tmp_path: Path, *, processes: int, heads: int) -> None:
    """Starts the workers, waits until each has said it is alive (its heartbeat row), then
    appends the jobs: every process is claiming before the first job commits."""
    path = tmp_path / "a2.db"
    store = await SqliteStore.open(path, migrate=True)
    try:
        sessions = [f"s{i:02d}" for i in range(50)]
        workers = [await start_worker(path, "--concurrency", "32") for _ in range(processes)]
        try:

            async def all_alive() -> bool:
                return len(await store.workers()) == processes

            await eventually(all_alive, within=60)
            await fill(store, sessions, heads // len(sessions))
            await wait_until_drained(store)
        finally:
            stopped = [await stop(proc) for proc in workers]
        assert [code for code, _ in stopped] == [0] * processes, stopped
        pids: set[int] = set()
        for session_id in sessions:
            done = await results(store, session_id)
            assert sorted(done) == list(range(1, heads // len(sessions) + 1))
            for index, outcomes in done.items():
                assert len(outcomes) == 1, (session_id, index, outcomes)  # completed once
                assert outcomes[0]["attempt"] == 1, (session_id, index)  # claimed once
                pids.add(outcomes[0]["pid"])
        assert pids == {proc.pid for proc in workers}, "a process never claimed"
    finally:
        await store.close()


async def wait_until_drained(store: Store) -> None:
    async def drained() -> bool:
        return await outstanding(store) == 0

    await eventually(drained, within=DRAIN_TIMEOUT)


async def test_four_processes_claim_each_of_5000_heads_once(tmp_path: Path) -> None:
    await drain_with_processes(tmp_path, processes=4, heads=5_000)


@pytest.mark.soak
async def test_four_processes_claim_each_of_20000_heads_once(tmp_path: Path) -> None:
    await drain_with_processes(tmp_path, processes=4, heads=20_000)


async def test_a_worker_killed_mid_attempt_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "a2.db"
    store = await SqliteStore.open(path, migrate=True)
    sessions = ["a", "b", "c", "d"]
    try:
        await fill(store, sessions, 10)
        doomed = await start_worker(path, "--concurrency", "8", "--ttl", "2", env={STALL_ENV: "1"})

        async def all_held() -> bool:
            return await held(store, sessions) == 8

        await eventually(all_held, within=30)  # 8 attempts in flight in the doomed process
        doomed.send_signal(signal.SIGKILL)
        assert await doomed.wait() == -signal.SIGKILL
        survivor = await start_worker(path, "--concurrency", "8", "--ttl", "2")
        try:
            await wait_until_drained(store)
        finally:
            code, err = await stop(survivor)
        assert code == 0, err
        lapsed = []
        for session_id in sessions:
            done = await results(store, session_id)
            assert sorted(done) == list(range(1, 11)), session_id  # nothing lost
            for index, outcomes in done.items():
                assert len(outcomes) == 1, (session_id, index, outcomes)  # nor done twice
                assert outcomes[0]["pid"] == survivor.pid
                if outcomes[0]["attempt"] > 1:
                    lapsed.append(outcomes[0])
        # The killed process's 8 attempts lapsed: each was claimed again, one failure counted.
        assert len(lapsed) == 8
        assert all(o["attempt"] == 2 and o["failures"] == 1 for o in lapsed), lapsed
    finally:
        await store.close()
