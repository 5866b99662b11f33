"""The worker side of ``a2pg bench``: a process that runs a Worker when the parent says go."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import resource
import time
from dataclasses import dataclass
from typing import Any

from ..backends import Site
from ..models import Head, NewEvent, Target
from ..store import Store
from ..worker.app import App

DRAIN_CONSUMER = "bench-drain"
CHAIN_CONSUMER = "bench-chain"
LANE_CONSUMER = "bench-lane"
CHAIN_LANE = "out"
PING_CONSUMER = "bench-ping"
CHAINED_TYPE = "bench.chained"
CHAINED_TARGET = Target(LANE_CONSUMER, CHAIN_LANE)

drain_app = App()
chain_app = App()
ping_app = App()
GO_POLL = 0.002
STOP_POLL = 0.05
_pings: Any = None  # the multiprocessing queue ping handlers report to, in the child process


@drain_app.consumer(DRAIN_CONSUMER)
async def drain(head: Head) -> None:
    """Does nothing: the drain measures the store and the worker, not a handler."""
    return None


@chain_app.consumer(CHAIN_CONSUMER)
async def chain(head: Head) -> list[NewEvent]:
    """Completes with one event for the lane consumer of the same session (the outbox path)."""
    return [NewEvent(CHAINED_TYPE, {"from": head.index}, targets=(CHAINED_TARGET,))]


@chain_app.consumer(LANE_CONSUMER)
async def lane(head: Head) -> None:
    """Does nothing: takes the chained events, one at a time per session."""
    return None


@ping_app.consumer(PING_CONSUMER)
async def ping(head: Head) -> None:
    """Reports when it started, to measure the wake latency from the append's commit."""
    _pings.put((head.event.id, time.time()))
    return None


APPS = {"drain": drain_app, "chain": chain_app, "ping": ping_app}


async def _until(event: Any, interval: float) -> None:
    """Waits for a multiprocessing event without parking a thread on it (which would keep
    ``asyncio.run`` from returning if the event never came)."""
    while not event.is_set():  # noqa: ASYNC110 - a multiprocessing event, not an asyncio one
        await asyncio.sleep(interval)


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """What one bench worker process runs (picklable: it crosses a spawn)."""

    site: Site
    """Where it opens its store (with a pool of ``pool_size``, where the backend pools)."""
    app: str  # a key of APPS
    concurrency: int
    pool_size: int = 10
    poll_interval: float = 1.0
    listen: bool = True


def peak_rss_kb() -> int:
    """This process's peak resident set size in KiB (VmHWM, else ``ru_maxrss``)."""
    with contextlib.suppress(OSError), open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def worker_process(
    spec: WorkerSpec, ready: Any, go: Any, stop: Any, results: Any, pings: Any
) -> None:
    """Process entry: open the store, start the worker, wait for ``go``, run until ``stop``;
    then report the worker's stats and this process's peak RSS."""
    global _pings
    _pings = pings
    stats = asyncio.run(_serve(spec, ready, go, stop))
    results.put(stats)


async def _serve(spec: WorkerSpec, ready: Any, go: Any, stop: Any) -> dict[str, int]:
    from ..worker.polling import PollingOnly
    from ..worker.runtime import Worker

    async with spec.site.open_store(pool_size=spec.pool_size) as store:
        served: Store = store if spec.listen else PollingOnly(store)
        worker = Worker(
            served,
            APPS[spec.app],
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
        return {**dataclasses.asdict(worker.stats), "rss_peak_kb": peak_rss_kb()}
