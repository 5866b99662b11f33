"""The trace context on PostgreSQL's write paths beyond the conformance suite: an append in
the caller's transaction (``append_in``), and a transaction's ``insert_events`` whose
``trace_parents`` is shorter than its events (filled up to the last event that has one,
the statement padding the rest with nulls)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from a2pg import A2Error, NewEvent
from a2pg.contract.propagation import carry
from a2pg.contract.values import check_events
from a2pg.ids import SequentialIds
from a2pg.postgres import PostgresStore
from a2pg.postgres.queries import Statements
from a2pg.postgres.writes import SessionHead, WritePlan

pytestmark = pytest.mark.postgres

TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
OTHER = "00-11111111111111111111111111111111-2222222222222222-01 k=v"


def plan(*sessions: str) -> WritePlan:
    heads = {sid: SessionHead(sid, 0, 0) for sid in sessions}
    return WritePlan(datetime(2026, 1, 1, tzinfo=UTC), SequentialIds(), heads)


def batch(*types: str) -> Any:
    return check_events([NewEvent(t) for t in types])


def test_trace_parents_stay_empty_until_a_batch_has_one_then_fill_up_to_it() -> None:
    made = plan("s", "t")
    made.add_batch("s", batch("a", "b"), wake=())
    assert made.trace_parents == []
    made.add_batch("t", batch("c"), wake=(), trace_parent=TRACE)
    made.add_batch("s", batch("d"), wake=())
    assert made.trace_parents == [None, None, TRACE]
    made.add_batch("t", batch("e", "f"), wake=(), trace_parent=OTHER)
    assert made.trace_parents == [None, None, TRACE, None, OTHER, OTHER]
    made.add_batch("s", batch(), wake=(), trace_parent=TRACE)  # nothing to store it on
    assert len(made.trace_parents) == 6


async def test_insert_events_pads_the_short_trace_parents_with_nulls(
    store: PostgresStore, postgres_dsn: str
) -> None:
    made = plan("s")
    made.add_batch("s", batch("a"), wake=())
    made.add_batch("s", batch("b"), wake=(), trace_parent=TRACE)
    made.add_batch("s", batch("c", "d"), wake=())
    async with await psycopg.AsyncConnection.connect(postgres_dsn) as conn:
        await made.apply(conn, statements=Statements("public"))
        await conn.commit()
    stored = await store.read("s")
    assert [(e.type, e.trace_parent) for e in stored] == [
        ("a", None),
        ("b", TRACE),
        ("c", None),
        ("d", None),
    ]


async def test_append_in_stores_the_carried_context(
    store: PostgresStore, postgres_dsn: str
) -> None:
    async with await psycopg.AsyncConnection.connect(postgres_dsn) as conn:
        async with conn.transaction():
            with carry(TRACE):
                result = await store.append_in(conn, "s", [NewEvent("a"), NewEvent("b")])
        assert [e.trace_parent for e in result.events] == [TRACE, TRACE]
    assert [e.trace_parent for e in await store.read("s")] == [TRACE, TRACE]


async def test_append_in_refuses_a_malformed_context_and_writes_nothing(
    store: PostgresStore, postgres_dsn: str
) -> None:
    async with await psycopg.AsyncConnection.connect(postgres_dsn) as conn:
        with carry("00-bad"), pytest.raises(A2Error) as error:
            await store.append_in(conn, "s", [NewEvent("a")])
        assert error.value.code == "INVALID_ARGUMENT" and "trace_parent" in str(error.value)
        await conn.commit()
    assert await store.read("s") == []
