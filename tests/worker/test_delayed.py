"""An idle worker claims delayed work when it is due, not at its next poll."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from a2pg import Head, MemoryStore, NewEvent, Target
from a2pg.worker import App, Worker

from .helpers import bounded


async def test_a_delayed_head_runs_when_due_though_the_poll_is_an_hour_away() -> None:
    store = MemoryStore()  # the machine's clock: the delay passes for real
    app = App()
    started = asyncio.Event()

    @app.consumer("reminder")
    def remind(head: Head) -> None:
        started.set()

    delay = timedelta(milliseconds=300)
    await store.append("s", [NewEvent("remind", targets=[Target("reminder", not_before=delay)])])
    worker = Worker(store, app, poll_interval=3600)
    task = asyncio.create_task(worker.run())
    try:
        await bounded(started.wait(), within=10)
    finally:
        worker.stop()
        await bounded(task)
    assert worker.stats.completed == 1
    await store.close()
