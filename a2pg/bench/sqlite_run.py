"""``a2pg bench --sqlite``: SqliteStore's figures beside the file system's write ceiling.

The same phases as on PostgreSQL (``phases.py``: drains on P worker processes, the
chain, appends, wake latency), on one SQLite file, each figure also given as a ratio to
the SQLite write ceiling measured in the same run (``sqlite_ceiling.py``) on a scratch
file in the same folder: drains against the ceiling of P writer processes, appends
(one process, one writer connection) against that of one. Wake latency is measured
twice: with the store's change signal (``PRAGMA data_version`` every 15 ms) and with
polling only. The PostgreSQL targets do not apply here; the history and memory phases
and ``pool_size`` are PostgreSQL's (not run).
"""

from __future__ import annotations

import dataclasses
import platform
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from ..sqlite import SqliteStore, upgrade
from ..sqlite.probe import SqliteProbe
from ..sqlite.streams import CHANGE_INTERVAL
from . import phases, sqlite_ceiling
from .config import APPEND_TASKS, BenchConfig
from .figures import FigureSet
from .ledger import load_average
from .phases import Where
from .stats import Figure, percentile


class SqliteBench(FigureSet):
    """The figures and checks of one ``a2pg bench --sqlite``, filled run by run."""

    def __init__(self, c: BenchConfig) -> None:
        most = c.most_processes
        self.ns = sorted({1, *c.process_counts})
        change = f"{CHANGE_INTERVAL * 1000:g} ms"
        figures = [
            Figure(f"ceiling_{n}", f"write ceiling, {n} writer processes", "commits/s")
            for n in self.ns
        ]
        figures += [Figure(f"drain_p{p}", f"drain, P={p}", "events/s", p) for p in c.process_counts]
        figures += [
            Figure("chain", f"chain to a lane, P={most}", "completions/s", most),
            Figure("append_single", f"append, single ({APPEND_TASKS} tasks)", "events/s", 1),
            Figure("append_batch", f"append, batches of {c.batch_size}", "events/s", 1),
            Figure("wake_change_p50", f"wake latency, change signal every {change}, p50", "ms"),
            Figure("wake_change_p99", f"wake latency, change signal every {change}, p99", "ms"),
            Figure("wake_poll_p50", f"wake latency, polling {c.poll_interval:g}s, p50", "ms"),
            Figure("wake_poll_p99", f"wake latency, polling {c.poll_interval:g}s, p99", "ms"),
        ]
        super().__init__(c, figures)

    def report(self) -> dict[str, Any]:
        data = self.figures_json()
        for figure in data.values():
            figure["target"] = None  # the targets are PostgreSQL's
        return self.report_with(data, [])


def machine(synchronous: str) -> dict[str, Any]:
    import os

    return {
        "cpu_cores": os.cpu_count(),
        "sqlite": sqlite3.sqlite_version,
        "journal_mode": "wal",
        "synchronous": synchronous,
        "python": platform.python_version(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }


async def run_sqlite_bench(path: Path, c: BenchConfig, log: TextIO) -> dict[str, Any]:
    """Measures everything ``c.runs`` times on the file ``path`` (migrated first; its
    sessions stay behind), with a scratch ceiling file beside it (removed at the end);
    returns the report ``a2pg bench --sqlite --json`` prints."""
    scratch = path.with_name(f"{path.stem}-ceiling.db")
    upgrade(path)
    sqlite_ceiling.create(scratch)
    bench = SqliteBench(c)
    data_machine = machine("normal")
    data_machine["load_average_start"] = load_average()
    probe = await SqliteProbe.connect(path)
    try:
        for run in range(1, c.runs + 1):
            await _one_run(bench, path, scratch, probe, run, log)
    finally:
        await probe.close()
        for name in (scratch, *(scratch.with_name(scratch.name + s) for s in ("-wal", "-shm"))):
            name.unlink(missing_ok=True)
    data_machine["load_average_runs"] = bench.loads
    data_machine["load_average_end"] = load_average()
    return {
        "machine": data_machine,
        "config": dataclasses.asdict(c),
        "ceiling": {
            "shape": sqlite_ceiling.SHAPE,
            "connections": bench.ns,
            "how": "N processes, one connection each, on a scratch file beside the database, "
            "for ceiling_seconds",
            "n": "the phase's writer processes: P for drains, 1 for appends (one process)",
        },
        **bench.report(),
    }


async def _one_run(
    bench: SqliteBench, path: Path, scratch: Path, probe: SqliteProbe, run: int, log: TextIO
) -> None:
    c = bench.c
    tag = f"{int(time.time()) % 100000}-{run}"

    def say(text: str) -> None:
        log.write(text)
        log.flush()

    began = time.monotonic()
    bench.loads.append(load_average())
    say(f"run {run}/{c.runs}: ceiling")
    ceilings: dict[int, float] = {}
    for n in bench.ns:
        say(f" N={n}...")
        ceilings[n] = await sqlite_ceiling.measure(scratch, n, c.ceiling_seconds)
        bench.add(f"ceiling_{n}", ceilings[n], ceilings)
    store = await SqliteStore.open(path)
    try:
        where = Where(str(path), "", store, probe, sqlite=True)
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
        for listen, mode in ((True, "change"), (False, "poll")):
            say(f" latency ({mode})...")
            samples = await phases.latency(where, c, tag, listen=listen)
            bench.add(f"wake_{mode}_p50", percentile(samples, 50) * 1000, ceilings)
            bench.add(f"wake_{mode}_p99", percentile(samples, 99) * 1000, ceilings)
    finally:
        await store.close()
    say(f" done in {time.monotonic() - began:.0f} s\n")
