"""The bench's loaded history looks, row for row, like work the worker really finished."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from typing import Any

import pytest

from a2pg.bench import history
from a2pg.bench.ledger import Ledger
from a2pg.bench.worker import DRAIN_CONSUMER, drain_app
from a2pg.models import NewEvent, Target
from a2pg.postgres import PostgresStore
from a2pg.worker import Worker

SIZE = 250  # sessions of 100, 100 and 50 events
VARIES = {"session_id", "event_id", "event_type", "payload", "created_at"}
"""Columns a history row may differ in from a real one: names, ids, content, time."""


@pytest.fixture
async def ledger(postgres_dsn: str) -> AsyncIterator[Ledger]:
    opened = await Ledger.connect(postgres_dsn)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def store(postgres_dsn: str) -> AsyncIterator[PostgresStore]:
    opened = await PostgresStore.open(postgres_dsn)
    try:
        yield opened
    finally:
        await opened.close()


async def rows(ledger: Ledger, query: str, *params: Any) -> list[dict[str, Any]]:
    cur = await ledger.conn.execute(query, params)
    names = [column.name for column in cur.description or ()]
    return [dict(zip(names, row, strict=True)) for row in await cur.fetchall()]


def comparable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in VARIES}


async def test_history_rows_are_those_of_events_completed_by_a_worker(
    ledger: Ledger, store: PostgresStore
) -> None:
    await history.load(ledger, "public", SIZE, io.StringIO())
    await store.append("real", [NewEvent("bench.job", {"n": 1}, targets=(Target(DRAIN_CONSUMER),))])
    await Worker(store, drain_app, concurrency=2).run_until_idle()

    where = "where session_id = %s and {key}"
    for table, key in (
        ("a2_cursors", "cursor_key = '#1'"),
        ("a2_events", "idx = 1"),
        ("a2_sessions", "true"),
    ):
        statement = f"select * from {table} " + where.format(key=key)
        [real] = await rows(ledger, statement, "real")
        [loaded] = await rows(ledger, statement, f"{history.PREFIX}1")
        if table == "a2_sessions":
            real["head"] = loaded["head"] = None  # 1 event against 100
        assert comparable(loaded) == comparable(real), table


async def test_history_holds_exactly_its_size_and_nothing_to_claim(
    ledger: Ledger, store: PostgresStore
) -> None:
    await history.load(ledger, "public", SIZE, io.StringIO())
    ids = [f"{history.PREFIX}{n}" for n in range(1, history.history_sessions(SIZE) + 1)]
    assert len(ids) == 3
    assert await ledger.events_in("public", ids) == SIZE
    assert await ledger.done("public", ids, DRAIN_CONSUMER) == (SIZE, SIZE)
    assert await ledger.live_heads("public", ids) == 0
    [counted] = await rows(ledger, "select count(*) as n from a2_events")
    assert counted["n"] == SIZE
    last = await store.read(ids[-1])
    assert [e.index for e in last] == list(range(1, 51))
    heads = await store.claim_any(holder="h", ttl=30, consumers=list(drain_app.consumers), limit=10)
    assert heads == []


async def test_the_store_reads_a_history_session(ledger: Ledger, store: PostgresStore) -> None:
    await history.load(ledger, "public", SIZE, io.StringIO())
    check = await history.check(store, SIZE)
    assert check.ok, check.detail
    assert check.detail == "100 of 100 events read, 0 cursors listed"


async def test_forget_deletes_a_drained_backlog_and_keeps_the_history(
    ledger: Ledger, store: PostgresStore
) -> None:
    await history.load(ledger, "public", SIZE, io.StringIO())
    target = (Target(DRAIN_CONSUMER),)
    await store.append("backlog-1", [NewEvent("bench.job", targets=target)])
    await store.append("backlog-2", [NewEvent("bench.job", targets=target)])
    await history.forget(ledger, "public", ["backlog-1", "backlog-2"])
    for table in ("a2_sessions", "a2_events", "a2_cursors"):
        [left] = await rows(
            ledger, f"select count(*) as n from {table} where session_id like 'backlog-%%'"
        )
        assert left["n"] == 0, table
    [counted] = await rows(ledger, "select count(*) as n from a2_events")
    assert counted["n"] == SIZE
