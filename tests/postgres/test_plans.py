"""Query plans of the hot statements on a realistic backlog: index scans, never a Seq Scan.

The store runs its real statements with its real parameters; a spy on its ``execute``
first asks PostgreSQL to EXPLAIN each one, on the same connection with the same
parameters, then lets it run.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, LiteralString, cast

import psycopg
import pytest
from psycopg import AsyncConnection, AsyncCursor, AsyncRawCursor, sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import DictRow, dict_row

from a2pg.models import Completion, Consumer, LogSpec, NewEvent, StoredEvent
from a2pg.postgres import PostgresStore, database, log, queries
from a2pg.testing import DatabaseTemplate, drop_database

pytestmark = [pytest.mark.postgres]

SESSIONS = 1_000
EVENTS_PER_SESSION = 100  # 100,000 events
CURSORS_PER_SESSION = 10  # 10,000 cursors, 2,000 of them ready
SESSION = "s00500"
HOT_TABLES = (
    "a2_events",
    "a2_cursors",
    "a2_lane_events",
    "a2_snapshot_pins",
    "a2_snapshot_history",
)
INDEX_SCANS = ("Index Scan", "Index Only Scan", "Bitmap Heap Scan")
MAILER, BILLING = Consumer("mailer"), Consumer("billing")
AUDIT = Consumer("audit", LogSpec(types=("order.placed",)))

_SESSION_ID = "'s' || lpad(s::text, 5, '0')"
LOAD: list[LiteralString] = [
    # Sessions and their logs; every tenth event is an order, a fifth were returned by a
    # completion (with a cause), as the store writes them.
    f"""insert into a2_sessions (session_id, head, clear_index, created_at)
        select {_SESSION_ID}, {EVENTS_PER_SESSION}, 0, now() - interval '1 day'
          from generate_series(1, {SESSIONS}) s""",
    f"""insert into a2_events (session_id, idx, event_id, event_type, payload, created_at,
                               cause_consumer, cause_lane, cause_index, cause_attempt)
        select {_SESSION_ID}, i, md5(s || ':' || i)::uuid::text,
               case when i % 10 = 0 then 'order.placed' else 'work' end,
               json_build_object('n', i), now() - interval '1 day' + i * interval '1 second',
               case when i % 5 = 0 then 'mailer' end, null,
               case when i % 5 = 0 then i - 1 end, case when i % 5 = 0 then 1 end
          from generate_series(1, {SESSIONS}) s, generate_series(1, {EVENTS_PER_SESSION}) i""",
    # Per session: six finished event cursors, two ready ones (the backlog), one leased
    # lane head, one caught-up log cursor.
    f"""insert into a2_cursors (session_id, consumer, cursor_key, kind, lane, position, head,
                                ready_at, completed_idx, completed_attempt)
        select {_SESSION_ID}, 'mailer', '#' || i, 'event', null, i, null, null, i, 1
          from generate_series(1, {SESSIONS}) s, generate_series(1, 6) i""",
    f"""insert into a2_cursors (session_id, consumer, cursor_key, kind, lane, position, head,
                                ready_at)
        select {_SESSION_ID}, 'mailer', '#' || i, 'event', null, i - 1, i,
               now() - (s * 2 + i) * interval '1 second'
          from generate_series(1, {SESSIONS}) s,
               generate_series({EVENTS_PER_SESSION - 1}, {EVENTS_PER_SESSION}) i""",
    f"""insert into a2_cursors (session_id, consumer, cursor_key, kind, lane, position, head,
                                ready_at, attempt_count, first_claimed_at, last_claimed_at,
                                claim_holder, claim_expires_at)
        select {_SESSION_ID}, 'billing', 'Lmain', 'lane', 'main', 97, 98,
               now() + interval '30 seconds', 1, now(), now(), 'w-elsewhere',
               now() + interval '30 seconds'
          from generate_series(1, {SESSIONS}) s""",
    f"""insert into a2_lane_events (session_id, consumer, lane, idx, done, completed_attempt)
        select {_SESSION_ID}, 'billing', 'main', i, i < 98, case when i < 98 then 1 end
          from generate_series(1, {SESSIONS}) s, generate_series(90, 98) i""",
    f"""insert into a2_cursors (session_id, consumer, cursor_key, kind, lane, position, head,
                                types)
        select {_SESSION_ID}, 'audit', 'Llog', 'log', 'log', {EVENTS_PER_SESSION}, null,
               array['order.placed']
          from generate_series(1, {SESSIONS}) s""",
    # A reducer's snapshot per session, and the history the in-flight heads pin.
    f"""insert into a2_snapshots (session_id, reducer, up_to_index, state, updated_at)
        select {_SESSION_ID}, 'totals', 90, '{{"n": 90}}', now()
          from generate_series(1, {SESSIONS}) s""",
    f"""insert into a2_snapshot_history (session_id, reducer, up_to_index, state, updated_at)
        select {_SESSION_ID}, 'totals', 80, '{{"n": 80}}', now()
          from generate_series(1, {SESSIONS}) s""",
    f"""insert into a2_snapshot_pins (session_id, consumer, cursor_key, event_index, reducer,
                                      up_to_index)
        select {_SESSION_ID}, c, k, i, 'totals', 80
          from generate_series(1, {SESSIONS}) s,
               (values ('billing', 'Lmain', 98), ('mailer', '#99', 99), ('mailer', '#100', 100))
               as p (c, k, i)""",
    """insert into a2_consumers (name, lane, types, backfill, registered_at, updated_at)
       values ('audit', 'log', array['order.placed'], false, now(), now())""",
    "analyze",
]


@dataclass(frozen=True)
class Explained:
    """One statement the store ran, as PostgreSQL planned it."""

    name: str
    text: str
    params: dict[str, Any]
    plan: dict[str, Any]


class PlanSpy:
    """Stands in for the store's ``execute``: EXPLAINs each named statement, then runs it."""

    def __init__(self) -> None:
        self.seen: list[Explained] = []
        self.positional: list[queries.Positional] = []
        public = queries.statements("public")
        self._names = {
            public.query(name).decode(): name
            for name in queries.names()
            if name not in queries.LIMITED
        }

    def name_of(self, text: str) -> str | None:
        return self._names.get(text)

    async def execute_positional(
        self, conn: AsyncConnection[Any], statement: queries.Positional, params: dict[str, Any]
    ) -> AsyncCursor[DictRow]:
        explain = b"explain (format json) " + statement.text
        cur = AsyncRawCursor(conn, row_factory=dict_row)
        await cur.execute(explain, statement.values(params))
        row = await cur.fetchone()
        assert row is not None
        plan = row["QUERY PLAN"][0]["Plan"]
        self.seen.append(Explained(statement.statement, statement.text.decode(), params, plan))
        self.positional.append(statement)
        return await _real_execute_positional(conn, statement, params)

    async def execute(
        self,
        conn: AsyncConnection[Any],
        statement: LiteralString | bytes | sql.Composed,
        params: dict[str, Any] | None = None,
        *,
        prepare: bool | None = None,
    ) -> AsyncCursor[DictRow]:
        if isinstance(statement, sql.Composable):
            text = statement.as_string(conn)
        else:
            text = statement.decode() if isinstance(statement, bytes) else statement
        name = self.name_of(text)
        if name is not None:
            explain = sql.SQL("explain (format json) {}").format(sql.SQL(text))
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(explain, params)
            row = await cur.fetchone()
            assert row is not None
            plan = row["QUERY PLAN"][0]["Plan"]
            self.seen.append(Explained(name, text, dict(params or {}), plan))
        return await _real_execute(conn, statement, params, prepare=prepare)

    def of(self, name: str) -> list[Explained]:
        return [e for e in self.seen if e.name == name]


_real_execute = database.execute
_real_execute_positional = database.execute_positional


@pytest.fixture(scope="module")
def loaded_dsn(postgres_template: DatabaseTemplate) -> Iterator[str]:
    """A database of 1,000 sessions, 100,000 events and 10,000 cursors, analyzed."""
    dsn = postgres_template.clone("a2pg_plans")
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for statement in LOAD:
                conn.execute(statement)
        yield dsn
    finally:
        drop_database(postgres_template.server_dsn, str(conninfo_to_dict(dsn)["dbname"]))


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> PlanSpy:
    watcher = PlanSpy()
    monkeypatch.setattr(database, "execute", watcher.execute)
    monkeypatch.setattr(database, "execute_positional", watcher.execute_positional)
    return watcher


@asynccontextmanager
async def opened(dsn: str) -> AsyncIterator[PostgresStore]:
    store = await PostgresStore.open(dsn, max_size=2)
    try:
        yield store
    finally:
        await store.close()


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from nodes(child)


def scans(explained: Explained) -> list[tuple[str, str, str]]:
    """(node type, relation, index) of every scan in the plan, for failure messages."""
    return [
        (n["Node Type"], n["Relation Name"], n.get("Index Name", ""))
        for n in nodes(explained.plan)
        if "Relation Name" in n and n["Node Type"] != "ModifyTable"
    ]


def assert_no_seq_scan(explained: Explained) -> None:
    seq = [s for s in scans(explained) if s[0] == "Seq Scan" and s[1] in HOT_TABLES]
    assert not seq, f"{explained.name} seq-scans {seq}: {scans(explained)}"


def assert_indexed(explained: Explained, table: str) -> None:
    assert_no_seq_scan(explained)
    used = [s for s in scans(explained) if s[1] == table and s[0] in INDEX_SCANS]
    assert used, f"{explained.name} reads {table} without an index: {scans(explained)}"


@pytest.mark.parametrize("limit", [10, 50])
@pytest.mark.parametrize("consumers", [None, [MAILER, BILLING]], ids=["all", "named"])
async def test_claim_any_walks_the_ready_index_with_a_literal_limit(
    loaded_dsn: str, spy: PlanSpy, limit: int, consumers: list[Consumer] | None
) -> None:
    async with opened(loaded_dsn) as store:
        heads = await store.claim_any(
            holder="w-plans", ttl=30.0, consumers=consumers, limit=limit, max_failures=5
        )
    assert len(heads) == limit  # planned for a real claim of a full batch
    (claim,) = spy.of("complete_and_claim")
    assert_no_seq_scan(claim)
    ready = [s for s in scans(claim) if s[2] == "a2_cursors_ready"]
    assert ready and ready[0][0] == "Index Scan", scans(claim)
    # The generic-plan trap (PERF-NOTES): the LIMIT is a literal (see also the next test).
    (statement,) = spy.positional
    assert statement.limit == limit and f" limit {limit} " in claim.text


async def test_a_worker_cycle_probes_the_rows_it_completes(loaded_dsn: str, spy: PlanSpy) -> None:
    async with opened(loaded_dsn) as store:
        heads = await store.claim_any(holder="w-plans", ttl=30.0, consumers=[MAILER], limit=10)
        done = [
            Completion(h.event.session_id, h.consumer, h.lane, h.event.index, h.attempt)
            for h in heads
        ]
        await store.complete_and_claim(done, holder="w-plans", ttl=30.0, consumers=[MAILER])
    cycle = spy.of("complete_and_claim")[-1]
    assert_no_seq_scan(cycle)
    assert_indexed(cycle, "a2_cursors")


async def test_claim_any_keeps_the_ready_index_even_as_a_generic_plan(
    loaded_dsn: str, spy: PlanSpy
) -> None:
    """psycopg prepares the claim after a few runs, and PostgreSQL may then plan it
    generic (its parameters unknown): it must still walk the ready index rather than
    sort the whole backlog."""
    async with opened(loaded_dsn) as store:
        await store.claim_any(holder="w-plans", ttl=30.0, consumers=[MAILER], limit=10)
    (claim,) = spy.of("complete_and_claim")
    (statement,) = spy.positional
    values = sql.SQL(", ").join(sql.Literal(claim.params[name]) for name in statement.names)
    async with await AsyncConnection.connect(loaded_dsn, autocommit=True) as conn:
        await conn.execute("set plan_cache_mode = force_generic_plan")
        await conn.execute(sql.SQL("prepare a2pg_claim as {}").format(sql.SQL(claim.text)))
        cur = await conn.execute(
            sql.SQL("explain (format json) execute a2pg_claim ({})").format(values)
        )
        row = await cur.fetchone()
        assert row is not None
        cur = await conn.execute(
            "select generic_plans, custom_plans from pg_prepared_statements"
            " where name = 'a2pg_claim'"
        )
        assert await cur.fetchone() == (1, 0)  # planned generic: its parameters unknown
    generic = Explained("claim_any (generic)", claim.text, {}, row[0][0]["Plan"])
    assert_no_seq_scan(generic)
    ready = [s for s in scans(generic) if s[2] == "a2_cursors_ready"]
    assert ready and ready[0][0] == "Index Scan", scans(generic)


async def test_claim_available_stays_in_its_session(loaded_dsn: str, spy: PlanSpy) -> None:
    async with opened(loaded_dsn) as store:
        await store.claim_available(
            "s00400", holder="w-plans", ttl=30.0, exclude=(), max_failures=5
        )
    ran = [e.name for e in spy.seen]
    assert ran == [
        "registered_consumers",
        "lock_sessions",
        "refresh_log_types",
        "claim_session",
        "busy_until",
    ]
    for explained in spy.seen:
        assert_no_seq_scan(explained)
    for name in ("refresh_log_types", "claim_session", "busy_until"):
        (explained,) = spy.of(name)
        assert_indexed(explained, "a2_cursors")


@pytest.mark.parametrize(
    "window",
    [
        {},
        {"after": 20, "through": 80, "limit": 10},
        {"types": ["order.placed"]},
        {"after": 50, "types": ["order.placed", "work"], "limit": 5},
    ],
    ids=["whole", "window", "types", "types-window"],
)
async def test_read_uses_an_events_index(
    loaded_dsn: str, spy: PlanSpy, window: dict[str, Any]
) -> None:
    async with opened(loaded_dsn) as store:
        events = await store.read(SESSION, **window)
    assert events
    (read,) = spy.of("read_events")
    assert_indexed(read, "a2_events")


async def test_stream_catch_up_and_live_reads_use_the_events_index(
    loaded_dsn: str, spy: PlanSpy
) -> None:
    async with opened(loaded_dsn) as store:
        stream = store.stream(SESSION, after=EVENTS_PER_SESSION - 30)
        caught_up = [await anext(stream) for _ in range(30)]
        # The stream reads again once its batch is consumed: give it the event to find.
        appended = await store.append(SESSION, [NewEvent("work", {"n": "live"})])
        live = await anext(stream)
        await cast(AsyncGenerator[StoredEvent, None], stream).aclose()
    assert [e.index for e in caught_up] == list(range(EVENTS_PER_SESSION - 29, 101))
    assert live == appended.events[0]
    reads = spy.of("read_events")
    assert [r.params["visible"] for r in reads[:2]] == [True, False]
    assert {r.params["limit"] for r in reads} == {log.STREAM_BATCH}
    for read in reads:
        assert_indexed(read, "a2_events")


async def test_append_finds_its_ids_in_the_unique_index_of_owned_ids(
    loaded_dsn: str, spy: PlanSpy
) -> None:
    """Append's dedup (and a replay's) is one probe of a2_events_event_id per supplied id;
    in a cleared session, retiring the old event of a reused id probes it too."""
    session = "s00700"
    async with await AsyncConnection.connect(loaded_dsn) as conn:
        cur = await conn.execute(
            "select event_id from a2_events where session_id = %s and idx = 1", [session]
        )
        row = await cur.fetchone()
    assert row is not None
    (reused,) = row
    async with opened(loaded_dsn) as store:
        await store.clear(session)
        first = await store.append(session, [NewEvent("work", {"n": 1}, id=reused)])
        again = await store.append(session, [NewEvent("work", {"n": 1}, id=reused)])
    assert again.events == first.events
    assert first.events[0].index == EVENTS_PER_SESSION + 2
    lookups = spy.of("select_events_by_ids")
    assert len(lookups) == 2
    for lookup in lookups:
        assert_indexed(lookup, "a2_events")
        assert "a2_events_event_id" in {s[2] for s in scans(lookup)}, scans(lookup)
    params = {"session_ids": [session], "event_ids": [reused]}
    text = queries.statements("public").query("free_stale_ids").decode()
    async with await AsyncConnection.connect(loaded_dsn) as conn:
        explain = sql.SQL("explain (format json) {}").format(sql.SQL(text))
        cur = await conn.execute(explain, params)
        row = await cur.fetchone()
    assert row is not None
    retire = Explained("free_stale_ids", text, params, row[0][0]["Plan"])
    assert_indexed(retire, "a2_events")
    assert "a2_events_event_id" in {s[2] for s in scans(retire)}, scans(retire)
