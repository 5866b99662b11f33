"""A store in a schema whose name holds what statement text could misread: a ``%``
(psycopg's placeholder sign), a placeholder's very shape, quotes. Every operation
works there and writes there only."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from a2pg import Completion, NewEvent, Target
from a2pg.postgres import PostgresStore
from a2pg.postgres.migrate import upgrade

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize("schema", ["a%b", "x%(n)s%", 'Odd "%s" %%'])
async def test_every_kind_of_statement_runs_in_a_schema_named_with_percent_signs(
    postgres_dsn: str, schema: str
) -> None:
    upgrade(postgres_dsn, schema=schema)
    store = await PostgresStore.open(postgres_dsn, schema=schema)
    try:
        job = Target("mailer")
        await store.append("s", [NewEvent("job", {"n": 1}, targets=[job])])  # one statement
        await store.append("s", [NewEvent("job", None, id="x", targets=[job])])
        await store.append("s", [NewEvent("job", None, id="x", targets=[job])])  # a replay
        heads = await store.claim_any(holder="w", ttl=30.0, limit=10)
        assert [h.index for h in heads] == [1, 2]
        done = [Completion("s", h.consumer, None, h.index, h.attempt) for h in heads]
        result = await store.complete_and_claim(done, holder="w", ttl=30.0)
        assert len(result.completed) == 2 and result.heads == []
        await store.append("s", [NewEvent("turn", None, targets=[Target("chat", lane="l")])])
        (lane,) = await store.claim_any(holder="w", ttl=30.0, limit=10)
        await store.complete_attempts([Completion("s", "chat", "l", lane.index, lane.attempt)])
        assert [e.index for e in await store.read("s")] == [1, 2, 3]
        assert (await store.clear("s")).cleared
        assert (await store.sessions())[0].session_id == "s"
    finally:
        await store.close()
    async with await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as conn:
        cur = await conn.execute(
            sql.SQL("select count(*) from {}.a2_events").format(sql.Identifier(schema))
        )
        assert await cur.fetchone() == (4,)  # three events and the clear's marker, here
        cur = await conn.execute("select count(*) from public.a2_events")
        assert await cur.fetchone() == (0,)
