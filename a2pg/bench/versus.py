"""``a2pg bench --versus pgqueuer``: a2pg and pgqueuer head to head on the same server.

Each system gets a fresh schema of its own on the same database (a2pg migrated,
pgqueuer installed), both dropped at the end. Rounds interleave the systems (a2pg
round 1, pgqueuer round 1, a2pg round 2, ...) on the same event loop (uvloop when
installed, as the CLI runs it); each round opens the system's connections, runs every
phase (``versus_phases``) with its tables emptied between phases, checks that every
job was done exactly once, and closes them. The report keeps, per figure and system,
every round's value, the median and the spread, and the median same-round ratio
a2pg / pgqueuer with its spread (``versus_stats``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.metadata
import uuid
from typing import Any, Protocol, TextIO

from . import history
from .ledger import Ledger, load_average
from .phases import Check
from .stats import percentile
from .sync import Sync, effective, synchronous_commit
from .versus_a2pg import A2pgSide
from .versus_config import (
    BATCH,
    CONCURRENCY,
    MIXED_BATCH,
    PRODUCER_POOL,
    PRODUCERS,
    SESSIONS,
    WAKE_RATE,
    WORKER_POOL,
    WORKERS,
    VersusConfig,
)
from .versus_phases import Side, one_round
from .versus_stats import A2PG, Figures


class OpenSide(Side, Protocol):
    async def open(self) -> None: ...

    async def close(self) -> None: ...


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def loop_name() -> str:
    """The running event loop, as the report names it: ``uvloop 0.x`` or ``asyncio``."""
    loop = asyncio.get_running_loop()
    if type(loop).__module__.startswith("uvloop"):
        return f"uvloop {_version('uvloop')}"
    return f"asyncio ({type(loop).__name__})"


def _schemas() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"a2pg_vs_{tag}", f"pgqueuer_vs_{tag}"


async def run_versus(
    dsn: str, other: str, c: VersusConfig, sync: Sync, log: TextIO
) -> dict[str, Any]:
    """Every round of a2pg against ``other``; returns the report ``--json`` prints."""
    from . import versus_pgqueuer

    figures = Figures(other)
    checks: list[Check] = []
    loads: list[list[float] | None] = []
    a2pg_schema, other_schema = _schemas()
    async with synchronous_commit(dsn, sync):  # before either system connects
        ledger = await Ledger.connect(dsn)
        try:
            machine = await ledger.machine()
            machine["synchronous_commit"] = await effective(dsn)
            machine |= {
                "loop": loop_name(),
                "a2pg": _version("a2pg"),
                "psycopg": _version("psycopg"),
                other: versus_pgqueuer.version(),
                "asyncpg": _version("asyncpg"),
                "load_average_start": load_average(),
            }
            _say(log, f"schemas {a2pg_schema} (a2pg) and {other_schema} ({other})...")
            await history.migrate(dsn, a2pg_schema)
            machine["synchronous_commit_asyncpg"] = await versus_pgqueuer.install(dsn, other_schema)
            _say(log, " ready\n")
            sides: list[OpenSide] = [
                A2pgSide(dsn, a2pg_schema, ledger),
                versus_pgqueuer.PgqueuerSide(dsn, other_schema, ledger),
            ]
            for number in range(1, c.rounds + 1):
                loads.append(load_average())
                for side in sides:
                    _say(log, f"round {number}/{c.rounds} {side.name}...")
                    await _round(side, c, f"round {number} {side.name}", figures, checks)
                    _say(log, " done\n")
            machine["load_average_rounds"] = loads
            machine["load_average_end"] = load_average()
        finally:
            for schema in (a2pg_schema, other_schema):
                await ledger.drop_schema(schema)
            await ledger.close()
    data = figures.as_json()
    return {
        "versus": other,
        "machine": machine,
        "config": _config(c, sync),
        "ok": all(check.ok for check in checks),
        "figures": data,
        "targets": [{"figure": key, "name": f["name"], **f["target"]} for key, f in data.items()],
        "checks": [dataclasses.asdict(check) for check in checks],
    }


async def _round(
    side: OpenSide, c: VersusConfig, label: str, figures: Figures, checks: list[Check]
) -> None:
    await side.open()
    try:
        measured = await one_round(side, c, label)
    finally:
        await side.close()
    for key, result in measured.items():
        checks.extend(result.checks)
        if key == "wake":
            figures.add("wake_p50", side.name, percentile(result.samples, 50) * 1000)
            figures.add("wake_p99", side.name, percentile(result.samples, 99) * 1000)
        else:
            figures.add(key, side.name, result.value)


def _config(c: VersusConfig, sync: Sync) -> dict[str, Any]:
    from .versus_pgqueuer import BATCH_SIZE, MAX_IN_FLIGHT, QM_POOL

    return {
        **dataclasses.asdict(c),
        "sync": sync,
        "producers": PRODUCERS,
        "batch": BATCH,
        "mixed_batch": MIXED_BATCH,
        "workers": WORKERS,
        "wake_rate": WAKE_RATE,
        A2PG: {
            "job": 'NewEvent("bench.job", {"n": n}, targets=[Target("vs_job")])',
            "sessions": SESSIONS,
            "worker_concurrency": CONCURRENCY,
            "worker_store_pool": WORKER_POOL,
            "producer_store_pool": PRODUCER_POOL,
        },
        "pgqueuer": {
            "job": 'entrypoint "vs_job", payload str(n).encode()',
            "batch_size": BATCH_SIZE,
            "max_concurrent_tasks": MAX_IN_FLIGHT,
            "driver": f"AsyncpgPoolDriver, a pool of {QM_POOL} per QueueManager",
            "producer_pool": PRODUCER_POOL,
        },
    }


def _say(log: TextIO, text: str) -> None:
    log.write(text)
    log.flush()
