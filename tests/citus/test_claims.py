"""``claim_any`` on Citus: the order Citus can keep, every shard group served, no head
claimed twice by concurrent claimers.

On one PostgreSQL ``claim_any`` takes the oldest ready heads of all sessions. On Citus
it goes round the shard groups (``a2pg/postgres/shards.py``): within a group the oldest
first, and each claim starts one group further than the last, so that no group starves.
These tests check that guarantee, in place of the global order of the conformance suite.
"""

from __future__ import annotations

import asyncio
import collections
import json
from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg import sql

from a2pg import A2Error, Claimed, Completed, Completion, Head, NewEvent, Superseded, Target
from a2pg.ids import FakeClock
from a2pg.postgres import PostgresStore, migrate
from a2pg.postgres.backend import CLAIM_NODES_ENV, open_store

pytestmark = [pytest.mark.citus, pytest.mark.postgres]

SHARDS = 4


@pytest.fixture
async def schema(citus_dsn: str, own_schema: str) -> str:
    migrate.upgrade(citus_dsn, own_schema, citus_shards=SHARDS)
    return own_schema


@pytest.fixture
async def store(citus_dsn: str, schema: str) -> AsyncIterator[PostgresStore]:
    opened = await PostgresStore.open(citus_dsn, schema=schema, clock=FakeClock())
    yield opened
    await opened.close()


def shard_of(dsn: str, schema: str, session_ids: list[str]) -> dict[str, int]:
    """Each session's shard of a2_sessions, from Citus itself."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        table = sql.Identifier(schema, "a2_sessions").as_string()
        return {
            s: int(row[0])
            for s in session_ids
            if (
                row := conn.execute(
                    "select pg_catalog.get_shard_id_for_distribution_column(%s, %s::text)",
                    (table, s),
                ).fetchone()
            )
            is not None
        }


async def test_the_store_knows_it_runs_on_citus_and_maps_every_shard_group(
    store: PostgresStore,
) -> None:
    assert store.distributed
    shards = store._db.shards
    assert shards is not None
    assert len(shards.groups) == SHARDS
    assert len({group.shards["a2_cursors"] for group in shards.groups}) == SHARDS


async def test_within_a_shard_group_the_oldest_heads_come_first_and_no_group_starves(
    citus_dsn: str, schema: str
) -> None:
    clock = FakeClock()
    store = await PostgresStore.open(citus_dsn, schema=schema, clock=clock)
    try:
        sessions = [f"s{n}" for n in range(24)]
        for session_id in sessions:  # one head each, each a second older than the next
            await store.append(session_id, [NewEvent("t", {}, targets=[Target("work")])])
            clock.advance(1)
        shard = shard_of(citus_dsn, schema, sessions)
        assert len(set(shard.values())) == SHARDS  # the test needs every group to hold some
        order = {session_id: n for n, session_id in enumerate(sessions)}
        claimed: list[str] = []
        for _ in range(len(sessions)):
            heads = await store.claim_any(holder="w", ttl=60, limit=1)
            assert len(heads) == 1
            claimed.append(heads[0].session_id)
        assert sorted(claimed) == sorted(sessions)
        # Per group, oldest first.
        by_group: dict[int, list[str]] = collections.defaultdict(list)
        for session_id in claimed:
            by_group[shard[session_id]].append(session_id)
        for group in by_group.values():
            assert group == sorted(group, key=order.__getitem__)
        # Every group served within each round of SHARDS claims while it holds work.
        first_rounds = claimed[:SHARDS]
        assert len({shard[s] for s in first_rounds}) == SHARDS
    finally:
        await store.close()


async def test_a_claim_fills_its_limit_from_the_next_groups(store: PostgresStore) -> None:
    sessions = [f"fill{n}" for n in range(12)]
    for session_id in sessions:
        await store.append(session_id, [NewEvent("t", {}, targets=[Target("work")])])
    heads = await store.claim_any(holder="w", ttl=60, limit=12)
    assert sorted(h.session_id for h in heads) == sorted(sessions)
    assert await store.claim_any(holder="w", ttl=60, limit=12) == []


async def test_concurrent_claimers_never_take_one_head_twice(citus_dsn: str, schema: str) -> None:
    writer = await PostgresStore.open(citus_dsn, schema=schema)
    claimers = [await PostgresStore.open(citus_dsn, schema=schema) for _ in range(4)]
    try:
        for n in range(60):
            events = [NewEvent("t", {"k": k}, targets=[Target("work")]) for k in range(5)]
            await writer.append(f"c{n}", events)
        taken: collections.Counter[tuple[str, int]] = collections.Counter()

        async def drain(store: PostgresStore, name: str) -> None:
            while True:
                heads = await store.claim_any(holder=name, ttl=60, limit=7)
                if not heads:
                    return
                for head in heads:
                    taken[(head.session_id, head.index)] += 1

        await asyncio.gather(*(drain(s, f"w{i}") for i, s in enumerate(claimers)))
        assert len(taken) == 300
        assert max(taken.values()) == 1
    finally:
        for store in (writer, *claimers):
            await store.close()


async def test_a_cycle_completes_on_the_node_of_the_group_that_claimed_and_judges_stale_ones(
    citus_dsn: str, schema: str
) -> None:
    """A worker's cycle completes the heads a claim took from a shard group in that group's
    claim statement, on its node: like one PostgreSQL's, it needs no session lock, so a
    lock held on the session row (through the coordinator) does not hold it up; the
    coordinator's path would wait on it. A completion of an attempt whose lease lapsed
    and was claimed again misses its fence there: nothing is written, and it is judged
    through the coordinator (superseded), the head left with its new attempt."""
    clock = FakeClock()
    store = await PostgresStore.open(citus_dsn, schema=schema, clock=clock)
    try:
        for session_id in ("n1", "n2"):
            await store.append(session_id, [NewEvent("t", {}, targets=[Target("work")])])
        heads = {h.session_id: h for h in await store.claim_any(holder="w", ttl=5, limit=2)}
        assert set(heads) == {"n1", "n2"}
        shards = store._db.shards
        assert shards is not None and shards.group_of("n1") is not None

        def completion(head: Head) -> Completion:
            return Completion(head.session_id, head.consumer, head.lane, head.index, head.attempt)

        table = sql.Identifier(schema, "a2_sessions")
        async with await psycopg.AsyncConnection.connect(citus_dsn) as holder:
            await holder.execute(
                sql.SQL("select from {} where session_id = 'n1' for update").format(table)
            )
            async with asyncio.timeout(10):  # the coordinator's path would wait for the lock
                done = await store.complete_and_claim(
                    [completion(heads["n1"])], holder="w", ttl=5, limit=1
                )
            await holder.rollback()
        assert done.completed == [Completed([])] and done.heads == []
        clock.advance(6)  # both leases lapse: n1's head is done, n2's is taken at attempt 2
        [again] = await store.claim_any(holder="other", ttl=60, limit=2)
        assert (again.session_id, again.attempt) == ("n2", 2)
        stale = await store.complete_and_claim(
            [completion(heads["n2"])], holder="w", ttl=5, limit=1
        )
        assert [type(r) for r in stale.completed] == [Superseded]
        [cursor] = await store.cursors("n2")
        assert cursor.head == again.index and cursor.dispatch.attempt_count == 2
    finally:
        await store.close()


async def test_a_store_told_its_claim_nodes_claims_from_their_shard_groups_alone(
    citus_dsn: str, schema: str, store: PostgresStore
) -> None:
    """A worker beside a node (``claim_nodes``) claims from that node's shards only; the
    heads of the other node stay for the workers there."""
    shards = store._db.shards
    assert shards is not None
    nodes = sorted({group.node for group in shards.groups})
    assert len(nodes) == 2  # the test cluster's two worker nodes both hold groups
    (host, port), other = nodes[0], nodes[1]
    sessions = [f"cn{n}" for n in range(16)]
    for session_id in sessions:
        await store.append(session_id, [NewEvent("t", {}, targets=[Target("work")])])
    node_of = {g.shards["a2_sessions"]: g.node for g in shards.groups}
    placed = {s: node_of[shard] for s, shard in shard_of(citus_dsn, schema, sessions).items()}
    assert set(placed.values()) == {(host, port), other}
    local = await PostgresStore.open(citus_dsn, schema=schema, claim_nodes=f"{host}:{port}")
    try:
        heads = await local.claim_any(holder="local", ttl=60, limit=16)
        assert {h.session_id for h in heads} == {s for s, n in placed.items() if n == (host, port)}
        assert await local.claim_any(holder="local", ttl=60, limit=16) == []
    finally:
        await local.close()
    rest = await store.claim_any(holder="any", ttl=60, limit=16)
    assert {h.session_id for h in rest} == {s for s, n in placed.items() if n == other}


@pytest.mark.parametrize(
    ("claim_nodes", "said"),
    [
        ("127.0.0.1", "claim_nodes must be host:port pairs, comma-separated"),
        ("127.0.0.1:1", "claim_nodes names no node holding a shard of schema"),
    ],
)
async def test_claim_nodes_that_name_nothing_claimable_are_refused(
    citus_dsn: str, schema: str, claim_nodes: str, said: str
) -> None:
    with pytest.raises(A2Error, match=said) as raised:
        await PostgresStore.open(citus_dsn, schema=schema, claim_nodes=claim_nodes)
    assert raised.value.code == "INVALID_ARGUMENT"


async def test_the_cli_takes_claim_nodes_from_the_environment(
    citus_dsn: str, schema: str, store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    shards = store._db.shards
    assert shards is not None
    host, port = shards.groups[0].node
    monkeypatch.setenv(CLAIM_NODES_ENV, f"{host}:{port}")
    async with open_store(citus_dsn, schema) as opened:
        assert opened._db.shards is not None
        assert opened._db.shards.nodes == frozenset({(host, port)})
        assert {g.node for g in opened._db.shards.claimable} == {(host, port)}


async def test_a_stale_completion_of_a_group_reached_with_no_room_left_is_still_judged(
    citus_dsn: str, schema: str
) -> None:
    """Two groups' completions in one cycle, the first group's claim filling the limit:
    the second's statement claims nothing (its pick's LIMIT is 0), and its fence must
    still be checked (the statement's one-time filter, outside the pick): a stale
    completion there is judged superseded, not passed as done."""
    clock = FakeClock()
    store = await PostgresStore.open(citus_dsn, schema=schema, clock=clock)
    try:
        shards = store._db.shards
        assert shards is not None
        candidates = [f"room{n}" for n in range(32)]
        placed = shard_of(citus_dsn, schema, candidates)
        index_of = {g.shards["a2_sessions"]: g.index for g in shards.groups}
        by_group: dict[int, list[str]] = collections.defaultdict(list)
        for session_id in candidates:
            by_group[index_of[placed[session_id]]].append(session_id)
        low, high = sorted(g for g, s in by_group.items() if len(s) >= 2)[:2]
        fresh_session, spare_session = by_group[low][:2]
        stale_session = by_group[high][0]
        for session_id in (fresh_session, stale_session):
            await store.append(session_id, [NewEvent("t", {}, targets=[Target("work")])])
        held = {h.session_id: h for h in await store.claim_any(holder="w", ttl=5, limit=10)}
        assert set(held) == {fresh_session, stale_session}
        clock.advance(6)  # both leases lapse; the stale session's head is claimed again
        fresh = held[fresh_session]
        renewed = await store.claim_available(fresh_session, holder="w", ttl=60)
        assert isinstance(renewed, Claimed)
        fresh = renewed.heads[0]
        [again] = await store.claim_any(holder="other", ttl=60, limit=10)
        assert again.session_id == stale_session and again.attempt == 2
        await store.append(spare_session, [NewEvent("t", {}, targets=[Target("work")])])
        # The low group's statement completes `fresh` and claims the spare head (the
        # limit); the high group has no room left.
        result = await store.complete_and_claim(
            [
                Completion(fresh.session_id, fresh.consumer, None, fresh.index, fresh.attempt),
                Completion(stale_session, "work", None, held[stale_session].index, 1),
            ],
            holder="w",
            ttl=60,
            limit=1,
        )
        assert [type(r) for r in result.completed] == [Completed, Superseded]
        assert [h.session_id for h in result.heads] == [spare_session]
        [cursor] = await store.cursors(stale_session)
        assert cursor.dispatch.attempt_count == 2 and cursor.head == again.index
    finally:
        await store.close()


async def test_a_wakeup_names_its_shard_and_the_next_claim_reaches_that_group_second(
    citus_dsn: str, schema: str
) -> None:
    writer = await PostgresStore.open(citus_dsn, schema=schema)
    claimer: PostgresStore | None = None
    try:
        sessions = [f"w{n}" for n in range(24)]
        shard = shard_of(citus_dsn, schema, sessions)
        assert writer._db.shards is not None
        group = {s: g.index for g in writer._db.shards.groups for s in sessions
                 if g.shards["a2_sessions"] == shard[s]}  # fmt: skip
        assert set(group.values()) == set(range(SHARDS))
        # A fresh store's claim starts at group 0, left empty here, and would go on to
        # group 1, which holds older heads; the wakeup names the last group.
        older = [s for s in sessions if group[s] in (1, 2)]
        woken = next(s for s in sessions if group[s] == SHARDS - 1)
        for session_id in older:
            await writer.append(session_id, [NewEvent("t", {}, targets=[Target("work")])])
        claimer = await PostgresStore.open(citus_dsn, schema=schema)
        shards = claimer._db.shards
        assert shards is not None
        wakeups = claimer.wakeups()  # the listener runs while someone waits for work
        await asyncio.wait_for(claimer._listener.connected.wait(), 10)
        with psycopg.connect(citus_dsn, autocommit=True) as listening:
            listening.execute(sql.SQL("listen {}").format(sql.Identifier(claimer._db.channel)))
            await writer.append(woken, [NewEvent("t", {}, targets=[Target("work")])])
            heard = [json.loads(n.payload) for n in listening.notifies(timeout=10, stop_after=1)]
        assert [(p["session_id"], p["shard"]) for p in heard] == [(woken, shard[woken])]
        for _ in range(100):
            if shards.woken():
                break
            await asyncio.sleep(0.1)
        assert shards.woken() == [SHARDS - 1]
        await wakeups.aclose()
        [head] = await claimer.claim_any(holder="w", ttl=60, limit=1)
        assert head.session_id == woken
        assert shards.woken() == []
        # The wake taken, the rotation goes on: one group further per claim.
        [head] = await claimer.claim_any(holder="w", ttl=60, limit=1)
        assert group[head.session_id] == 1
    finally:
        await writer.close()
        if claimer is not None:
            await claimer.close()


async def test_a_group_notified_without_end_never_starves_the_others(
    citus_dsn: str, schema: str
) -> None:
    store = await PostgresStore.open(citus_dsn, schema=schema)
    try:
        shards = store._db.shards
        assert shards is not None
        sessions = [f"n{n}" for n in range(24)]
        shard = shard_of(citus_dsn, schema, sessions)
        group = {s: g.index for g in shards.groups for s in sessions
                 if g.shards["a2_sessions"] == shard[s]}  # fmt: skip
        assert set(group.values()) == set(range(SHARDS))
        for session_id in sessions:  # 3 heads each: every group holds more than a round
            events = [NewEvent("t", {"k": k}, targets=[Target("work")]) for k in range(3)]
            await store.append(session_id, events)
        noisy = shards.groups[2].shards["a2_sessions"]
        served: list[int] = []
        for _ in range(SHARDS):
            shards.woke(noisy)  # as if a notification named group 2 before every claim
            [head] = await store.claim_any(holder="w", ttl=60, limit=1)
            served.append(group[head.session_id])
        assert served == list(range(SHARDS))  # each group its turn; 2 only on its own
    finally:
        await store.close()
