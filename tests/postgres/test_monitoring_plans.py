"""Plans of the monitoring statements on a realistic table: finished cursors are the bulk of
a2_cursors (about 200,000 here), heads still to run and dead letters a few hundred. Neither
consumer_stats, find_dead_letters nor sessions may Seq Scan a2_cursors or a2_events, as
custom plans (what the store runs first) and as generic ones (what a prepared statement
may settle on). The statements run through the store, watched by test_plans' spy."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import LiteralString

import psycopg
import pytest
from psycopg import AsyncConnection, sql
from psycopg.conninfo import conninfo_to_dict

from a2pg.models import DeadLetterKey, DeadLetterQuery
from a2pg.testing import DatabaseTemplate, drop_database
from tests.postgres.test_plans import (
    Explained,
    PlanSpy,
    assert_no_seq_scan,
    nodes,
    opened,
    scans,
)

pytestmark = [pytest.mark.postgres]

SESSIONS = 2_000
EVENTS = 100  # 200,000 events
FINISHED = 95  # 190,000 finished event cursors; 40,000 finished lane events
DEAD_EVERY = 100  # 20 sessions with a dead event head, a dead lane and (half) a dead log

_SID = "'s' || lpad(s::text, 5, '0')"
LOAD: list[LiteralString] = [
    f"""insert into a2_sessions (session_id, head, clear_index, created_at)
        select {_SID}, {EVENTS}, case when s % 500 = 0 then 10 else 0 end, now()
          from generate_series(1, {SESSIONS}) s""",
    f"""insert into a2_events (session_id, idx, event_id, event_type, payload, created_at)
        select {_SID}, i, s || ':' || i,
               case when i % 10 = 0 then 'order.placed' else 'work' end, '{{}}',
               now() - interval '1 day' + i * interval '1 second'
          from generate_series(1, {SESSIONS}) s, generate_series(1, {EVENTS}) i""",
    # The bulk: finished event cursors.
    f"""insert into a2_cursors (session_id, consumer, cursor_key, kind, lane, position, head,
                                completed_idx, completed_attempt)
        select {_SID}, 'mailer', '#' || i, 'event', null, i, null, i, 1
          from generate_series(1, {SESSIONS}) s, generate_series(1, {FINISHED}) i""",
    # Idle log cursors, one per session.
    f"""insert into a2_cursors (session_id, consumer, cursor_key, kind, lane, position, head,
                                types)
        select {_SID}, 'audit', 'Llog', 'log', 'log', {EVENTS}, null, array['order.placed']
          from generate_series(1, {SESSIONS}) s where s % 200 <> 0""",
    # Ready heads (every tenth session), leased lanes (every twentieth), backing off (50th).
    f"""insert into a2_cursors (session_id, consumer, cursor_key, kind, lane, position, head,
                                ready_at)
        select {_SID}, 'mailer', '#' || i, 'event', null, i - 1, i,
               now() - s * interval '1 second'
          from generate_series(1, {SESSIONS}) s, generate_series(99, 100) i
         where s % 10 = 0""",
    f"""insert into a2_cursors (session_id, consumer, cursor_key, kind, lane, position, head,
                                ready_at, attempt_count, claim_holder, claim_expires_at)
        select {_SID}, 'billing', 'Lmain', 'lane', 'main', 95, 96,
               now() + interval '1 hour', 1, 'w-elsewhere', now() + interval '1 hour'
          from generate_series(1, {SESSIONS}) s where s % 20 = 0""",
    f"""insert into a2_cursors (session_id, consumer, cursor_key, kind, lane, position, head,
                                ready_at, attempt_count, failure_count, last_error,
                                claim_expires_at)
        select {_SID}, 'mailer', '#98', 'event', null, 97, 98,
               now() + interval '1 hour', 1, 1, 'Retry later', now() + interval '1 hour'
          from generate_series(1, {SESSIONS}) s where s % 50 = 0""",
    # Dead letters: an event head, a lane head with four events behind it, a log head.
    f"""insert into a2_cursors (session_id, consumer, cursor_key, kind, lane, position, head,
                                attempt_count, failure_count, last_error, failed_at)
        select {_SID}, 'mailer', '#97', 'event', null, 96, 97, 5, 5,
               'TimeoutError: ' || s, now()
          from generate_series(1, {SESSIONS}) s where s % {DEAD_EVERY} = 0""",
    f"""insert into a2_cursors (session_id, consumer, cursor_key, kind, lane, position, head,
                                attempt_count, failure_count, last_error, failed_at)
        select {_SID}, 'billing', 'Lslow', 'lane', 'slow', 89, 90, 5, 5, 'ValueError', now()
          from generate_series(1, {SESSIONS}) s where s % {DEAD_EVERY} = 0""",
    f"""insert into a2_lane_events (session_id, consumer, lane, idx, done, completed_attempt)
        select {_SID}, 'billing', 'main', i, true, 1
          from generate_series(1, {SESSIONS}) s, generate_series(76, 95) i""",
    f"""insert into a2_lane_events (session_id, consumer, lane, idx, done)
        select {_SID}, 'billing', 'slow', i, false
          from generate_series(1, {SESSIONS}) s, generate_series(90, 94) i
         where s % {DEAD_EVERY} = 0""",
    f"""insert into a2_cursors (session_id, consumer, cursor_key, kind, lane, position, head,
                                types, attempt_count, failure_count, last_error, failed_at)
        select {_SID}, 'audit', 'Llog', 'log', 'log', 79, 80, array['order.placed'], 5, 5,
               'KeyError', now()
          from generate_series(1, {SESSIONS}) s where s % 200 = 0""",
    """insert into a2_consumers (name, lane, types, backfill, registered_at, updated_at)
       values ('audit', 'log', array['order.placed'], false, now(), now())""",
    "analyze",
]
COLD_TABLES = ("a2_cursors", "a2_events", "a2_lane_events")
"""What no monitoring statement may read whole."""


@pytest.fixture(scope="module")
def loaded_dsn(postgres_template: DatabaseTemplate) -> Iterator[str]:
    dsn = postgres_template.clone("a2pg_monitoring_plans")
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for statement in LOAD:
                conn.execute(statement)
            row = conn.execute("select count(*) from a2_cursors").fetchone()
            assert row is not None and row[0] > 190_000
        yield dsn
    finally:
        drop_database(postgres_template.server_dsn, str(conninfo_to_dict(dsn)["dbname"]))


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> PlanSpy:
    from a2pg.postgres import database

    watcher = PlanSpy()
    monkeypatch.setattr(database, "execute", watcher.execute)
    return watcher


async def generic(dsn: str, explained: Explained) -> Explained:
    """The same statement prepared and planned generic (its parameters unknown)."""
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", explained.text)))
    numbered = re.sub(r"%\((\w+)\)s", lambda m: f"${names.index(m[1]) + 1}", explained.text)
    values = sql.SQL(", ").join(sql.Literal(explained.params[name]) for name in names)
    async with await AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute("set plan_cache_mode = force_generic_plan")
        await conn.execute(sql.SQL("prepare a2pg_generic as {}").format(sql.SQL(numbered)))
        cur = await conn.execute(
            sql.SQL("explain (format json) execute a2pg_generic ({})").format(values)
        )
        row = await cur.fetchone()
    assert row is not None
    return Explained(f"{explained.name} (generic)", numbered, {}, row[0][0]["Plan"])


async def assert_cheap(dsn: str, explained: Explained, *indexes: str) -> None:
    """No Seq Scan of a cold table, custom or generic; ``indexes`` are read."""
    for plan in (explained, await generic(dsn, explained)):
        assert_no_seq_scan(plan)
        cold = [s for s in scans(plan) if s[0] == "Seq Scan" and s[1] in COLD_TABLES]
        assert not cold, f"{plan.name} seq-scans {cold}"
        used = {n["Index Name"] for n in nodes(plan.plan) if "Index Name" in n}
        for index in indexes:
            assert index in used, f"{plan.name} does not read {index}: {scans(plan)}"


async def test_consumer_stats_reads_only_live_and_dead_heads(loaded_dsn: str, spy: PlanSpy) -> None:
    async with opened(loaded_dsn) as store:
        stats = {s.consumer: s for s in await store.consumer_stats()}
    assert sorted(stats) == ["audit", "billing", "mailer"]
    mailer, billing, audit = stats["mailer"], stats["billing"], stats["audit"]
    assert (mailer.ready, mailer.backing_off, mailer.dead_letters) == (400, 40, 20)
    assert (billing.claimed, billing.dead_letters, billing.blocked_lanes) == (100, 20, 20)
    assert billing.blocked == 20 * 4
    assert (audit.dead_letters, audit.blocked, audit.registered) == (10, 10 * 2, True)
    (explained,) = spy.of("consumer_stats")
    await assert_cheap(loaded_dsn, explained, "a2_cursors_ready", "a2_cursors_dead")


@pytest.mark.parametrize(
    "query",
    [
        DeadLetterQuery(limit=10),
        DeadLetterQuery(consumer="billing", limit=5),
        DeadLetterQuery(error="timeouterror", limit=5),
        DeadLetterQuery(session_prefix="s010", limit=5),
        DeadLetterQuery(after=DeadLetterKey("s01000", "billing", "slow", 90), limit=10),
    ],
    ids=["first-page", "consumer", "error", "prefix", "after"],
)
async def test_find_dead_letters_pages_the_dead_index(
    loaded_dsn: str, spy: PlanSpy, query: DeadLetterQuery
) -> None:
    async with opened(loaded_dsn) as store:
        heads = await store.find_dead_letters(query)
    assert heads
    (explained,) = spy.of("find_dead_letters")
    await assert_cheap(loaded_dsn, explained, "a2_cursors_dead")


@pytest.mark.parametrize("after", [None, "s01000"], ids=["first-page", "later-page"])
async def test_sessions_reads_each_listed_sessions_heads_only(
    loaded_dsn: str, spy: PlanSpy, after: str | None
) -> None:
    async with opened(loaded_dsn) as store:
        page = await store.sessions(after=after, limit=200)
    assert len(page) == 200
    assert sum(info.blocked for info in page) == 2 * 4 + 2  # two dead lanes, one dead log
    (explained,) = spy.of("sessions_page")
    await assert_cheap(loaded_dsn, explained, "a2_cursors_heads")


async def test_a_large_sessions_page_is_costed_below_the_jit_threshold(
    loaded_dsn: str, spy: PlanSpy
) -> None:
    """A page of 1,000 sessions reads in milliseconds; costed above ``jit_above_cost`` it
    would first be JIT-compiled, which takes longer than reading it (the trap of guessing
    many heads per session, see sessions_page)."""
    async with opened(loaded_dsn) as store:
        assert len(await store.sessions(limit=1_000)) == 1_000
        await store.consumer_stats()
    async with await AsyncConnection.connect(loaded_dsn) as conn:
        cur = await conn.execute("select current_setting('jit_above_cost')::float8")
        row = await cur.fetchone()
    assert row is not None
    for name in ("sessions_page", "consumer_stats"):
        (explained,) = spy.of(name)
        assert explained.plan["Total Cost"] < row[0], (name, explained.plan["Total Cost"])
