"""One session's one-statement writes on the node of its shard group (``a2pg/postgres/on_node.py``):
an append runs there, not through the coordinator, reads back through the coordinator,
wakes a listener of the coordinator, and falls back to the coordinator when the map is
stale."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from a2pg import NewEvent, Target
from a2pg.postgres import PostgresStore, migrate
from a2pg.postgres.shards import ShardGroup, Shards

from .test_claims import shard_of

pytestmark = [pytest.mark.citus, pytest.mark.postgres]


@pytest.fixture
async def schema(citus_dsn: str, own_schema: str) -> str:
    migrate.upgrade(citus_dsn, own_schema, citus_shards=4)
    return own_schema


@pytest.fixture
async def store(citus_dsn: str, schema: str) -> AsyncIterator[PostgresStore]:
    opened = await PostgresStore.open(citus_dsn, schema=schema)
    yield opened
    await opened.close()


def shards_of(store: PostgresStore) -> Shards:
    shards = store._db.shards
    assert shards is not None
    return shards


def job(n: int = 0) -> NewEvent:
    return NewEvent("job", {"n": n}, targets=[Target("work")])


def node_requests(shards: Shards) -> dict[tuple[str, int], int]:
    return {node: pool.get_stats().get("requests_num", 0) for node, pool in shards._pools.items()}


async def test_an_append_runs_on_the_node_of_its_group_and_reads_back_everywhere(
    citus_dsn: str, schema: str, store: PostgresStore
) -> None:
    shards = shards_of(store)
    [(session_id, shard)] = shard_of(citus_dsn, schema, ["on-node"]).items()
    group = shards.group_of_shard(shard)
    assert group is not None
    assert shards._pools == {}  # no claim ran: no node was reached yet
    appended = await store.append(session_id, [job(n) for n in range(3)])
    assert [e.index for e in appended.events] == [1, 2, 3]
    assert node_requests(shards) == {group.node: 1}  # one statement, on that node alone
    assert shards.shard_of(session_id) == shard  # Citus's answer, asked once
    other = await PostgresStore.open(citus_dsn, schema=schema)  # reads through the coordinator
    try:
        assert [e.payload for e in await other.read(session_id)] == [{"n": n} for n in range(3)]
        heads = await other.claim_any(holder="w", ttl=60, limit=10)
        assert sorted(h.index for h in heads) == [1, 2, 3]
        assert {h.session_id for h in heads} == {session_id}
    finally:
        await other.close()
    await store.append(session_id, [job(3)])
    assert node_requests(shards) == {group.node: 2}


async def test_an_append_on_a_node_wakes_a_listener_of_the_coordinator(
    citus_dsn: str, schema: str, store: PostgresStore
) -> None:
    listener = await PostgresStore.open(citus_dsn, schema=schema)
    wakeups = listener.wakeups()
    try:
        await asyncio.wait_for(listener._listener.connected.wait(), 10)
        await store.append("woken", [job()])
        assert shards_of(store)._pools  # it ran on a node

        async def woken() -> None:
            while await anext(wakeups) != "woken":  # None: "look", after (re)connecting
                pass

        await asyncio.wait_for(woken(), 10)
    finally:
        await wakeups.aclose()
        await listener.close()


async def test_a_stale_map_sends_the_append_through_the_coordinator_and_is_read_again(
    citus_dsn: str, schema: str, store: PostgresStore
) -> None:
    shards = shards_of(store)
    [(session_id, shard)] = shard_of(citus_dsn, schema, ["moved"]).items()
    group = shards.group_of_shard(shard)
    assert group is not None
    elsewhere = next(g.node for g in shards.groups if g.node != group.node)
    # As after a rebalance: the map says the group is on a node that has no such shard.
    shards.groups[group.index] = ShardGroup(group.index, elsewhere, group.shards)
    appended = await store.append(session_id, [job()])
    assert [e.index for e in appended.events] == [1]
    assert shards.groups[group.index].node == group.node  # the map was read again
    assert [e.index for e in await store.read(session_id)] == [1]
    await store.append(session_id, [job(1)])  # and the next one runs on the right node
    assert node_requests(shards)[group.node] == 1


async def test_a_claim_on_a_stale_map_reads_it_again_and_claims(
    citus_dsn: str, schema: str, store: PostgresStore
) -> None:
    shards = shards_of(store)
    sessions = [f"c{n}" for n in range(16)]
    for session_id in sessions:
        await store.append(session_id, [job()])
    group = shards.groups[0]
    elsewhere = next(g.node for g in shards.groups if g.node != group.node)
    shards.groups[0] = ShardGroup(0, elsewhere, group.shards)
    heads = await store.claim_any(holder="w", ttl=60, limit=100)
    assert sorted(h.session_id for h in heads) == sorted(sessions)
    assert shards.groups[0].node == group.node
