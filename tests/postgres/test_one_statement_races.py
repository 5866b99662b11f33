"""The one-statement append and worker cycle where another transaction commits between
their snapshot and their locks: each declines (writes nothing) and the transaction it
falls back to gets the contract's answer.

Each race is made deterministic: a raw connection holds the row the statement must
lock, the statement is started and seen waiting on that lock, then the raw connection
does what the concurrent transaction would and commits.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from a2pg import Completion, Consumer, LogSpec, NewEvent, Superseded, Target
from a2pg.postgres import PostgresStore, log
from a2pg.postgres import completions as outcomes

pytestmark = pytest.mark.postgres

AUDIT = Consumer("audit", LogSpec(types=("order.placed",), backfill=True))


async def waiting_on_a_lock(dsn: str, started: asyncio.Task[Any]) -> None:
    """Returns once some backend of this database waits on a lock (the statement under
    test reached the held row); fails if ``started`` ends first."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as probe:
        for _ in range(500):
            if started.done():
                await started  # raises what it raised
                pytest.fail("the statement finished without waiting on the held row")
            cur = await probe.execute(
                "select count(*) from pg_catalog.pg_stat_activity"
                " where datname = pg_catalog.current_database() and wait_event_type = 'Lock'"
            )
            row = await cur.fetchone()
            if row is not None and row[0] > 0:
                return
            await asyncio.sleep(0.01)
    pytest.fail("the statement never waited on the held row")


class Spy:
    """Counts what a one-statement path answered: done, or declined (None)."""

    def __init__(self) -> None:
        self.answers: list[bool] = []

    def wrap(self, function: Any) -> Any:
        async def spied(*args: Any, **kwargs: Any) -> Any:
            result = await function(*args, **kwargs)
            self.answers.append(result is not None)
            return result

        return spied


async def test_an_append_that_waited_for_another_wakes_the_log_from_the_earliest_event(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A backfilling log consumer has no cursor yet (event 1 is not of its types).
    # Another append (held here) adds event 2 of its type; this append's snapshot
    # predates it. Woken from its snapshot it would open the cursor at its own event 3
    # and skip 2 for good; it must decline, and the transaction it falls back to opens
    # the cursor at 2.
    spy = Spy()
    monkeypatch.setattr(log, "append_fresh", spy.wrap(log.append_fresh))
    store = await PostgresStore.open(postgres_dsn, registry_ttl=0.0)
    try:
        await store.register_consumers([AUDIT])
        await store.append("s", [NewEvent("note", None)])
        async with await psycopg.AsyncConnection.connect(postgres_dsn) as other:
            await other.execute(
                "update a2_sessions set head = head + 1 where session_id = 's' returning head"
            )
            await other.execute(
                "insert into a2_events (session_id, idx, event_id, event_type, payload,"
                " created_at) values ('s', 2, 'other', 'order.placed', 'null', now())"
            )
            appended = asyncio.create_task(store.append("s", [NewEvent("order.placed", {"n": 3})]))
            await waiting_on_a_lock(postgres_dsn, appended)
            await other.commit()
        result = await appended
        assert [e.index for e in result.events] == [3]
        assert spy.answers == [True, False]  # the first append in one statement; this declined
        (cursor,) = [c for c in await store.cursors("s") if c.consumer == "audit"]
        assert cursor.head == 2
    finally:
        await store.close()


async def test_an_append_that_waited_for_none_wakes_the_log_in_one_statement(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same wait, but the holder commits nothing new: the snapshot is whole, so the
    # statement stands (the race above is what makes it decline, not the wait).
    spy = Spy()
    monkeypatch.setattr(log, "append_fresh", spy.wrap(log.append_fresh))
    store = await PostgresStore.open(postgres_dsn, registry_ttl=0.0)
    try:
        await store.register_consumers([AUDIT])
        await store.append("s", [NewEvent("note", None)])
        async with await psycopg.AsyncConnection.connect(postgres_dsn) as other:
            await other.execute("select 1 from a2_sessions where session_id = 's' for update")
            appended = asyncio.create_task(store.append("s", [NewEvent("order.placed", {"n": 2})]))
            await waiting_on_a_lock(postgres_dsn, appended)
            await other.commit()
        await appended
        assert spy.answers == [True, True]
        (cursor,) = [c for c in await store.cursors("s") if c.consumer == "audit"]
        assert cursor.head == 2
    finally:
        await store.close()


async def test_a_cycle_whose_head_was_cleared_meanwhile_is_superseded(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The completion's snapshot sees its head live; a clear parks it (ready_at null)
    # and commits before the completion's update reaches the row. The update must not
    # advance the parked head: the cycle declines and the judged transaction answers
    # Superseded.
    spy = Spy()
    monkeypatch.setattr(
        outcomes, "complete_and_claim_one", spy.wrap(outcomes.complete_and_claim_one)
    )
    store = await PostgresStore.open(postgres_dsn)
    try:
        await store.append("s", [NewEvent("job", None, targets=[Target("mailer")])])
        (head,) = await store.claim_any(holder="w", ttl=60.0, limit=1)
        done = [Completion("s", "mailer", None, head.event.index, head.attempt)]
        async with await psycopg.AsyncConnection.connect(postgres_dsn) as other:
            await other.execute(
                "select 1 from a2_cursors where session_id = 's' and consumer = 'mailer' for update"
            )
            cycle = asyncio.create_task(
                store.complete_and_claim(done, holder="w", ttl=60.0, limit=5)
            )
            await waiting_on_a_lock(postgres_dsn, cycle)
            # What clear does to this session: the marker, the clear index, parked heads.
            await other.execute(
                "insert into a2_events (session_id, idx, event_id, event_type, payload,"
                " created_at) values ('s', 2, 'marker', 'a2.cleared', 'null', now())"
            )
            await other.execute(
                "update a2_sessions set head = 2, clear_index = 2 where session_id = 's'"
            )
            await other.execute(
                "update a2_cursors set ready_at = null where session_id = 's' and kind <> 'log'"
            )
            await other.commit()
        result = await cycle
        assert result.completed == [Superseded()]
        assert spy.answers == [False]
        rows = await store.cursors("s")
        assert all(c.consumer != "mailer" or c.head is None or c.head == 1 for c in rows)
        async with await psycopg.AsyncConnection.connect(postgres_dsn) as check:
            cur = await check.execute(
                "select head, position from a2_cursors where consumer = 'mailer'"
            )
            assert await cur.fetchall() == [(1, 0)]  # not advanced
    finally:
        await store.close()
