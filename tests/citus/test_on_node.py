"""One session's writes on the node of its shard group (``Database.write`` and
``write_one`` with a ``session``): an append, a completion, a failure run there, not
through the coordinator, read back through the coordinator, wake a listener of the
coordinator, and fall back to the coordinator when the map is stale or a statement
reads a table outside the group."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from a2pg import Claimed, NewEvent, Target
from a2pg.postgres import PostgresStore, migrate, queries
from a2pg.postgres.database import Finish, Tx
from a2pg.postgres.shards import ShardGroup, Shards, on_shards

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


def requests(store: PostgresStore) -> tuple[int, dict[tuple[str, int], int]]:
    """Connections asked of the coordinator's pool, and of each node's."""
    return store.pool.get_stats().get("requests_num", 0), node_requests(shards_of(store))


async def test_one_session_s_transactions_run_on_its_node(store: PostgresStore) -> None:
    shards = shards_of(store)
    appended = await store.append("tx", [job(), job(1)])
    group = await store._db.session_group("tx")
    assert group is not None
    claimed = await store.claim_available("tx", holder="w", ttl=60)
    assert isinstance(claimed, Claimed)
    first, second = claimed.heads
    before = requests(store)
    done = NewEvent("done", {}, id="done-1")  # targets nothing: no notification to send
    await store.complete_attempt(
        "tx", consumer="work", lane=None, index=first.index,
        attempt=first.dispatch.attempt_count, events=[done],
    )  # fmt: skip
    await store.fail_attempt(
        "tx", consumer="work", lane=None, index=second.index,
        attempt=second.dispatch.attempt_count, error="boom", max_failures=5, retry_after=60,
    )  # fmt: skip
    coordinator, nodes = requests(store)
    assert coordinator == before[0]  # nothing through the coordinator
    assert nodes[group.node] == before[1][group.node] + 2
    assert [e.type for e in await store.read("tx")] == ["job", "job", "done"]
    assert appended.events[0].index == 1
    [dead] = [c for c in await store.cursors("tx") if c.head == second.index]
    assert dead.dispatch.failure_count == 1
    assert shards.groups[group.index].node == group.node


async def test_a_transaction_on_a_stale_map_runs_through_the_coordinator(
    store: PostgresStore,
) -> None:
    shards = shards_of(store)
    await store.append("stale-tx", [job()])
    group = await store._db.session_group("stale-tx")
    assert group is not None
    claimed = await store.claim_available("stale-tx", holder="w", ttl=60)
    assert isinstance(claimed, Claimed)
    [head] = claimed.heads
    elsewhere = next(g.node for g in shards.groups if g.node != group.node)
    shards.groups[group.index] = ShardGroup(group.index, elsewhere, group.shards)
    await store.complete_attempt(
        "stale-tx", consumer="work", lane=None, index=head.index,
        attempt=head.dispatch.attempt_count, events=[NewEvent("done", {}, id="d")],
    )  # fmt: skip
    assert shards.groups[group.index].node == group.node  # the map was read again
    assert [e.type for e in await store.read("stale-tx")] == ["job", "done"]


async def test_a_transaction_reading_a_table_outside_the_group_runs_through_the_coordinator(
    store: PostgresStore,
) -> None:
    async def body(tx: Tx) -> Finish[list[str]]:
        cur = await tx.execute(tx.query("registered_consumers"), {})

        async def finish() -> list[str]:
            return [row["name"] for row in await cur.fetchall()]

        return finish

    await store._db.session_group("outside")  # Citus asked: what follows is the write
    before = requests(store)
    assert await store._db.write(body, idempotent=True, session="outside") == []
    assert requests(store)[0] == before[0] + 1  # run there, once (rolled back on the node)


def test_statements_of_a_group_refuse_those_that_name_a_table_outside_it() -> None:
    statements = queries.Statements(
        "a2", "citus", rewrite=lambda text: on_shards(text, "a2", {"a2_sessions": 102008})
    )
    assert b'"a2"."a2_sessions_102008"' in statements.query("lock_sessions")
    with pytest.raises(queries.OffGroup):
        statements.query("registered_consumers")
