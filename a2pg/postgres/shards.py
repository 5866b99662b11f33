"""On Citus, the claim of the oldest ready heads, run shard group by shard group where
each shard group is.

``claim_any`` picks the oldest ready heads of every session with ``FOR UPDATE SKIP
LOCKED``, which Citus does not run across shards. Each session's rows sit in one shard
group (``a2pg/postgres/citus.py``), and a shard is a plain PostgreSQL table on the node
that holds it: the store runs the very statement of plain PostgreSQL
(``complete_and_claim`` with nothing completed), its tables named as the shard group's
(``a2_cursors_102008``), on that node, through a pool of its own per node.

The order Citus can keep is per shard group: within one, the oldest ready heads first,
as on one PostgreSQL; across them, a claim goes round the groups from where the last
one started plus one, taking what each holds until it has its limit, so every group is
served first in turn and none starves; a group a notification named (its payload's
``shard``, ``Shards.woke``) comes second, before the rest. The map of groups to nodes
is read from Citus's catalog at open and again when a node refuses a shard (it moved:
a rebalance).
"""

from __future__ import annotations

import re
import select
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import errors as pg
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool

from ..errors import invalid
from . import queries
from .queries import Positional

SHARDED = ("a2_sessions", "a2_events", "a2_cursors", "a2_attempts", "a2_snapshot_pins",
           "a2_snapshot_history", "a2_lane_events")  # fmt: skip
"""The distributed tables the statements run on a node read or write (co-located: one
shard of each per group)."""
REFERENCE = ("a2_consumer_pauses",)
"""The reference tables it reads: one shard, copied to every node."""

MAP_SQL = """
select t.relname::text, s.shardid, s.shardminvalue::bigint, n.nodename::text, n.nodeport
  from pg_catalog.pg_dist_shard s
  join pg_catalog.pg_class t on t.oid = s.logicalrelid
  join pg_catalog.pg_namespace ns on ns.oid = t.relnamespace
  join pg_catalog.pg_dist_placement p on p.shardid = s.shardid
  join pg_catalog.pg_dist_node n on n.groupid = p.groupid
 where ns.nspname = %(schema)s and t.relname = any(%(tables)s)
   and n.isactive and n.noderole = 'primary'
 order by s.shardminvalue::bigint nulls first, n.nodename, n.nodeport
"""
"""Each shard of the claim's tables and the node holding it (a reference table's shard has
no hash range, and a placement on every node)."""

Node = tuple[str, int]
SESSIONS_KEPT = 100_000
"""Sessions whose shard group a store remembers (forgotten all at once past it)."""


@dataclass(frozen=True, slots=True)
class ShardGroup:
    """The co-located shards of one hash range, on one node."""

    index: int
    node: Node
    shards: Mapping[str, int]
    """Table -> shard id, the reference tables' included (their placement on ``node``)."""


def groups_of(rows: Sequence[tuple[Any, ...]]) -> list[ShardGroup]:
    """The shard groups of :data:`MAP_SQL`'s rows, in hash order."""
    ranges: dict[int, dict[str, int]] = {}
    nodes: dict[int, Node] = {}
    reference: dict[Node, dict[str, int]] = {}
    for table, shard, low, host, port in rows:
        node = (str(host), int(port))
        if table in REFERENCE:
            reference.setdefault(node, {})[str(table)] = int(shard)
            continue
        ranges.setdefault(int(low), {})[str(table)] = int(shard)
        if table == "a2_sessions":
            nodes[int(low)] = node
    groups = []
    for index, low in enumerate(sorted(ranges)):
        node = nodes[low]
        shards = {**ranges[low], **reference.get(node, {})}
        missing = set(SHARDED + REFERENCE) - set(shards)
        if missing:
            raise RuntimeError(f"Citus's catalog has no shard of {sorted(missing)} for {node}")
        groups.append(ShardGroup(index, node, shards))
    return groups


def on_shards(
    rendered: bytes, schema: str, shards: Mapping[str, int], *, positional: bool = False
) -> bytes:
    """``rendered`` (a statement of ``schema``; ``positional``: its ``Positional`` text,
    where a % of the schema's name is no longer doubled) with each table named as its
    shard."""
    name = sql.Identifier(schema).as_bytes(None)
    quoted = re.escape(name if positional else name.replace(b"%", b"%%"))

    def shard(match: re.Match[bytes]) -> bytes:
        table = match.group(2).decode()
        found = shards.get(table)
        if found is None:
            raise KeyError(f"no shard of {table} in the shard group")
        return match.group(1) + b"." + sql.Identifier(f"{table}_{found}").as_bytes(None)

    return re.sub(rb"(" + quoted + rb")\.(a2_\w+)", shard, rendered)


class Shards:
    """The shard groups of one schema on Citus and a pool per node that holds any."""

    def __init__(
        self,
        schema: str,
        conninfo: str,
        kwargs: Mapping[str, Any],
        nodes: frozenset[Node] | None = None,
    ) -> None:
        self.schema = schema
        self.sessions_table = f"{sql.Identifier(schema).as_string(None)}.a2_sessions"
        """``a2_sessions`` as Citus's functions take it (a regclass's text)."""
        self.nodes = nodes
        """The nodes whose groups this store claims from (``claim_nodes``); None: all."""
        self._conninfo = conninfo
        self._kwargs = dict(kwargs)
        self.groups: list[ShardGroup] = []
        self._pools: dict[Node, AsyncConnectionPool[Any]] = {}
        self._texts: dict[tuple[int, int], Positional] = {}
        self._statements: dict[int, queries.Statements] = {}
        self._on_group: dict[tuple[int, str, int | None], Positional] = {}
        self._next = 0
        self._sessions: dict[str, int] = {}
        """Session id -> its ``a2_sessions`` shard: the sessions claims came back from,
        and those Citus was asked of (``Database.session_group``)."""
        self._by_shard: dict[int, int] = {}
        self._woken: dict[int, None] = {}
        """Claimable groups a notification named since a claim last ran there, in order."""

    async def load(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Reads the map of shard groups to nodes (the coordinator's catalog)."""
        cur = conn.cursor(row_factory=psycopg.rows.tuple_row)
        await cur.execute(MAP_SQL, {"schema": self.schema, "tables": [*SHARDED, *REFERENCE]})
        self.groups = groups_of(await cur.fetchall())
        self._by_shard = {group.shards["a2_sessions"]: group.index for group in self.groups}
        self._texts.clear()
        self._statements.clear()
        self._on_group.clear()
        self._woken.clear()

    def saw(self, group: ShardGroup, rows: Sequence[Mapping[str, Any]]) -> None:
        """Notes the sessions of heads claimed in ``group``: their completions can go there."""
        shard = group.shards["a2_sessions"]
        for row in rows:
            self.remember(row["session_id"], shard)

    def group_of_shard(self, shard: int) -> ShardGroup | None:
        """The group of an ``a2_sessions`` shard, if the map has it."""
        index = self._by_shard.get(shard)
        return None if index is None else self.groups[index]

    def remember(self, session_id: str, shard: int) -> None:
        """Notes ``session_id``'s ``a2_sessions`` shard (it never changes)."""
        if len(self._sessions) > SESSIONS_KEPT:
            self._sessions.clear()
        self._sessions[session_id] = shard

    def shard_of(self, session_id: str) -> int | None:
        """``session_id``'s ``a2_sessions`` shard, if this store has seen it."""
        return self._sessions.get(session_id)

    def statements(self, group: ShardGroup) -> queries.Statements:
        """The schema's statements (Citus's variants) on ``group``'s shards: what one
        session's transaction runs on the group's node (``Database.write``)."""
        found = self._statements.get(group.index)
        if found is None:
            shards = group.shards
            found = queries.Statements(
                self.schema, "citus", rewrite=lambda text: on_shards(text, self.schema, shards)
            )
            self._statements[group.index] = found
        return found

    def on_group(self, group: ShardGroup, statement: Positional) -> Positional:
        """``statement`` (one of the schema's, Citus's variant) on ``group``'s shards."""
        key = (group.index, statement.statement, statement.limit)
        found = self._on_group.get(key)
        if found is None:
            text = on_shards(statement.text, self.schema, group.shards, positional=True)
            found = Positional(text, statement.names, statement.statement, statement.limit)
            if len(self._on_group) < 4096:
                self._on_group[key] = found
        return found

    def woke(self, shard: int) -> None:
        """Notes a notification naming ``shard`` (an ``a2_sessions`` shard): the next claim
        runs in its group right after the group its turn starts at, when this store
        claims there."""
        index = self._by_shard.get(shard)
        if index is not None and (self.nodes is None or self.groups[index].node in self.nodes):
            self._woken[index] = None

    def woken(self) -> list[int]:
        """The groups notifications named, oldest first."""
        return list(self._woken)

    def served(self, index: int) -> None:
        """A claim ran in group ``index``: what woke it is taken."""
        self._woken.pop(index, None)

    def group_of(self, session_id: str) -> int | None:
        """The index of the group holding ``session_id``, if this store knows its shard (a
        claim took heads there, or an append asked Citus; a shard id outlives a move,
        the map says where it is now)."""
        shard = self._sessions.get(session_id)
        return None if shard is None else self._by_shard.get(shard)

    @property
    def claimable(self) -> list[ShardGroup]:
        """The groups claims go round: those on ``nodes``, or all."""
        if self.nodes is None:
            return self.groups
        return [group for group in self.groups if group.node in self.nodes]

    def start(self) -> int:
        """Where the next claim starts in :attr:`claimable`: one group further than the
        last one did."""
        start = self._next % max(1, len(self.claimable))
        self._next = start + 1
        return start

    def statement(self, group: ShardGroup, limit: int) -> Positional:
        """``complete_and_claim`` of plain PostgreSQL on ``group``'s shards."""
        key = (group.index, limit)
        found = self._texts.get(key)
        if found is None:
            rendered = queries.statements(self.schema).query("complete_and_claim", limit=limit)
            found = Positional.of(on_shards(rendered, self.schema, group.shards),
                                  "complete_and_claim", limit)  # fmt: skip
            if len(self._texts) < 4096:
                self._texts[key] = found
        return found

    async def pool(self, node: Node) -> AsyncConnectionPool[Any]:
        """The pool of connections to ``node`` (made and opened on first use)."""
        pool = self._pools.get(node)
        if pool is None:
            host, port = node
            pool = AsyncConnectionPool(
                make_conninfo(self._conninfo, host=host, port=port),
                min_size=0,
                max_size=4,
                kwargs=self._kwargs,
                open=False,
                name=f"a2pg[{self.schema}]@{host}:{port}",
            )
            self._pools[node] = pool
            await pool.open(wait=False)
        return pool

    async def close(self) -> None:
        for pool in self._pools.values():
            await pool.close()
        self._pools.clear()


def closed_by_server(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Whether the server closed an idle connection of a node pool (the node restarted,
    its backend was terminated), seen at no round trip: its end of file (or the
    server's last message) waits to be read. These pools never LISTEN, so an idle
    connection of theirs has nothing else to read."""
    fd = conn.pgconn.socket
    if hasattr(select, "poll"):  # select.select refuses descriptors past FD_SETSIZE
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)
    return bool(readable)


@asynccontextmanager
async def live_connection(
    pool: AsyncConnectionPool[Any],
) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A connection of a node pool, past the idle ones the server closed: each is closed
    and handed back (the pool replaces it), so that no statement is sent on it (a claim
    is not retried after a lost connection). Not psycopg_pool's ``check``, which sleeps
    a backoff (a second, then two...) after each connection that fails it."""
    conn = await pool.getconn()
    for _ in range(pool.max_size):
        if conn.closed or not closed_by_server(conn):
            break
        await conn.close()
        await pool.putconn(conn)
        conn = await pool.getconn()
    try:
        async with conn:
            yield conn
    finally:
        await pool.putconn(conn)


def parse_nodes(text: str, setting: str) -> frozenset[Node]:
    """``host:port,host:port`` (``claim_nodes``, ``A2PG_CLAIM_NODES``) as nodes."""
    nodes: set[Node] = set()
    for part in text.split(","):
        host, _, port = part.strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise invalid(f"{setting} must be host:port pairs, comma-separated: got {text!r}")
        nodes.add((host, int(port)))
    return frozenset(nodes)


def moved(exc: psycopg.Error) -> bool:
    """Whether a node refused a shard that is not there (any more): the map is stale."""
    return isinstance(exc, pg.UndefinedTable)
