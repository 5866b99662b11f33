"""A backfill killed half-way resumes where the registry says, and counts each session once."""

from __future__ import annotations

import os
import signal
import subprocess

from a2pg.models import BackfillProgress, Consumer, LogSpec, NewEvent
from a2pg.postgres import PostgresStore

from .conftest import A2PG, run_script
from .stores import wait_for, with_store

SESSIONS = 1500
AUDIT = Consumer("audit", LogSpec(types=("user.message",), backfill=True))


def progress(dsn: str) -> BackfillProgress | None:
    async def read(store: PostgresStore) -> BackfillProgress | None:
        [stats] = [s for s in await store.consumer_stats() if s.consumer == "audit"]
        return stats.backfill

    return with_store(dsn, read)


def test_a_killed_backfill_resumes_after_the_last_recorded_session(postgres_dsn: str) -> None:
    async def populate(store: PostgresStore) -> None:
        for n in range(SESSIONS):
            await store.append(f"s{n:05}", [NewEvent("user.message")])
        await store.register_consumers([AUDIT])

    with_store(postgres_dsn, populate)
    env = {k: v for k, v in os.environ.items() if not k.startswith("A2PG_")}
    first = subprocess.Popen(
        [str(A2PG), "backfill", "audit", "--batch", "5", "--dsn", postgres_dsn],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:

        def under_way() -> bool:
            """the first backfill recorded some batches"""
            seen = progress(postgres_dsn)
            return seen is not None and seen.sessions >= 50

        wait_for(under_way, within=60, every=0.1)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    halfway = progress(postgres_dsn)
    assert halfway is not None and halfway.running and halfway.sessions < SESSIONS
    second = run_script("backfill", "audit", "--batch", "50", "--dsn", postgres_dsn, timeout=120)
    assert second.code == 0, second
    done = progress(postgres_dsn)
    assert done is not None and not done.running
    assert done.sessions == SESSIONS  # each session counted once, the killed batch redone

    async def cursors(store: PostgresStore) -> int:
        found = 0
        for n in range(SESSIONS):
            found += len(await store.cursors(f"s{n:05}"))
        return found

    assert with_store(postgres_dsn, cursors) == SESSIONS
