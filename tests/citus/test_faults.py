"""Faults on Citus: a worker node crashed mid-drain, and two multi-session transactions
that would deadlock across nodes.

A crash must cost no head and complete none twice: the claims and completions it cut
short lapse and are re-claimed, and a lost completion's retry replays or is superseded.
Two batches of completions over the same sessions on different nodes, given in opposite
orders, must not deadlock: Citus would cancel one (its distributed deadlock detection),
so the store locks the sessions one at a time in sorted order.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import psycopg
import pytest
from psycopg import errors as pg
from psycopg import sql

from a2pg import Claimed, Completed, CompleteResult, Completion, Head, NewEvent, Superseded, Target
from a2pg.backends import classify
from a2pg.errors import A2Error
from a2pg.postgres import PostgresStore, migrate
from a2pg.worker.app import returned_event_id
from tests.citus_cluster import started_cluster

pytestmark = [pytest.mark.citus, pytest.mark.postgres]

SHARDS = 4
CONSUMER = "work"
TTL = 2.0
"""Leases short enough that a claim the crash cut short lapses well within the test."""
CLAIMERS = 4
LIMIT = 5
CRASH_AFTER = 20
"""Heads of the crashed node's sessions completed before it crashes."""
BACKOFF = 0.2
"""Seconds a claimer waits after an error (a node down) before it tries again."""
DRAIN_DEADLINE = 90.0
DEADLOCK_DEADLINE = 60.0
"""Bounds of the waits (so that nothing hangs), generous for a loaded 2-core machine:
the drain takes 10 to 25 s there, the 20 rounds of batches 6 to 25 s."""
Key = tuple[str, int]
"""A head: ``(session id, index)``."""


def node_ports(dsn: str, schema: str, session_ids: Sequence[str]) -> dict[str, int]:
    """Each session's worker node (its port), from Citus's placement of its shard."""
    table = sql.Identifier(schema, "a2_sessions").as_string()
    with psycopg.connect(dsn, autocommit=True) as conn:
        found: dict[str, int] = {}
        for session_id in session_ids:
            row = conn.execute(
                "select n.nodeport from pg_catalog.pg_dist_placement p"
                " join pg_catalog.pg_dist_node n on n.groupid = p.groupid"
                " where p.shardid ="
                " pg_catalog.get_shard_id_for_distribution_column(%s, %s::text)",
                (table, session_id),
            ).fetchone()
            assert row is not None
            found[session_id] = int(row[0])
        return found


def done_event(head: Head) -> NewEvent:
    """The handler's output: its id is the attempt's own (as the worker runtime gives), so
    a retried completion of one attempt replays, and two attempts' outputs differ."""
    payload = {"of": head.index, "attempt": head.attempt}
    return NewEvent("done", payload, id=returned_event_id(head, 0))


async def outputs(store: PostgresStore, session_ids: Sequence[str]) -> dict[Key, list[int]]:
    """The attempts whose ``done`` event is in the log, per ``(session, source index)``."""
    gate = asyncio.Semaphore(8)

    async def read(session_id: str) -> list[tuple[Key, int]]:
        async with gate:
            events = await store.read(session_id, types=["done"])
        payloads = [cast(dict[str, int], e.payload) for e in events]
        return [((session_id, p["of"]), p["attempt"]) for p in payloads]

    found: dict[Key, list[int]] = collections.defaultdict(list)
    for pairs in await asyncio.gather(*(read(s) for s in session_ids)):
        for key, attempt in pairs:
            found[key].append(attempt)
    return found


async def assert_all_idle(store: PostgresStore, session_ids: Sequence[str]) -> None:
    """No head left ready, claimed or dead-lettered: every cursor has moved past its event."""
    gate = asyncio.Semaphore(8)

    async def live(session_id: str) -> list[Any]:
        async with gate:
            return [c for c in await store.cursors(session_id) if c.head is not None]

    left = [c for cursors in await asyncio.gather(*(live(s) for s in session_ids)) for c in cursors]
    assert left == []


# --- a worker node crashed mid-drain -------------------------------------------------------


@pytest.fixture
def crash_cluster() -> Iterator[Any]:
    """A cluster of this test's own (coordinator and 2 workers): crashing a node of the
    session's cluster would disturb the other tests. Commits are synchronous, so what a
    node acknowledged survives its crash (the test cluster's default does not wait)."""
    yield from started_cluster(settings={"synchronous_commit": "on"})


@dataclass
class Drain:
    """What the claimers saw: the attempts the store answered ``Completed`` per head, how
    often a handler ran, the attempts given up, and the errors of the outage."""

    watched: frozenset[str]
    """The sessions on the node to crash: ``crash_now`` is set once ``CRASH_AFTER`` of
    their heads completed."""
    completed: dict[Key, set[int]] = field(default_factory=lambda: collections.defaultdict(set))
    runs: collections.Counter[Key] = field(default_factory=collections.Counter)
    given_up: list[Head] = field(default_factory=list)
    errors: collections.Counter[str] = field(default_factory=collections.Counter)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    crash_now: asyncio.Event = field(default_factory=asyncio.Event)

    def saw(self, exc: Exception) -> None:
        """Counts an error by type, SQLSTATE and how a2pg reads it (``classify``)."""
        classified = classify(exc)
        code = None if classified is None else classified.code
        sqlstate = getattr(exc, "sqlstate", None)
        self.errors[f"{type(exc).__module__}.{type(exc).__qualname__} {sqlstate} {code}"] += 1

    def complete(self, head: Head) -> None:
        self.completed[(head.session_id, head.index)].add(head.attempt)
        if sum(1 for s, _ in self.completed if s in self.watched) >= CRASH_AFTER:
            self.crash_now.set()


async def complete(store: PostgresStore, head: Head) -> CompleteResult:
    return await store.complete_attempt(
        head.session_id,
        consumer=head.consumer,
        lane=head.lane,
        index=head.index,
        attempt=head.attempt,
        events=[done_event(head)],
    )


async def settle(store: PostgresStore, head: Head, drain: Drain, *, patient: bool) -> None:
    """Completes ``head`` with its output. After an error the outcome of the try is
    unknown: a ``patient`` claimer tries again until the store answers (``Completed``,
    fresh or a replay of a try that did commit; or ``Superseded``: its lease lapsed and
    another attempt took the head); the others give the attempt up at once, as a worker
    that died would (its lease lapses, and another attempt takes the head)."""
    while True:
        try:
            result = await complete(store, head)
        except (A2Error, psycopg.Error) as exc:
            drain.saw(exc)
            if not patient:
                drain.given_up.append(head)
                return
            await asyncio.sleep(BACKOFF)
            continue
        if isinstance(result, Completed):
            drain.complete(head)
        return


async def claimer(store: PostgresStore, name: str, drain: Drain, *, patient: bool) -> None:
    """claim_any, run the handler on each head, complete: until the drain is over, through
    the outage (the store's errors are caught; anything else fails the test)."""
    while not drain.finished.is_set():
        try:
            heads = await store.claim_any(holder=name, ttl=TTL, limit=LIMIT)
        except (A2Error, psycopg.Error) as exc:
            drain.saw(exc)
            await asyncio.sleep(BACKOFF)
            continue
        if not heads:  # what is left is claimed elsewhere, or waits for its lease to lapse
            await asyncio.sleep(0.1)
            continue

        async def run(head: Head) -> None:
            drain.runs[(head.session_id, head.index)] += 1
            await asyncio.sleep(0.005)  # the handler's work: completions stay in flight
            await settle(store, head, drain, patient=patient)

        await asyncio.gather(*(run(head) for head in heads))


async def drained(store: PostgresStore) -> bool:
    """Whether the consumer has nothing left: none ready, held or backing off."""
    try:
        stats = await store.consumer_stats()
    except (A2Error, psycopg.Error):
        return False
    mine = [s for s in stats if s.consumer == CONSUMER]
    return all(s.ready == s.claimed == s.backing_off == 0 for s in mine)


async def test_a_worker_node_crashed_mid_drain_loses_no_head_and_completes_none_twice(
    crash_cluster: Any,
) -> None:
    """Catches: a claim or completion the crash cut short that never lapses (heads left
    held: the drain times out), a lost completion applied twice or a stale attempt's
    completion accepted beside another attempt's (two ``done`` events for a head, two
    attempts answered ``Completed``, a stale one answered ``Completed``), a head dropped
    (its cursor left live), and a store that does not recover once the node is back."""
    cluster = crash_cluster
    dsn: str = cluster.dsn()
    schema = "a2 faults"
    migrate.upgrade(dsn, schema, citus_shards=SHARDS)
    writer = await PostgresStore.open(dsn, schema=schema)
    claimers = [
        await PostgresStore.open(dsn, schema=schema, call_timeout=3.0) for _ in range(CLAIMERS)
    ]
    started = time.monotonic()
    try:
        sessions = [f"k{n}" for n in range(150)]
        gate = asyncio.Semaphore(8)

        async def append(session_id: str) -> None:
            events = [NewEvent("job", {"k": k}, targets=[Target(CONSUMER)]) for k in range(2)]
            async with gate:
                await writer.append(session_id, events)

        await asyncio.gather(*(append(s) for s in sessions))
        heads = {(s, index) for s in sessions for index in (1, 2)}
        ports = node_ports(dsn, schema, sessions)
        victim = cluster.nodes[1]
        on_victim = frozenset(s for s in sessions if ports[s] == victim.port)
        assert 0 < len(on_victim) < len(sessions)  # both workers hold heads
        # Heads of the node to crash claimed by a worker that dies with it: they must
        # lapse (their claims survive the restart) and be taken by another attempt.
        lost: list[Head] = []
        for session_id in sorted(on_victim)[:3]:
            claimed = await writer.claim_available(session_id, holder="lost", ttl=TTL)
            assert isinstance(claimed, Claimed)
            lost.extend(claimed.heads)

        drain = Drain(watched=on_victim)
        outage = {"down": 0.0, "up": 0.0}

        async def crash() -> None:
            await drain.crash_now.wait()
            outage["down"] = time.monotonic() - started
            outage["left"] = 2 * len(on_victim) - sum(s in on_victim for s, _ in drain.completed)
            await asyncio.to_thread(
                cluster._run, "pg_ctl", "-D", victim.data, "-m", "immediate", "-w", "stop"
            )
            assert cluster.pid(victim) is None
            await asyncio.sleep(2.0)
            await asyncio.to_thread(cluster._start, victim)
            outage["up"] = time.monotonic() - started
            while not await drained(writer):  # noqa: ASYNC110 - the database's state
                await asyncio.sleep(0.25)
            drain.finished.set()

        async with asyncio.timeout(DRAIN_DEADLINE):
            await asyncio.gather(
                crash(),
                *(
                    claimer(store, f"w{i}", drain, patient=i % 2 == 0)
                    for i, store in enumerate(claimers)
                ),
            )
        took = time.monotonic() - started
        print(
            f"\noutage {outage['down']:.1f}s-{outage['up']:.1f}s, drained at {took:.1f}s;"
            f" {len(on_victim)} of {len(sessions)} sessions on the crashed node;"
            f" attempts given up: {len(drain.given_up)};"
            f" heads whose handler ran twice or more: {sum(n > 1 for n in drain.runs.values())};"
            f" errors: {dict(drain.errors)}"
        )
        # The crash came mid-drain: the node still held heads to do. (The claimers may
        # see no error: a node pool's call waits for a connection through a short outage.)
        assert outage["left"] > 0
        async with asyncio.timeout(DRAIN_DEADLINE):
            # Every head's output is in the log exactly once, nothing left live...
            done = await outputs(writer, sessions)
            assert set(done) == heads
            assert {k: v for k, v in done.items() if len(v) != 1} == {}
            await assert_all_idle(writer, sessions)
            assert await writer.claim_any(holder="check", ttl=TTL, limit=LIMIT) == []
            # ...by the one attempt answered Completed, where one was.
            for key, attempts in drain.completed.items():
                assert attempts == set(done[key]), key
            # The dead worker's heads went to other attempts; the attempts given up (and
            # the dead worker's) are superseded now, unless it is theirs that committed:
            # then their retry replays it.
            assert all(done[(h.session_id, h.index)] != [h.attempt] for h in lost)
            for head in [*lost, *drain.given_up]:
                result = await complete(writer, head)
                ours = done[(head.session_id, head.index)] == [head.attempt]
                assert isinstance(result, Completed if ours else Superseded), (head, result)
            assert await outputs(writer, sessions) == done
    finally:
        for store in (writer, *claimers):
            await store.close()


# --- two multi-session transactions in opposite orders -------------------------------------


@pytest.fixture
async def deadlock_store(citus_dsn: str, own_schema: str) -> AsyncIterator[PostgresStore]:
    migrate.upgrade(citus_dsn, own_schema, citus_shards=SHARDS)
    store = await PostgresStore.open(citus_dsn, schema=own_schema)
    yield store
    await store.close()


async def two_sessions_on_two_nodes(dsn: str, store: PostgresStore) -> tuple[str, str]:
    """Two sessions (created) whose rows live on different worker nodes."""
    candidates = [f"d{n}" for n in range(16)]
    ports = node_ports(dsn, store.schema, candidates)
    first = candidates[0]
    other = next((s for s in candidates if ports[s] != ports[first]), None)
    if other is None:
        pytest.skip("the Citus cluster has one worker node: no transaction spans two")
    for session_id in (first, other):
        await store.append(session_id, [NewEvent("start")])
    return first, other


async def test_two_transactions_locking_sessions_of_two_nodes_in_opposite_orders_deadlock(
    citus_dsn: str, deadlock_store: PostgresStore
) -> None:
    """The hazard is real: no node sees the cycle of two transactions that each wait on
    the other's row of another node; Citus's distributed deadlock detection cancels one.
    Catches: a cluster (or Citus version) where this does not hold, so that the store's
    sorted locking below would be tested against nothing."""
    a, b = await two_sessions_on_two_nodes(citus_dsn, deadlock_store)
    update = sql.SQL("update {} set head = head where session_id = %s").format(
        sql.Identifier(deadlock_store.schema, "a2_sessions")
    )
    t1 = await psycopg.AsyncConnection.connect(citus_dsn)
    t2 = await psycopg.AsyncConnection.connect(citus_dsn)
    started = time.monotonic()
    try:
        async with asyncio.timeout(DEADLOCK_DEADLINE):
            await t1.execute(update, (a,))  # T1 holds A (one node)...
            await t2.execute(update, (b,))  # ...T2 holds B (the other)

            async def second(conn: psycopg.AsyncConnection[Any], session_id: str) -> None:
                await conn.execute(update, (session_id,))
                await conn.commit()

            outcomes = await asyncio.gather(second(t1, b), second(t2, a), return_exceptions=True)
    finally:
        await t1.close()
        await t2.close()
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    print(f"\ndeadlock resolved in {time.monotonic() - started:.1f}s: {failed!r}")
    assert len(failed) == 1, outcomes
    [error] = failed
    assert isinstance(error, pg.DeadlockDetected)
    assert error.sqlstate == "40P01"
    assert "distributed deadlock" in str(error)


async def test_completion_batches_over_two_nodes_in_opposite_orders_never_deadlock(
    citus_dsn: str, deadlock_store: PostgresStore, caplog: pytest.LogCaptureFixture
) -> None:
    """Two batches, each completing a head of both sessions, A's first in one and B's first
    in the other, both queued behind a lock on A so that they run side by side: the store
    locks the sessions in sorted order, one statement per session, so neither waits on
    the other in a cycle. Rounds alternate
    between batches that return events (judged: two round trips) and batches that return
    none (fenced: one). Catches: sessions locked in the batch's order (a deadlock, which
    Citus cancels and the store retries: the retry is logged), a completion lost or
    applied twice (a cursor left live, an output missing or doubled)."""
    store = deadlock_store
    a, b = await two_sessions_on_two_nodes(citus_dsn, store)
    other = await PostgresStore.open(citus_dsn, schema=store.schema)
    lock = sql.SQL("select from {} where session_id = %s for update").format(
        sql.Identifier(store.schema, "a2_sessions")
    )
    gate = await psycopg.AsyncConnection.connect(citus_dsn)
    watch = await psycopg.AsyncConnection.connect(citus_dsn, autocommit=True)
    started = time.monotonic()
    try:
        caplog.set_level(logging.INFO, logger="a2pg.postgres")
        returned = 0
        async with asyncio.timeout(DEADLOCK_DEADLINE):
            for round_ in range(20):
                held: dict[str, list[Head]] = {}
                for session_id in (a, b):
                    await store.append(
                        session_id, [NewEvent("job", targets=[Target(CONSUMER)]) for _ in "xy"]
                    )
                    claimed = await store.claim_available(session_id, holder="h", ttl=60)
                    assert isinstance(claimed, Claimed) and len(claimed.heads) == 2, claimed
                    held[session_id] = claimed.heads
                returns = round_ % 2 == 0
                returned += 4 if returns else 0

                def completion(head: Head, returns: bool = returns) -> Completion:
                    events = [done_event(head)] if returns else []
                    return Completion(
                        head.session_id, head.consumer, head.lane, head.index, head.attempt, events
                    )

                first = [completion(held[a][0]), completion(held[b][0])]
                second = [completion(held[b][1]), completion(held[a][1])]
                # Both batches queue behind a lock on A, so that they run side by side:
                # locked in the batches' orders, the second would hold B meanwhile.
                await gate.execute(lock, (a,))
                batches = asyncio.gather(
                    store.complete_attempts(first), other.complete_attempts(second)
                )
                while await waiting(watch) < 2:  # noqa: ASYNC110 - the database's state
                    await asyncio.sleep(0.01)
                await gate.commit()
                results = await batches
                assert all(isinstance(r, Completed) for batch in results for r in batch), results
        retried = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]
        assert retried == []
        await assert_all_idle(store, [a, b])
        done = await outputs(store, [a, b])
        assert len(done) == returned
        assert all(attempts == [1] for attempts in done.values()), done
        print(f"\n20 rounds in {time.monotonic() - started:.1f}s")
    finally:
        await gate.close()
        await watch.close()
        await other.close()


async def waiting(conn: psycopg.AsyncConnection[Any]) -> int:
    """How many distributed transactions wait on a lock (Citus's ``citus_lock_waits``)."""
    cur = await conn.execute("select count(distinct waiting_gpid) from pg_catalog.citus_lock_waits")
    row = await cur.fetchone()
    return 0 if row is None else int(row[0])
