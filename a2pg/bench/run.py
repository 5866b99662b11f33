"""``a2pg bench``: a2pg's figures beside the database's own write ceiling, measured in each run.

One phase sequence for every backend. Each run measures the ceiling (the side's: N raw
connections committing on PostgreSQL, N processes on a SQLite file) on every N a phase
uses, then every phase (``phases.py``): drains by P worker processes, the chain, the
appends, the wake latency with the backend's signal and by polling only, and where the
backend has them the memory phase and the history drains (``history.py``). Each figure
is also a ratio to that run's ceiling on the phase's N (``Shape.writers``). The report
keeps, per figure, every run, the median, the spread (min-max) of the figure and of
its ratio, and the target it is held to.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from ..backends import Site
from ..errors import invalid
from . import phases
from .config import APPEND_TASKS, BenchConfig
from .figures import FigureSet
from .history import check
from .ledger import load_average
from .phases import Where
from .postgres_side import SHAPE as POSTGRES
from .postgres_side import PostgresSide
from .side import Shape, Side
from .sqlite_side import SHAPE as SQLITE
from .sqlite_side import SqliteSide
from .stats import Figure, percentile
from .sync import Sync

DELAYED_BY = 0.25
"""Seconds each delayed ping is held back (``Target.not_before``) in the delayed phase."""

MB = 1024 / 1_000_000
"""MB (10^6 bytes) per KiB."""

SIDES: Mapping[str, tuple[Shape, Callable[[Site, BenchConfig, Sync], Side]]] = {
    "postgres": (POSTGRES, PostgresSide),
    "sqlite": (SQLITE, SqliteSide),
}
"""What the bench measures differently on each backend of ``a2pg.backends``."""


class Bench(FigureSet):
    """The figures and checks of one ``a2pg bench``, filled run by run."""

    def __init__(self, c: BenchConfig, shape: Shape) -> None:
        self.shape = shape
        most, pool, writers = c.most_processes, c.pool_size, shape.writers
        appends = writers(1, APPEND_TASKS)
        memory = [writers(1, pool)] if shape.memory else []
        self.ns = sorted({appends, *memory, *(writers(p, pool) for p in c.process_counts)})
        figures = [Figure(f"ceiling_{n}", shape.ceiling(n), "commits/s") for n in self.ns]
        figures += [
            Figure(f"drain_p{p}", f"drain, P={p}", "events/s", writers(p, pool))
            for p in c.process_counts
        ]
        wake, signal = shape.wake
        figures += [
            Figure("chain", f"chain to a lane, P={most}", "completions/s", writers(most, pool)),
            Figure("append_single", f"append, single ({APPEND_TASKS} tasks)", "events/s", appends),
            Figure("append_batch", f"append, batches of {c.batch_size}", "events/s", appends),
            Figure(f"wake_{wake}_p50", f"wake latency, {signal}, p50", "ms"),
            Figure(f"wake_{wake}_p99", f"wake latency, {signal}, p99", "ms"),
            Figure("wake_poll_p50", f"wake latency, polling {c.poll_interval:g}s, p50", "ms"),
            Figure("wake_poll_p99", f"wake latency, polling {c.poll_interval:g}s, p99", "ms"),
            Figure("wake_delayed_p50", f"delayed start, {DELAYED_BY:g}s after, p50", "ms"),
            Figure("wake_delayed_p99", f"delayed start, {DELAYED_BY:g}s after, p99", "ms"),
        ]
        if shape.history:
            n = writers(most, pool)
            figures += [
                Figure(key, f"drain, {size:,} done in store, P={most}", "events/s", n)
                for key, size in (("history_base", c.history_base), ("history_full", c.history))
            ]
            ratio = f"history drain {c.history:,} / {c.history_base:,}"
            figures.append(Figure("history_ratio", ratio, "x"))
        if shape.memory:
            drain = f"drain, P=1 at concurrency {c.memory_concurrency}"
            rss = f"worker peak RSS at concurrency {c.memory_concurrency}"
            figures += [
                Figure("memory_drain", drain, "events/s", writers(1, pool)),
                Figure("worker_rss", rss, "MB"),
            ]
        super().__init__(c, figures)

    def report(self) -> dict[str, Any]:
        data = self.figures_json()
        if not self.shape.targets:
            for figure in data.values():
                figure["target"] = None
        targets = [
            {"figure": key, "name": f["name"], **f["target"]}
            for key, f in data.items()
            if f["target"] is not None
        ]
        return self.report_with(data, targets)


def check_sync(site: Site, sync: Sync) -> None:
    """``--sync off`` only where it applies (INVALID_ARGUMENT elsewhere)."""
    refused = SIDES[site.backend][0].no_sync
    if sync != "on" and refused is not None:
        raise invalid(refused)


async def run_bench(
    site: Site, c: BenchConfig, log: TextIO, *, sync: Sync = "on", where: str = "the given"
) -> dict[str, Any]:
    """Measures everything ``c.runs`` times on ``site`` (migrated first; its sessions stay
    behind); returns the report ``a2pg bench --json`` prints, its ``database`` the
    database as ``where`` calls it (``a2pg.backends.Site.throwaway``)."""
    check_sync(site, sync)
    shape, make = SIDES[site.backend]
    side = make(site, c, sync)
    bench = Bench(c, shape)
    tag = uuid.uuid4().hex[:8]
    async with side.running(log) as machine:
        for run in range(1, c.runs + 1):
            await _one_run(bench, site, side, f"{tag}-{run}", run, log)
        machine["load_average_runs"] = bench.loads
        machine["load_average_end"] = load_average()
    return {
        "machine": machine,
        "config": dataclasses.asdict(c),
        "ceiling": _ceiling(side.ceiling_report(), bench.ns),
        **bench.report(),
        "database": f"{where} {side.server}",
    }


def _ceiling(report: dict[str, str], ns: list[int]) -> dict[str, Any]:
    return {"shape": report["shape"], "connections": ns, "how": report["how"], "n": report["n"]}


async def _one_run(bench: Bench, site: Site, side: Side, tag: str, run: int, log: TextIO) -> None:
    """One run: the ceilings, then every phase, each figure recorded with its ratio."""
    c = bench.c

    def say(text: str) -> None:
        log.write(text)
        log.flush()

    began = time.monotonic()
    bench.loads.append(load_average())
    say(f"run {run}/{c.runs}: ceiling")
    ceilings: dict[int, float] = {}
    for n in bench.ns:
        say(f" N={n}...")
        ceilings[n] = await side.ceiling(n, c.ceiling_seconds)
        bench.add(f"ceiling_{n}", ceilings[n], ceilings)
    async with site.open_store() as store:
        where = Where(site, store, side.ledger(site))
        for p in c.process_counts:
            say(f" drain P={p}...")
            result = await phases.drain(
                where,
                label=f"run {run} drain P={p}",
                prefix=f"bench-{tag}-drain{p}",
                events=c.events,
                sessions=c.sessions,
                processes=p,
                concurrency=c.concurrency,
                pool_size=c.pool_size,
            )
            bench.drained(f"drain_p{p}", result, ceilings)
        say(" chain...")
        result = await phases.drain(
            where,
            label=f"run {run} chain",
            prefix=f"bench-{tag}-chain",
            events=c.chain_inputs,
            sessions=c.sessions,
            processes=c.most_processes,
            concurrency=c.concurrency,
            pool_size=c.pool_size,
            chain=True,
        )
        bench.drained("chain", result, ceilings)
        say(" appends...")
        single, batched = await phases.appends(store, c, tag)
        bench.add("append_single", single, ceilings)
        bench.add("append_batch", batched, ceilings)
        for listen, mode in ((True, bench.shape.wake[0]), (False, "poll")):
            say(f" latency ({mode})...")
            samples = await phases.latency(where, c, tag, listen=listen)
            bench.add(f"wake_{mode}_p50", percentile(samples, 50) * 1000, ceilings)
            bench.add(f"wake_{mode}_p99", percentile(samples, 99) * 1000, ceilings)
        say(" latency (delayed)...")
        samples = await phases.latency(where, c, tag, listen=True, delay=DELAYED_BY)
        bench.add("wake_delayed_p50", percentile(samples, 50) * 1000, ceilings)
        bench.add("wake_delayed_p99", percentile(samples, 99) * 1000, ceilings)
        if bench.shape.memory:
            await _memory(bench, where, tag, run, ceilings, say)
    if bench.shape.history:
        await _histories(bench, side, tag, run, ceilings, say)
    say(f" done in {time.monotonic() - began:.0f} s\n")


async def _memory(
    bench: Bench,
    where: Where,
    tag: str,
    run: int,
    ceilings: dict[int, float],
    say: Callable[[str], None],
) -> None:
    """A drain by one spawned worker process, whose peak RSS is its own."""
    c = bench.c
    say(" memory...")
    result = await phases.drain(
        where,
        label=f"run {run} memory",
        prefix=f"bench-{tag}-memory",
        events=c.memory_events,
        sessions=c.sessions,
        processes=1,
        concurrency=c.memory_concurrency,
        pool_size=c.pool_size,
        fresh=True,
    )
    bench.drained("memory_drain", result, ceilings)
    bench.add("worker_rss", result.peak_rss_kb * MB, ceilings)


async def _histories(
    bench: Bench,
    side: Side,
    tag: str,
    run: int,
    ceilings: dict[int, float],
    say: Callable[[str], None],
) -> None:
    """The same drain in stores that differ only in how much finished work they keep."""
    c = bench.c
    rates: list[float] = []
    for history in side.histories:
        say(f" history {history.size:,}...")
        async with history.site.open_store() as store:
            if run == 1:
                bench.checks.append(await check(store, history.size))
            result = await phases.drain(
                Where(history.site, store, side.ledger(history.site)),
                label=f"run {run} drain, {history.size:,} done in store",
                prefix=f"bench-{tag}-history",
                events=c.history_events,
                sessions=c.sessions,
                processes=c.most_processes,
                concurrency=c.concurrency,
                pool_size=c.pool_size,
            )
        await side.forget(history, result.ids)
        bench.drained(history.key, result, ceilings)
        rates.append(result.rate)
    bench.add("history_ratio", rates[1] / rates[0], ceilings)
