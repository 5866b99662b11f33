"""``a2pg bench --citus``: the drain of ``--versus`` on Citus clusters of 1, 2 and 4 worker
nodes and on one PostgreSQL, with the CPU each server spent per head.

Every server is the embedded wheel's PostgreSQL on this machine (Citus installed into it,
``embedded_citus``), ``synchronous_commit = off`` so the CPU, not the disk, bounds the
work. Rounds interleave the setups (one PostgreSQL, then each cluster, per round); each
drain is the one of ``--versus`` (``versus_phases.drain``: a backlog of targeted events
over ``SESSIONS`` sessions, ``WORKERS`` a2pg workers in this process, every head checked
done exactly once), and the CPU of every server is read from ``/proc`` around it.

On one machine the nodes share its cores, so heads/s cannot grow with nodes: what this
can show is the work. Per head, a node's CPU falls as nodes are added (each holds fewer
shards), the coordinator's does not (completions go through it, claims do not), and the
sum against one PostgreSQL's is Citus's price. The projection turns the CPU per head
into what N machines would do, and is labelled as such.
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, TextIO

from psycopg import sql

from ..postgres import migrate
from ..postgres.embedded import EmbeddedPostgres
from ..postgres.embedded_citus import embedded_citus
from .errors import BenchFailed
from .ledger import Ledger, load_average
from .phases import Check
from .server_cpu import server_cpu
from .versus import loop_name
from .versus_a2pg import A2pgSide
from .versus_config import CONCURRENCY, SESSIONS, WORKERS
from .versus_phases import drain

SHARDS = 8
"""Shards of every cluster's tables: 2 per node at 4 nodes, all 8 on one at 1."""
SETTINGS = {"synchronous_commit": "off"}
PLAIN = "one PostgreSQL"
COORDINATOR = "coordinator"
SERVER = "server"

PLACEMENT = """
select n.nodeport, s.id
  from pg_catalog.unnest(%(ids)s::text[]) as s(id)
  join pg_catalog.pg_dist_placement p
    on p.shardid = pg_catalog.get_shard_id_for_distribution_column(%(table)s::regclass, s.id)
  join pg_catalog.pg_dist_node n on n.groupid = p.groupid
"""
"""The port of the node holding each session's shard group."""


@dataclass(frozen=True, slots=True)
class CitusConfig:
    """Sized so a full ``a2pg bench --citus`` takes a few minutes on 2 cores."""

    citus_rounds: int = field(
        default=3, metadata={"help": "interleaved rounds: one PostgreSQL, then each cluster"}
    )
    citus_heads: int = field(default=4_000, metadata={"help": "backlog heads of each drain"})
    citus_nodes: str = field(
        default="1,2,4", metadata={"help": "the clusters' worker node counts, comma-separated"}
    )

    def __post_init__(self) -> None:
        for name in ("citus_rounds", "citus_heads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.node_counts  # noqa: B018 (validates)

    @property
    def node_counts(self) -> tuple[int, ...]:
        try:
            counts = sorted({int(part) for part in self.citus_nodes.split(",") if part.strip()})
        except ValueError:
            counts = []
        if not counts or not all(1 <= n <= 16 for n in counts):
            raise ValueError(
                f"citus_nodes must be node counts from 1 to 16, comma-separated (1,2,4), "
                f"got {self.citus_nodes!r}"
            )
        return tuple(counts)


class ServerMeter:
    """CPU seconds of each server, and of this process, between ``start`` and ``stop``."""

    def __init__(self, servers: Mapping[str, EmbeddedPostgres]) -> None:
        self.pids = {name: _pid(server) for name, server in servers.items()}
        self.used: dict[str, float] = {}
        self.client = 0.0
        self._at: dict[str, float] = {}
        self._client_at = 0.0

    def start(self) -> None:
        self._at = {name: server_cpu(pid) for name, pid in self.pids.items()}
        self._client_at = time.process_time()

    def stop(self) -> None:
        self.used = {name: server_cpu(pid) - self._at[name] for name, pid in self.pids.items()}
        self.client = time.process_time() - self._client_at


def _pid(server: EmbeddedPostgres) -> int:
    pid = server.pid
    if pid is None:
        raise BenchFailed(f"the server on port {server.port} is not running")
    return pid


@dataclass(slots=True)
class Setup:
    """One PostgreSQL or one cluster: its servers by name, its schema and its drains."""

    name: str
    nodes: int  # worker nodes; 0 for one PostgreSQL
    dsn: str
    servers: dict[str, EmbeddedPostgres]
    schema: str
    rates: list[float] = field(default_factory=list)
    cpu: list[dict[str, float]] = field(default_factory=list)  # ms per head, per server
    client: list[float] = field(default_factory=list)  # ms per head
    shares: list[dict[str, float]] = field(default_factory=list)  # heads per node, share

    @property
    def node_names(self) -> list[str]:
        return [name for name in self.servers if name.startswith("node")]


async def _node_shares(
    ledger: Ledger, setup: Setup, sessions: Sequence[str], heads: int
) -> dict[str, float]:
    """Each node's share of the backlog (job ``n`` is in session ``n % SESSIONS``)."""
    ports = {server.port: name for name, server in setup.servers.items()}
    table = sql.Identifier(setup.schema, "a2_sessions").as_string()
    cur = await ledger.conn.execute(PLACEMENT, {"ids": list(sessions), "table": table})
    node_of = {str(session): ports.get(int(port), f"port {port}") for port, session in
               await cur.fetchall()}  # fmt: skip
    counts = dict.fromkeys(setup.node_names, 0)
    for index, session in enumerate(sessions):
        jobs = heads // SESSIONS + (1 if index < heads % SESSIONS else 0)
        name = node_of.get(session, "unplaced")
        counts[name] = counts.get(name, 0) + jobs
    return {name: count / heads for name, count in counts.items()}


async def _drain_once(
    setup: Setup, label: str, heads: int, ledger: Ledger, checks: list[Check]
) -> None:
    side = A2pgSide(setup.dsn, setup.schema, ledger)
    meter = ServerMeter(setup.servers)
    await side.open()
    try:
        if setup.nodes:
            side.phase(label)
            setup.shares.append(await _node_shares(ledger, setup, side.sessions, heads))
        measured = await drain(side, label, heads, meter)
    finally:
        await side.close()
    checks.extend(measured.checks)
    setup.rates.append(measured.value)
    setup.cpu.append({name: used * 1000 / heads for name, used in meter.used.items()})
    setup.client.append(meter.client * 1000 / heads)


def _summary(values: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _figures(setup: Setup, plain: Setup) -> dict[str, Any]:
    totals = [sum(round_.values()) for round_ in setup.cpu]
    plain_totals = [sum(round_.values()) for round_ in plain.cpu]
    per_server = {
        name: statistics.median(round_[name] for round_ in setup.cpu) for name in setup.servers
    }
    busiest = max(per_server.values())
    nodes = [per_server[name] for name in setup.node_names]
    return {
        "setup": setup.name,
        "worker_nodes": setup.nodes,
        "heads_per_s": _summary(setup.rates),
        "server_cpu_ms_per_head": _summary(totals),
        "cpu_ms_per_head": per_server,
        "client_cpu_ms_per_head": statistics.median(setup.client),
        "node_cpu_balance": max(nodes) / min(nodes) if nodes and min(nodes) > 0 else None,
        "heads_share": {
            name: statistics.median(share.get(name, 0.0) for share in setup.shares)
            for name in setup.node_names
        },
        "price_x_one_postgresql": _summary(
            [a / b for a, b in zip(totals, plain_totals, strict=True)]
        ),
        "projected_heads_per_s": 1000 / busiest if busiest > 0 else None,
    }


def _say(log: TextIO, text: str) -> None:
    log.write(text)
    log.flush()


async def _prepare(setup: Setup, log: TextIO) -> None:
    _say(log, f"{setup.name}: schema {setup.schema}...")
    shards = SHARDS if setup.nodes else None
    await asyncio.to_thread(migrate.upgrade, setup.dsn, setup.schema, citus_shards=shards)
    _say(log, " ready\n")


def _setups(stack: ExitStack, c: CitusConfig, log: TextIO) -> Iterator[Setup]:
    tag = uuid.uuid4().hex[:8]
    _say(log, "one PostgreSQL...")
    plain = stack.enter_context(_started(EmbeddedPostgres(SETTINGS)))
    _say(log, " started\n")
    yield Setup(PLAIN, 0, plain.dsn(), {SERVER: plain}, f"a2pg_citus_bench_{tag}")
    for count in c.node_counts:
        _say(log, f"Citus, coordinator and {count} worker node{'s' * (count > 1)}...")
        cluster = stack.enter_context(embedded_citus(count, SETTINGS))
        _say(log, " started\n")
        servers = {COORDINATOR: cluster.coordinator}
        servers |= {f"node {i}": node for i, node in enumerate(cluster.workers, 1)}
        name = f"Citus, {count} node{'s' * (count > 1)}"
        yield Setup(name, count, cluster.dsn(), servers, f"a2pg_citus_bench_{tag}")


class _started:
    """An embedded server started on entry and deleted on exit."""

    def __init__(self, server: EmbeddedPostgres) -> None:
        self.server = server

    def __enter__(self) -> EmbeddedPostgres:
        return self.server.start()

    def __exit__(self, *exc: object) -> None:
        self.server.stop(mode="immediate")
        self.server.cleanup()


async def run_citus_bench(c: CitusConfig, log: TextIO) -> dict[str, Any]:
    """Every round on every setup; returns the report ``--json`` prints."""
    checks: list[Check] = []
    loads: list[list[float] | None] = []
    with ExitStack() as stack:
        setups = list(_setups(stack, c, log))
        ledgers = {s.name: await Ledger.connect(s.dsn) for s in setups}
        try:
            machine = await ledgers[PLAIN].machine()
            cur = await ledgers[setups[-1].name].conn.execute(
                "select extversion from pg_catalog.pg_extension where extname = 'citus'"
            )
            row = await cur.fetchone()
            machine |= {"citus": row[0] if row else "unknown", "loop": loop_name(),
                        "load_average_start": load_average()}  # fmt: skip
            for setup in setups:
                await _prepare(setup, log)
            for number in range(1, c.citus_rounds + 1):
                loads.append(load_average())
                for setup in setups:
                    _say(log, f"round {number}/{c.citus_rounds} {setup.name}...")
                    label = f"round {number} {setup.name}"
                    await _drain_once(setup, label, c.citus_heads, ledgers[setup.name], checks)
                    _say(log, f" {setup.rates[-1]:,.0f} heads/s\n")
            machine["load_average_rounds"] = loads
            machine["load_average_end"] = load_average()
        finally:
            for ledger in ledgers.values():
                await ledger.close()
    plain = setups[0]
    return {
        "machine": machine,
        "config": {
            **dataclasses.asdict(c),
            "shards": SHARDS,
            "sessions": SESSIONS,
            "workers": WORKERS,
            "worker_concurrency": CONCURRENCY,
            "settings": SETTINGS,
        },
        "ok": all(check.ok for check in checks),
        "setups": [_figures(setup, plain) for setup in setups],
        "checks": [dataclasses.asdict(check) for check in checks],
    }
