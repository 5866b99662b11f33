"""``a2pg bench``: a2pg's figures beside the machine's own commit ceiling, measured in each run.

Each run measures the commit ceiling (``ceiling.py``) on every connection count N a
phase uses, then every phase (``phases.py``, ``history.py``); each a2pg figure is
also a ratio to that run's ceiling on the phase's N. N is the phase's connection
count: P worker processes x ``pool_size`` (each worker's store pool is opened at that
size, min = max) for drains; the ``APPEND_TASKS`` appending tasks for appends. The
report keeps, per figure, every run, the median, the spread (min-max) of the figure
and of its ratio, and the target it is held to.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, TextIO

from ..postgres.connect import open_store
from ..postgres.layout import DEFAULT_SCHEMA
from . import ceiling, history, phases
from .config import APPEND_TASKS, BenchConfig
from .figures import FigureSet
from .ledger import Ledger, load_average
from .phases import Where
from .stats import Figure, percentile

MB = 1024 / 1_000_000
"""MB (10^6 bytes) per KiB."""


class Bench(FigureSet):
    """The figures and checks of one ``a2pg bench``, filled run by run."""

    def __init__(self, c: BenchConfig) -> None:
        most, pool = c.most_processes, c.pool_size
        self.ns = sorted({APPEND_TASKS, pool, *(p * pool for p in c.process_counts)})
        figures = [Figure(f"ceiling_{n}", f"commit ceiling, N={n}", "commits/s") for n in self.ns]
        figures += [
            Figure(f"drain_p{p}", f"drain, P={p}", "events/s", p * pool) for p in c.process_counts
        ]
        figures += [
            Figure("chain", f"chain to a lane, P={most}", "completions/s", most * pool),
            Figure(
                "append_single", f"append, single ({APPEND_TASKS} tasks)", "events/s", APPEND_TASKS
            ),
            Figure("append_batch", f"append, batches of {c.batch_size}", "events/s", APPEND_TASKS),
            Figure("wake_notify_p50", "wake latency, NOTIFY, p50", "ms"),
            Figure("wake_notify_p99", "wake latency, NOTIFY, p99", "ms"),
            Figure("wake_poll_p50", f"wake latency, polling {c.poll_interval:g}s, p50", "ms"),
            Figure("wake_poll_p99", f"wake latency, polling {c.poll_interval:g}s, p99", "ms"),
            Figure(
                "history_base",
                f"drain, {c.history_base:,} done in store, P={most}",
                "events/s",
                most * pool,
            ),
            Figure(
                "history_full",
                f"drain, {c.history:,} done in store, P={most}",
                "events/s",
                most * pool,
            ),
            Figure("history_ratio", f"history drain {c.history:,} / {c.history_base:,}", "x"),
            Figure(
                "memory_drain",
                f"drain, P=1 at concurrency {c.memory_concurrency}",
                "events/s",
                pool,
            ),
            Figure("worker_rss", f"worker peak RSS at concurrency {c.memory_concurrency}", "MB"),
        ]
        super().__init__(c, figures)

    def report(self) -> dict[str, Any]:
        data = self.figures_json()
        targets = [
            {"figure": key, "name": f["name"], **f["target"]}
            for key, f in data.items()
            if f["target"] is not None
        ]
        return self.report_with(data, targets)


async def run_bench(dsn: str, schema: str | None, c: BenchConfig, log: TextIO) -> dict[str, Any]:
    """Measures everything ``c.runs`` times; returns the report ``a2pg bench --json`` prints."""
    base = schema or DEFAULT_SCHEMA
    await history.migrate(dsn, base)
    bench = Bench(c)
    ledger = await Ledger.connect(dsn)
    table = ceiling.scratch_name()
    stores: list[str] = []
    try:
        machine = await ledger.machine()
        machine["load_average_start"] = load_average()
        await ceiling.create_table(ledger.conn, base, table)
        for size in (c.history_base, c.history):
            name = history.schema_name(base, size)
            stores.append(name)
            log.write(f"loading {size:,} completed events into schema {name}...")
            log.flush()
            await history.migrate(dsn, name)
            await history.load(ledger, name, size, log)
            log.write(" done\n")
        for run in range(1, c.runs + 1):
            await _one_run(bench, dsn, base, table, stores, ledger, run, log)
        machine["load_average_runs"] = bench.loads
        machine["load_average_end"] = load_average()
    finally:
        await ceiling.drop_table(ledger.conn, base, table)
        for name in stores:
            await ledger.drop_schema(name)
        await ledger.close()
    return {
        "machine": machine,
        "config": dataclasses.asdict(c),
        "ceiling": {
            "shape": ceiling.SHAPE,
            "connections": bench.ns,
            "how": "N raw psycopg connections, not autocommit, one thread each, "
            "in min(N, CPU cores) processes, for ceiling_seconds",
            "n": f"the phase's connection count: P worker processes x pool_size {c.pool_size} "
            f"for drains, {APPEND_TASKS} tasks for appends",
        },
        **bench.report(),
    }


async def _one_run(
    bench: Bench,
    dsn: str,
    base: str,
    table: str,
    stores: list[str],
    ledger: Ledger,
    run: int,
    log: TextIO,
) -> None:
    """One run: the ceilings, then every phase, each figure recorded with its ratio."""
    c = bench.c
    tag = f"{table[-8:]}-{run}"

    def say(text: str) -> None:
        log.write(text)
        log.flush()

    began = time.monotonic()
    bench.loads.append(load_average())
    say(f"run {run}/{c.runs}: ceiling")
    ceilings: dict[int, float] = {}
    for n in bench.ns:
        say(f" N={n}...")
        ceilings[n] = await ceiling.measure(ledger.conn, dsn, base, table, n, c.ceiling_seconds)
        bench.add(f"ceiling_{n}", ceilings[n], ceilings)
    async with open_store(dsn, base) as store:
        where = Where(dsn, base, store, ledger)
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
        for listen, mode in ((True, "notify"), (False, "poll")):
            say(f" latency ({mode})...")
            samples = await phases.latency(where, c, tag, listen=listen)
            bench.add(f"wake_{mode}_p50", percentile(samples, 50) * 1000, ceilings)
            bench.add(f"wake_{mode}_p99", percentile(samples, 99) * 1000, ceilings)
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
    rates: list[float] = []
    for key, name, size in zip(
        ("history_base", "history_full"), stores, (c.history_base, c.history), strict=True
    ):
        say(f" history {size:,}...")
        async with open_store(dsn, name) as store:
            if run == 1:
                bench.checks.append(await history.check(store, size))
            result = await phases.drain(
                Where(dsn, name, store, ledger),
                label=f"run {run} drain, {size:,} done in store",
                prefix=f"bench-{tag}-history",
                events=c.history_events,
                sessions=c.sessions,
                processes=c.most_processes,
                concurrency=c.concurrency,
                pool_size=c.pool_size,
            )
        await history.forget(ledger, name, result.ids)
        bench.drained(key, result, ceilings)
        rates.append(result.rate)
    bench.add("history_ratio", rates[1] / rates[0], ceilings)
    say(f" done in {time.monotonic() - began:.0f} s\n")
