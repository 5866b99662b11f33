"""pause_consumers and resume_consumers: claims skip a paused consumer's heads, nothing else
changes, and a resume makes them claimable and wakes workers."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import pytest

from a2pg import A2Error, Completed, Consumer, Target
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import (
    HOLDER,
    MAX_FAILURES,
    TIMEOUT,
    TTL,
    MakeStore,
    append,
    assert_busy,
    assert_code,
    assert_settled,
    at,
    cancel,
    claim,
    close,
    completion,
    ev,
    fail,
    fingerprint,
    let_run,
    log_consumer,
    refs,
)

AUDIT = log_consumer("audit")


async def claim_all(store: Store, **options: Any) -> list[tuple[str, str, str | None, int]]:
    """Every head ``claim_any`` hands out now, as sorted refs."""
    heads = await store.claim_any(holder=HOLDER, ttl=TTL, limit=100, **options)
    return sorted(refs(heads), key=lambda r: (r[0], r[1], r[2] or "", r[3]))


async def paused_at(store: Store, name: str) -> datetime | None:
    """When ``name`` was paused, read from where each backend keeps it (the protocol has
    no read of the pause time; monitoring shows only whether a consumer is paused)."""
    from a2pg.memory import MemoryStore
    from a2pg.postgres import PostgresStore
    from a2pg.sqlite import SqliteStore

    if isinstance(store, MemoryStore):
        return store._registry.paused.get(name)
    if isinstance(store, PostgresStore):
        from psycopg import sql

        query = sql.SQL("select paused_at from {}.a2_consumer_pauses where consumer = %s")
        async with store.pool.connection() as conn:
            cur = await conn.execute(query.format(sql.Identifier(store.schema)), [name])
            row = await cur.fetchone()
        return None if row is None else row[0]
    assert isinstance(store, SqliteStore)
    from a2pg.sqlite import codec

    with sqlite3.connect(store.path) as conn:
        found = conn.execute(
            "select paused_at from a2_consumer_pauses where consumer = ?", [name]
        ).fetchone()
    return None if found is None else codec.time_of(found[0])


# -- claims skip paused consumers ----------------------------------------------------------


async def test_claim_any_skips_a_paused_consumers_heads(store: Store) -> None:
    await append(store, "s", ev(to=["c", "d"]))
    await append(store, "t", ev(to=["c"]))
    await store.pause_consumers(["c"])
    assert await claim_all(store) == [("s", "d", None, 1)]
    assert await claim_all(store, consumers=[Consumer("c")]) == []


async def test_a_paused_targeted_lane_and_log_consumer_are_all_skipped(store: Store) -> None:
    await append(store, "s", ev("a", to=[Target("lane", "x"), "event"]), consumers=[AUDIT])
    await store.pause_consumers(["lane", "audit", "event"])
    assert await claim_all(store) == []
    assert await claim_all(store, consumers=[AUDIT]) == []
    await assert_settled(store, "s", consumers=[AUDIT])


async def test_claim_available_skips_them_and_answers_settled(
    store: Store, clock: FakeClock
) -> None:
    await append(store, "s", ev(to=["c", "d"]))
    await store.pause_consumers(["c"])
    heads = await claim(store, "s")
    assert refs(heads) == [("s", "d", None, 1)]
    # d's head is leased now, c's paused: Busy until d's lease ends, for c alone Settled.
    await assert_busy(store, "s", at(clock(), TTL))
    await assert_settled(store, "s", consumers=[Consumer("c")])


async def test_a_paused_consumers_leased_head_is_not_busy(store: Store) -> None:
    """A paused consumer's heads are neither claimed nor counted: with nothing else to do,
    claim_available is Settled even while one of its attempts still runs."""
    await append(store, "s", ev(to=["c"]), ev(to=["c"]))
    [first, _] = await claim(store, "s")
    await fail(store, first, retry_after=60.0)
    await store.pause_consumers(["c"])
    await assert_settled(store, "s")
    assert await claim_all(store) == []


async def test_complete_and_claim_completes_but_claims_no_paused_heads(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    await append(store, "t", ev(to=["c", "d"]))
    [head] = [h for h in await claim(store, "s")]
    await store.pause_consumers(["c"])
    done = await store.complete_and_claim(
        [completion(head, ev("next", id="n1", to=["c", "d"]))], holder=HOLDER, ttl=TTL, limit=10
    )
    [result] = done.completed
    assert isinstance(result, Completed)
    assert sorted(refs(done.heads)) == [("s", "d", None, 2), ("t", "d", None, 1)]
    assert await claim_all(store) == []


async def test_the_pause_is_seen_by_every_store_at_its_next_claim(
    store: Store, make_store: MakeStore
) -> None:
    other = await make_store()
    await append(store, "s", ev(to=["c"]))
    await other.pause_consumers(["c"])
    assert await claim_all(store) == []
    await assert_settled(store, "s")


# -- what a pause leaves alone ---------------------------------------------------------------


async def test_pause_and_resume_keep_cursors_and_everything_else(store: Store) -> None:
    await append(store, "s", ev(to=["c", Target("c", "x")]), ev(to=[Target("c", "x")]))
    await append(store, "t", ev("a"), consumers=[AUDIT])
    before = await fingerprint(store, "s", "t")
    await store.pause_consumers(["c", "audit"])
    after_pause = await fingerprint(store, "s", "t")
    await store.resume_consumers(["c", "audit"])
    assert await fingerprint(store, "s", "t") == before
    # Only monitoring may tell a paused consumer apart (ConsumerStats.paused).
    assert after_pause[0] == before[0] and after_pause[1:3] == before[1:3]


async def test_running_attempts_finish_normally_while_paused(store: Store) -> None:
    await append(store, "s", *(ev(to=["c"]) for _ in range(4)))
    one, two, three, four = await claim(store, "s")
    await store.pause_consumers(["c"])
    assert isinstance(
        await store.complete_attempt(
            "s", consumer="c", lane=None, index=one.index, attempt=one.attempt
        ),
        Completed,
    )
    assert (await fail(store, two, retry_after=None)).outcome == "failed"
    renewed = await store.renew_claims("s", holder=HOLDER, claims=[three.attempt_ref], ttl=TTL)
    assert renewed.renewed == [three.ref]
    released = await store.release_claims("s", holder=HOLDER, claims=[four.attempt_ref])
    assert released.released == [four.ref]
    # The failed and the released heads are ready, yet not claimed while paused.
    assert await claim_all(store) == []
    await store.resume_consumers(["c"])
    assert await claim_all(store) == [("s", "c", None, two.index), ("s", "c", None, four.index)]


async def test_a_lapsed_lease_counts_no_failure_while_paused(
    store: Store, clock: FakeClock
) -> None:
    await append(store, "s", ev(to=["c"]))
    await claim(store, "s", max_failures=1)
    await store.pause_consumers(["c"])
    clock.advance(TTL + 1)
    assert await claim_all(store, max_failures=1) == []
    assert await store.dead_letters("s") == []
    await store.resume_consumers(["c"])
    [dead] = await store.claim_any(holder=HOLDER, ttl=TTL, max_failures=1)
    assert dead.dispatch.failed_at is not None  # judged only once claimed again


# -- pause and resume themselves -----------------------------------------------------------


async def test_resume_makes_the_heads_claimable_again(store: Store) -> None:
    await append(store, "s", ev(to=["c", "d"]))
    await store.pause_consumers(["c", "d"])
    assert await claim_all(store) == []
    await store.resume_consumers(["d"])
    assert await claim_all(store) == [("s", "d", None, 1)]
    await store.resume_consumers(["c"])
    assert refs(await claim(store, "s")) == [("s", "c", None, 1)]


async def test_pausing_twice_keeps_the_first_time(store: Store, clock: FakeClock) -> None:
    first = clock()
    await store.pause_consumers(["c"])
    clock.advance(60)
    await store.pause_consumers(["c", "d"])
    assert await paused_at(store, "c") == first
    assert await paused_at(store, "d") == clock()
    await store.resume_consumers(["c"])
    assert await paused_at(store, "c") is None
    await store.pause_consumers(["c"])
    assert await paused_at(store, "c") == clock()


async def test_resuming_what_is_not_paused_does_nothing(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    before = await fingerprint(store, "s")
    await store.resume_consumers(["c", "never-seen"])
    await store.resume_consumers([])
    await store.pause_consumers([])
    assert await fingerprint(store, "s") == before
    assert await paused_at(store, "c") is None
    assert await claim_all(store) == [("s", "c", None, 1)]


async def test_the_same_name_twice_is_one_pause(store: Store) -> None:
    await store.pause_consumers(["c", "c"])
    await store.resume_consumers(["c", "c"])
    assert await paused_at(store, "c") is None


async def _first_of(wakeups: AsyncIterator[str | None], wanted: set[str | None]) -> str | None:
    while True:
        value = await anext(wakeups)
        if value in wanted:
            return value


async def test_resume_wakes_the_sessions_of_the_resumed_heads(
    store: Store, make_store: MakeStore
) -> None:
    """Another client's resume reaches this store's wakeups (on PostgreSQL by NOTIFY or
    the poll, which test_pause_notify.py tells apart; on SQLite by the file's change);
    nothing else is written meanwhile, so only the resume can wake for "s"."""
    writer = await make_store()
    await append(writer, "s", ev(to=["c"]))
    await writer.pause_consumers(["c"])
    wakeups = store.wakeups()
    waiting: asyncio.Future[str | None] | None = None
    try:
        waiting = asyncio.ensure_future(_first_of(wakeups, {None, "warm-up"}))
        await let_run()
        await append(writer, "warm-up", ev(to=["warm"]))
        await asyncio.wait_for(waiting, TIMEOUT)
        waiting = asyncio.ensure_future(_first_of(wakeups, {"s"}))
        await let_run()
        await writer.resume_consumers(["c"])
        assert await asyncio.wait_for(waiting, TIMEOUT) == "s"
    finally:
        await cancel(waiting)
        await close(wakeups)
    assert await claim_all(store, consumers=[Consumer("c")]) == [("s", "c", None, 1)]


async def test_resume_wakes_its_own_stores_wakeups_at_once(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    await store.pause_consumers(["c"])
    wakeups = store.wakeups()
    waiting: asyncio.Future[str | None] | None = None
    try:
        waiting = asyncio.ensure_future(_first_of(wakeups, {"s"}))
        await let_run()
        await store.resume_consumers(["c"])
        assert await asyncio.wait_for(waiting, TIMEOUT) == "s"
    finally:
        await cancel(waiting)
        await close(wakeups)


# -- names are checked -----------------------------------------------------------------------

BAD_NAMES: list[Any] = [
    None,
    "c",
    [None],
    [1],
    [""],
    ["c", ""],
    ["c", "a\x00b"],
    ["c", "\ud800"],
    ["x" * 10_000],
    ["c"] * 1_001,  # past Limits.max_consumers
]


@pytest.mark.parametrize("operation", ["pause_consumers", "resume_consumers"])
@pytest.mark.parametrize("names", BAD_NAMES, ids=[repr(n)[:20] for n in BAD_NAMES])
async def test_bad_names_are_refused_and_write_nothing(
    store: Store, operation: str, names: Any
) -> None:
    await append(store, "s", ev(to=["c"]))
    await store.pause_consumers(["d"])
    before = await fingerprint(store, "s")
    with pytest.raises(A2Error) as error:
        await getattr(store, operation)(names)
    assert_code(error, "INVALID_ARGUMENT")
    assert await fingerprint(store, "s") == before
    assert await paused_at(store, "c") is None
    assert await paused_at(store, "d") is not None
    assert await claim_all(store) == [("s", "c", None, 1)]


async def test_max_failures_is_kept_by_a_resumed_claim(store: Store) -> None:
    """A resumed head is claimed like any other: its attempts and failures kept."""
    await append(store, "s", ev(to=["c"]))
    head = (await claim(store, "s"))[0]
    await fail(store, head)
    await store.pause_consumers(["c"])
    await store.resume_consumers(["c"])
    [again] = await store.claim_any(holder=HOLDER, ttl=TTL, max_failures=MAX_FAILURES)
    assert (again.attempt, again.dispatch.failure_count) == (2, 1)
