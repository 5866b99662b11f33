"""A worker runs the backfill of each log consumer it registers with ``backfill``."""

from __future__ import annotations

import asyncio

from a2pg import Head, LogSpec, NewEvent
from a2pg.store import Store
from a2pg.worker import App, Worker

from .helpers import bounded, until


async def test_a_new_backfilling_log_consumer_reaches_every_existing_session(
    store: Store,
) -> None:
    sessions = [f"s{n:03}" for n in range(250)]  # more than one batch
    for session in sessions:
        await store.append(session, [NewEvent("user.message", {"s": session}), NewEvent("note")])
    app = App()
    seen: list[str] = []

    @app.consumer("audit", log=LogSpec(types=("user.message",), backfill=True))
    def audit(head: Head) -> None:
        seen.append(head.session_id)

    worker = Worker(store, app, concurrency=8)
    task = asyncio.create_task(worker.run())
    try:
        await until(lambda: len(seen) >= len(sessions), within=60)
    finally:
        worker.stop()
        await bounded(task)
    assert sorted(seen) == sessions
    progress = await store.backfill("audit")
    assert progress is not None and progress.done_at is not None
    assert progress.sessions == len(sessions)


async def test_without_backfill_existing_sessions_wait_for_their_next_event(
    store: Store,
) -> None:
    await store.append("old", [NewEvent("user.message")])
    app = App()
    seen: list[int] = []

    @app.consumer("audit", log=LogSpec(types=("user.message",)))
    def audit(head: Head) -> None:
        seen.append(head.index)

    worker = Worker(store, app)
    await bounded(worker.run_until_idle())
    assert seen == [] and await store.cursors("old") == []
    await store.append("old", [NewEvent("user.message")])
    await bounded(worker.run_until_idle())
    assert seen == [2]
