"""Hostile inputs: thousands of generated calls to every operation, run side by side on a
MemoryStore and a PostgresStore with the same clock and ids.

Each call must succeed or raise ``A2Error`` (anything else fails the test); both stores
must answer alike (the same result, or the same error code); and a call that raised
must have written nothing (the memory store's observable state and every row of the
PostgreSQL tables are compared before and after). ``A2PG_HOSTILE_EXAMPLES`` sets how
many examples run (each is a freshly seeded pair of stores and a batch of calls).
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from psycopg import sql

from a2pg import A2Error, ClaimRef, Consumer, LogSpec, SnapshotWrite, Target
from a2pg.memory import MemoryStore
from a2pg.postgres import PostgresStore
from a2pg.postgres.layout import TABLES
from a2pg.store import Store

from .helpers import close, ev, fingerprint
from .hostile_inputs import LIMITS, NOW, OPERATIONS, READ_ONLY, Case, case

pytestmark = [pytest.mark.postgres, pytest.mark.generated]

EXAMPLES_ENV = "A2PG_HOSTILE_EXAMPLES"
CASES_PER_EXAMPLE = 40
DEFAULT_EXAMPLES = 250
"""250 examples of 40 calls: 10,000 calls by default."""

EXAMPLES = int(os.environ.get(EXAMPLES_ENV, DEFAULT_EXAMPLES))
DATA_TABLES = [name for name in TABLES if name != "a2_meta"]


class CaseIds:
    """Generated event ids, restarted per call so both stores hand out the same ones."""

    def __init__(self) -> None:
        self.prefix = "seed"
        self.count = 0

    def restart(self, prefix: str) -> None:
        self.prefix, self.count = prefix, 0

    def __call__(self) -> str:
        self.count += 1
        return f"{self.prefix}-{self.count}"


class StepClock:
    """The one clock both stores read."""

    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> Any:
        return self.now


Outcome = tuple[str, object]


async def outcome(store: Store, call: Case) -> Outcome:
    """("ok", result) or ("error", code); any other exception fails the test."""
    try:
        result = call.call(store)
        if inspect.isawaitable(result):
            return ("ok", await result)
        if isinstance(result, AsyncIterator):
            await close(result)
            return ("ok", "stream")
        return ("ok", result)
    except A2Error as error:
        return ("error", error.code)
    except Exception as exc:
        name = type(store).__name__
        raise AssertionError(f"{name}: {call!r} raised {type(exc).__name__}: {exc!s:.300}") from exc


@dataclass
class Pair:
    """A MemoryStore and a PostgresStore on the same clock, ids and limits."""

    postgres: PostgresStore
    raw: psycopg.AsyncConnection[Any]
    clock: StepClock
    ids: tuple[CaseIds, CaseIds]
    memory: MemoryStore = field(init=False)
    namespaces: set[str] = field(default_factory=set)
    reducers: set[str] = field(default_factory=set)
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    cases: int = 0

    @classmethod
    async def open(cls, dsn: str) -> Pair:
        clock, ids = StepClock(), (CaseIds(), CaseIds())
        postgres = await PostgresStore.open(
            dsn, clock=clock, ids=ids[1], limits=LIMITS, registry_ttl=0.0
        )
        raw = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        pair = cls(postgres, raw, clock, ids)
        pair.memory = MemoryStore(clock=clock, ids=ids[0], limits=LIMITS)
        return pair

    async def close(self) -> None:
        await self.memory.close()
        await self.postgres.close()
        await self.raw.close()

    @property
    def stores(self) -> tuple[Store, Store]:
        return (self.memory, self.postgres)

    async def reset(self, advance: float) -> None:
        """Empty stores, seeded alike: live claims, a lane queue, a dead letter, a log
        consumer, a pinned snapshot, presence; then the clock moves ``advance`` seconds."""
        await self.memory.close()
        self.memory = MemoryStore(clock=self.clock, ids=self.ids[0], limits=LIMITS)
        deletes = sql.SQL("; ").join(
            sql.SQL("delete from {}").format(sql.Identifier(name)) for name in DATA_TABLES
        )
        await self.raw.execute(deletes)
        self.clock.now = NOW
        self.namespaces, self.reducers = {"room"}, {"r"}
        for store, ids in zip(self.stores, self.ids, strict=True):
            ids.restart("seed")
            await seed(store)
        self.clock.now = NOW + timedelta(seconds=advance)
        await self.agree()

    async def view(self, store: Store) -> tuple[object, ...]:
        """What the contract lets a caller see of everything in ``store``."""
        listed = await store.sessions(limit=LIMITS.max_page_size)
        session_ids = [info.session_id for info in listed]
        states = [
            await store.read_state(sid, reducer)
            for sid in session_ids
            for reducer in sorted(self.reducers)
        ]
        presence = [await store.presence.read(ns) for ns in sorted(self.namespaces)]
        return (await fingerprint(store, *session_ids), states, presence)

    async def rows(self) -> object:
        """Every row of every a2pg table, to prove a refused call wrote nothing."""
        parts = [
            sql.SQL("(select coalesce(json_agg(t order by t::text), '[]') from {} t)").format(
                sql.Identifier(name)
            )
            for name in DATA_TABLES
        ]
        cursor = await self.raw.execute(sql.SQL("select ") + sql.SQL(", ").join(parts))
        return await cursor.fetchone()

    async def agree(self) -> None:
        memory, postgres = await self.view(self.memory), await self.view(self.postgres)
        assert memory == postgres, "the stores' states differ"

    async def run(self, calls: list[Case]) -> None:
        before: tuple[object, object] | None = None
        for call in calls:
            self.cases += 1
            if before is None:
                before = (await self.view(self.memory), await self.rows())
            answers = []
            for store, ids in zip(self.stores, self.ids, strict=True):
                ids.restart(f"g{self.cases}")
                answers.append(await outcome(store, call))
            memory, postgres = answers
            assert memory == postgres, (
                f"{call!r}: memory {memory!r:.300} != postgres {postgres!r:.300}"
            )
            kind = memory[0]
            self.calls[(call.op, kind)] += 1
            if kind == "error":
                after = (await self.view(self.memory), await self.rows())
                assert after[0] == before[0], f"{call!r} raised but changed the memory store"
                assert after[1] == before[1], f"{call!r} raised but wrote to PostgreSQL"
            elif call.op not in READ_ONLY:
                self._track(call)
                before = None
        await self.agree()

    def _track(self, call: Case) -> None:
        """Remembers the namespaces and reducers a successful call wrote to."""
        if call.op == "presence.write":
            self.namespaces.add(call.args[0])
        elif call.op == "put_snapshots":
            self.reducers.add(call.args[1])


async def seed(store: Store) -> None:
    audit = Consumer("audit", LogSpec("log", ("a", "b")))
    await store.register_consumers([audit])
    await store.append(
        "s",
        [
            ev("a", {"n": 1}, id="e1", to=["c"]),
            ev("b", to=[Target("d", "x")]),
            ev("note", [1, 2], to=[Target("d", "x")]),
        ],
    )
    await store.claim_available("s", holder="w", ttl=30, through=1)
    await store.put_snapshots("s", "r", [SnapshotWrite(1, {"n": 1}, pins=[ClaimRef("c", None, 1)])])
    await store.append("t", [ev("a", id="e1", to=["c"])])
    await store.claim_available("t", holder="w", ttl=30)
    await store.fail_attempt(
        "t", consumer="c", lane=None, index=1, attempt=1, error="boom", max_failures=1
    )
    await store.presence.write("room", "ann", {"f": 1}, at=NOW, seen=None, ttl=60)


def test_hostile_inputs_are_refused_alike_and_write_nothing(postgres_dsn: str) -> None:
    with asyncio.Runner(loop_factory=asyncio.new_event_loop) as runner:
        pair = runner.run(Pair.open(postgres_dsn))
        try:

            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                print_blob=True,
                phases=(Phase.explicit, Phase.generate, Phase.shrink),
                suppress_health_check=list(HealthCheck),
            )
            @given(
                advance=st.sampled_from([0.0, 31.0]),
                calls=st.lists(case, min_size=CASES_PER_EXAMPLE, max_size=CASES_PER_EXAMPLE),
            )
            def check(advance: float, calls: list[Case]) -> None:
                runner.run(pair.reset(advance))
                runner.run(pair.run(calls))

            check()
        finally:
            runner.run(pair.close())
    report = ", ".join(f"{op}/{kind}={n}" for (op, kind), n in sorted(pair.calls.items()))
    ran = sum(pair.calls.values())
    assert ran >= EXAMPLES * CASES_PER_EXAMPLE, f"only {ran} calls ran: {report}"
    succeeded = sum(n for (_, kind), n in pair.calls.items() if kind == "ok")
    assert 0.1 * ran < succeeded < 0.9 * ran, f"{succeeded} of {ran} calls succeeded: {report}"
    ops = {op for op, _ in pair.calls}
    assert ops == set(OPERATIONS), f"never called: {set(OPERATIONS) - ops}"
