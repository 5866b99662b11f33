"""Bench worker processes: started and connected first, released together, stopped together."""

from __future__ import annotations

import asyncio
import multiprocessing
import queue
import time
from typing import Any

from .errors import BenchFailed
from .worker import WorkerSpec, worker_process

STARTUP_TIMEOUT = 60.0
RESULT_TIMEOUT = 30.0
PRELOAD = [
    "a2pg.bench.worker",
    "a2pg.backends",
    "a2pg.postgres",
    "a2pg.sqlite",
    "a2pg.worker",
    "psycopg",
    "psycopg_pool",
]
"""What the fork server imports once, so that each bench process starts in milliseconds."""


def context() -> Any:
    """Fresh processes without the parent's event loop, threads or connections: forked from
    a fork server that imported ``PRELOAD`` (spawned where there is no fork server)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


class Pool:
    """Worker processes (from ``context()``, so nothing of the parent's event loop leaks in)."""

    def __init__(self, specs: list[WorkerSpec], *, fresh: bool = False) -> None:
        """``fresh``: spawned, not forked, so each process's memory is its own from the
        start, as an ``a2pg worker``'s is (a fork inherits its parent's pages and peak RSS)."""
        ctx = multiprocessing.get_context("spawn") if fresh else context()
        self.ready = [ctx.Event() for _ in specs]
        self.go = ctx.Event()
        self.stop = ctx.Event()
        self.results: Any = ctx.Queue()
        self.pings: Any = ctx.Queue()
        self.procs = [
            ctx.Process(
                target=worker_process,
                args=(spec, ready, self.go, self.stop, self.results, self.pings),
                name=f"a2pg-bench-{n}",
                daemon=True,
            )
            for n, (spec, ready) in enumerate(zip(specs, self.ready, strict=True))
        ]

    async def start(self) -> None:
        """Starts the processes and waits until each has its worker started (connected,
        subscribed to wakeups) and waits for ``go``."""
        for proc in self.procs:
            proc.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not all(event.is_set() for event in self.ready):
            if any(not p.is_alive() for p in self.procs) or time.monotonic() > deadline:
                await self.finish()
                raise BenchFailed("bench worker processes did not start (see their errors above)")
            await asyncio.sleep(0.02)

    def release(self) -> float:
        """Lets the workers claim; returns when (``time.perf_counter()``)."""
        self.go.set()
        return time.perf_counter()

    async def finish(self) -> list[dict[str, int]]:
        """Stops the workers and collects their stats (one dict per process that reported)."""
        self.go.set()
        self.stop.set()
        stats: list[dict[str, int]] = []
        deadline = time.monotonic() + RESULT_TIMEOUT
        while len(stats) < len(self.procs) and time.monotonic() < deadline:
            try:
                stats.append(await asyncio.to_thread(self.results.get, True, 0.2))
            except queue.Empty:
                if not any(p.is_alive() for p in self.procs) and self.results.empty():
                    break  # all gone, and what they sent before exiting is read
        for proc in self.procs:
            await asyncio.to_thread(proc.join, 10.0)
            if proc.is_alive():
                proc.kill()
        return stats
