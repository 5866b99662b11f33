"""The worker side of ``a2pg bench``: a process that runs a Worker when the parent says go."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from ..models import Head
from ..store import Store
from ..worker.app import App

DRAIN_CONSUMER = "bench-drain"
PING_CONSUMER = "bench-ping"

drain_app = App()
ping_app = App()
GO_POLL = 0.002
STOP_POLL = 0.05
_pings: Any = None  # the multiprocessing queue ping handlers report to, in the child process


@drain_app.consumer(DRAIN_CONSUMER)
async def drain(head: Head) -> None:
    """Does nothing: the drain measures the store and the worker, not a handler."""
    return None


@ping_app.consumer(PING_CONSUMER)
async def ping(head: Head) -> None:
    """Reports when it started, to measure the wake latency from the append's commit."""
    _pings.put((head.event.id, time.time()))
    return None


async def _until(event: Any, interval: float) -> None:
    """Waits for a multiprocessing event without parking a thread on it (which would keep
    ``asyncio.run`` from returning if the event never came)."""
    while not event.is_set():  # noqa: ASYNC110 - a multiprocessing event, not an asyncio one
        await asyncio.sleep(interval)


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """What one bench worker process runs (picklable: it crosses a spawn)."""

    dsn: str
    schema: str | None
    app: str  # "drain" or "ping"
    concurrency: int
    poll_interval: float = 1.0
    listen: bool = True


def worker_process(
    spec: WorkerSpec, ready: Any, go: Any, stop: Any, results: Any, pings: Any
) -> None:
    """Process entry: open the store, start the worker, wait for ``go``, run until ``stop``."""
    global _pings
    _pings = pings
    stats = asyncio.run(_serve(spec, ready, go, stop))
    results.put(stats)


async def _serve(spec: WorkerSpec, ready: Any, go: Any, stop: Any) -> dict[str, int]:
    from ..postgres import PostgresStore
    from ..worker.polling import PollingOnly
    from ..worker.runtime import Worker

    if spec.schema is None:
        store = await PostgresStore.open(spec.dsn)
    else:
        store = await PostgresStore.open(spec.dsn, schema=spec.schema)
    try:
        served: Store = store if spec.listen else PollingOnly(store)
        app = drain_app if spec.app == "drain" else ping_app
        worker = Worker(
            served,
            app,
            concurrency=spec.concurrency,
            poll_interval=spec.poll_interval,
            shutdown_grace=5.0,
        )
        await worker.start()
        ready.set()
        await _until(go, GO_POLL)
        running = asyncio.create_task(worker.run(), name="a2pg-bench-worker")
        waiting = asyncio.create_task(_until(stop, STOP_POLL), name="a2pg-bench-stop")
        await asyncio.wait({running, waiting}, return_when=asyncio.FIRST_COMPLETED)
        worker.stop()
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        await running
        return dataclasses.asdict(worker.stats)
    finally:
        await store.close()
