"""find_heads on a large table: 20,000 ready heads, 10,000 held back in three states, and
100,000 finished cursors (the bulk of a2_cursors). A page walks a2_cursors_ready in claim
order and stops at its limit, as a custom plan (what the store runs first) and as a
generic one (what a prepared statement may settle on): EXPLAIN (ANALYZE, BUFFERS) shows
how many index entries and pages a page reads, the first page as a page deep down the
list. The statement runs through the store, watched by test_plans' spy."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any, LiteralString

import psycopg
import pytest
from psycopg import AsyncConnection, sql
from psycopg.conninfo import conninfo_to_dict

from a2pg.models import FoundHead, HeadKey, HeadQuery
from a2pg.testing import DatabaseTemplate, drop_database
from tests.postgres.test_plans import Explained, PlanSpy, nodes, opened, scans

pytestmark = [pytest.mark.postgres]

SESSIONS = 5_000
READY_PER_SESSION = 4  # 20,000 ready heads
HELD = SESSIONS // 5  # 1,000 leased heads; 2,500 backing off, 2,500 scheduled after them
FINISHED_PER_SESSION = 20  # 100,000 finished event cursors
PAGE = 50
COLD_TABLES = ("a2_cursors", "a2_events")

_SID = "'s' || lpad(s::text, 5, '0')"
LOAD: list[LiteralString] = [
    f"""insert into a2_sessions (session_id, head, clear_index, created_at)
        select {_SID}, 30, 0, now() from generate_series(1, {SESSIONS}) s""",
    f"""insert into a2_events (session_id, idx, event_id, event_type, payload, created_at)
        select {_SID}, i, s || ':' || i,
               case when i % 2 = 0 then 'order.placed' else 'work' end,
               json_build_object('n', i), now() - interval '1 day' + i * interval '1 second'
          from generate_series(1, {SESSIONS}) s, generate_series(1, 30) i""",
    f"""insert into a2_cursors (session_id, consumer, cursor_key, kind, lane, position, head,
                                completed_idx, completed_attempt)
        select {_SID}, 'mailer', '#' || i, 'event', null, i, null, i, 1
          from generate_series(1, {SESSIONS}) s, generate_series(1, {FINISHED_PER_SESSION}) i""",
    # Ready: every head its own time, 10 ms apart, the oldest an hour ago.
    f"""insert into a2_cursors (session_id, consumer, cursor_key, kind, lane, position, head,
                                ready_at)
        select {_SID}, case when i % 2 = 0 then 'mailer' else 'billing' end, '#' || (20 + i),
               'event', null, 19 + i, 20 + i,
               now() - interval '1 hour' + (s * {READY_PER_SESSION} + i) * interval '10 ms'
          from generate_series(1, {SESSIONS}) s, generate_series(1, {READY_PER_SESSION}) i""",
    # Held back, as workers leave them: leased lane heads whose leases end soonest (every
    # fifth session: what a few workers hold; in five minutes, so none lapses while the
    # tests run), then event heads backing off and scheduled, alternately, from ten
    # minutes on.
    f"""insert into a2_cursors (session_id, consumer, cursor_key, kind, lane, position, head,
                                ready_at, attempt_count, claim_holder, claim_expires_at)
        select {_SID}, 'billing', 'Lmain', 'lane', 'main', 25, 26,
               now() + interval '5 minutes' + s * interval '5 ms', 1, 'w-elsewhere',
               now() + interval '5 minutes' + s * interval '5 ms'
          from generate_series(1, {SESSIONS}) s where s % 5 = 0""",
    f"""insert into a2_cursors (session_id, consumer, cursor_key, kind, lane, position, head,
                                ready_at, attempt_count, failure_count, last_error)
        select {_SID}, 'mailer', '#27', 'event', null, 26, 27,
               now() + interval '10 minutes' + s * interval '10 ms',
               case when s % 2 = 0 then 1 else 0 end, case when s % 2 = 0 then 1 else 0 end,
               case when s % 2 = 0 then 'TimeoutError: ' || s end
          from generate_series(1, {SESSIONS}) s""",
    # A dead letter in every hundredth session (no ready_at: in no state).
    f"""insert into a2_cursors (session_id, consumer, cursor_key, kind, lane, position, head,
                                attempt_count, failure_count, last_error, failed_at)
        select {_SID}, 'mailer', '#28', 'event', null, 27, 28, 3, 3, 'ValueError', now()
          from generate_series(1, {SESSIONS}) s where s % 100 = 0""",
    "analyze",
]


@pytest.fixture(scope="module")
def loaded_dsn(postgres_template: DatabaseTemplate) -> Iterator[str]:
    dsn = postgres_template.clone("a2pg_find_heads_plans")
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for statement in LOAD:
                conn.execute(statement)
        yield dsn
    finally:
        drop_database(postgres_template.server_dsn, str(conninfo_to_dict(dsn)["dbname"]))


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> PlanSpy:
    from a2pg.postgres import database

    watcher = PlanSpy()
    monkeypatch.setattr(database, "execute", watcher.execute)
    return watcher


async def analyzed(dsn: str, explained: Explained, *, generic: bool) -> Explained:
    """The statement run under EXPLAIN (ANALYZE, BUFFERS) with the store's parameters: as
    it is, or prepared and planned generic (its parameters unknown)."""
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", explained.text)))
    async with await AsyncConnection.connect(dsn, autocommit=True) as conn:
        if generic:
            numbered = re.sub(r"%\((\w+)\)s", lambda m: f"${names.index(m[1]) + 1}", explained.text)
            values = sql.SQL(", ").join(sql.Literal(explained.params[name]) for name in names)
            await conn.execute("set plan_cache_mode = force_generic_plan")
            await conn.execute(sql.SQL("prepare a2pg_generic as {}").format(sql.SQL(numbered)))
            statement = sql.SQL(
                "explain (analyze, buffers, format json) execute a2pg_generic ({})"
            ).format(values)
            cur = await conn.execute(statement)
        else:
            text = sql.SQL("explain (analyze, buffers, format json) {}").format(
                sql.SQL(explained.text)
            )
            cur = await conn.execute(text, explained.params)
        row = await cur.fetchone()
    assert row is not None
    kind = "generic" if generic else "custom"
    return Explained(f"{explained.name} ({kind})", explained.text, {}, row[0][0]["Plan"])


def ready_index_reads(plan: Explained) -> tuple[int, int]:
    """Rows the a2_cursors_ready scans returned (the walk from one time to the next, and
    each time's heads), and the buffers the whole plan touched."""
    walks = [n for n in nodes(plan.plan) if n.get("Index Name") == "a2_cursors_ready"]
    assert walks, scans(plan)
    rows = sum(int(n["Actual Rows"]) * int(n["Actual Loops"]) for n in walks)
    top = plan.plan
    return rows, int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"])


async def page_of(dsn: str, spy: PlanSpy, query: HeadQuery) -> tuple[list[FoundHead], Explained]:
    async with opened(dsn) as store:
        found = await store.find_heads(query)
    (explained,) = spy.of("find_heads")
    return found, explained


QUERIES: dict[str, tuple[HeadQuery, int, int]] = {
    "ready": (HeadQuery("ready", limit=PAGE), 1, 0),
    "ready-one": (HeadQuery("ready", limit=1), 1, 0),
    "held": (HeadQuery("held", limit=PAGE), 1, 0),
    "backing-off": (HeadQuery("backing_off", limit=PAGE), 2, HELD),
    "scheduled": (HeadQuery("scheduled", limit=PAGE), 2, HELD),
    "ready-of-mailer": (HeadQuery("ready", consumer="mailer", limit=PAGE), 2, 0),
    "ready-orders": (HeadQuery("ready", event_type="order.placed", limit=PAGE), 2, 0),
    "ready-of-some": (HeadQuery("ready", session_prefix="s0", limit=PAGE), 1, 0),
    "backing-off-timeouts": (HeadQuery("backing_off", error="timeouterror", limit=PAGE), 2, HELD),
}
"""Each query; how many heads the walk passes per head it lists (its filters keep every
other head, or all); and how many heads of other states come before its first (the
leases end soonest: a page of heads backing off or scheduled walks past them)."""


@pytest.mark.parametrize("name", list(QUERIES))
async def test_a_first_page_reads_the_heads_up_to_its_last_and_no_more(
    loaded_dsn: str, spy: PlanSpy, name: str
) -> None:
    query, per_head, ahead = QUERIES[name]
    found, explained = await page_of(loaded_dsn, spy, query)
    assert len(found) == query.limit
    assert [f.key for f in found] == sorted(f.key for f in found)
    walked = ahead + per_head * query.limit
    for generic in (False, True):
        plan = await analyzed(loaded_dsn, explained, generic=generic)
        cold = [s for s in scans(plan) if s[0] == "Seq Scan" and s[1] in COLD_TABLES]
        assert not cold, f"{plan.name} seq-scans {cold}"
        rows, buffers = ready_index_reads(plan)
        # Each head walked: one probe for its time, one read at that time; a dozen pages
        # (index, heap, its event, its session) per head listed.
        assert rows <= 2 * walked + 4, (plan.name, rows, scans(plan))
        assert buffers <= 16 * walked + 200, (plan.name, buffers)


async def test_a_page_deep_down_reads_no_more_than_the_first(loaded_dsn: str, spy: PlanSpy) -> None:
    """Keyset paging: a page 15,000 heads in starts at its key in the index, not at an
    offset, so it reads what the first page reads."""
    async with opened(loaded_dsn) as store:
        [oldest] = await store.find_heads(HeadQuery("ready", limit=1))
    deep = HeadKey(oldest.since + timedelta(seconds=15_000 * 0.010), "s00000", 1, "a", "")
    spy.seen.clear()
    found, explained = await page_of(loaded_dsn, spy, HeadQuery("ready", after=deep, limit=PAGE))
    assert len(found) == PAGE
    assert found[0].since >= deep.ready_at
    for generic in (False, True):
        plan = await analyzed(loaded_dsn, explained, generic=generic)
        rows, buffers = ready_index_reads(plan)
        assert rows <= 2 * PAGE + 4, (plan.name, rows, scans(plan))
        assert buffers <= 16 * PAGE + 200, (plan.name, buffers)


async def test_paging_the_whole_backlog_repeats_and_skips_nothing(
    loaded_dsn: str, spy: PlanSpy
) -> None:
    async with opened(loaded_dsn) as store:
        seen: list[Any] = []
        after: HeadKey | None = None
        while page := await store.find_heads(HeadQuery("scheduled", after=after, limit=300)):
            seen.extend(f.key for f in page)
            after = page[-1].key
    assert len(seen) == SESSIONS // 2 == len(set(seen))
    assert seen == sorted(seen)
