"""claim_any: the claim across sessions, oldest ready work first, for worker pools."""

from __future__ import annotations

import asyncio

from a2pg import Completed, Completion, Consumer, Head, Target
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import (
    HOLDER,
    OTHER_HOLDER,
    TTL,
    MakeStore,
    append,
    at,
    claim,
    claim_one,
    completed,
    ev,
    fail,
    log_consumer,
    refs,
)


async def claim_any(store: Store, **options: object) -> list[Head]:
    options.setdefault("holder", HOLDER)
    options.setdefault("ttl", TTL)
    return await store.claim_any(**options)  # type: ignore[arg-type]


async def test_nothing_to_claim_is_empty(store: Store) -> None:
    assert await claim_any(store) == []
    await append(store, "s", ev(), ev())
    assert await claim_any(store) == []


async def test_the_claim_records_the_attempt(store: Store, clock: FakeClock) -> None:
    [stored] = await append(store, "s", ev(to=["c"]))
    [head] = await claim_any(store, ttl=12)
    assert head.event == stored
    assert (head.attempt, head.dispatch.claim_holder) == (1, HOLDER)
    assert head.dispatch.claim_expires_at == at(clock(), 12)
    assert head.clear_index is None
    [cursor] = await store.cursors("s")
    assert cursor.dispatch == head.dispatch


async def test_older_work_comes_first_across_sessions(store: Store, clock: FakeClock) -> None:
    for session in ("s-c", "s-a", "s-b"):
        await append(store, session, ev(to=["c"]))
        clock.advance(1)
    heads = await claim_any(store)
    assert [h.session_id for h in heads] == ["s-c", "s-a", "s-b"]


async def test_ties_go_by_session_then_index_then_consumer(store: Store) -> None:
    await append(store, "s-b", ev(to=["b", "a"]), ev(to=["a"]))
    await append(store, "s-a", ev(to=["z"]))
    heads = await claim_any(store)
    assert refs(heads) == [
        ("s-a", "z", None, 1),
        ("s-b", "a", None, 1),
        ("s-b", "b", None, 1),
        ("s-b", "a", None, 2),
    ]


async def test_limit_bounds_each_claim(store: Store, clock: FakeClock) -> None:
    for session in ("s1", "s2", "s3"):
        await append(store, session, ev(to=["c"]))
        clock.advance(1)
    first = await claim_any(store, limit=2)
    assert [h.session_id for h in first] == ["s1", "s2"]
    second = await claim_any(store, limit=2)
    assert [h.session_id for h in second] == ["s3"]
    assert await claim_any(store, limit=2) == []


async def test_only_served_consumers_are_claimed(store: Store) -> None:
    await append(store, "s1", ev(to=["c", "d"]))
    await append(store, "s2", ev(to=["e"]))
    heads = await claim_any(store, consumers=[Consumer("d"), Consumer("e")])
    assert refs(heads) == [("s1", "d", None, 1), ("s2", "e", None, 1)]
    assert await claim_any(store, consumers=[]) == []
    assert refs(await claim_any(store)) == [("s1", "c", None, 1)]


async def test_held_heads_wait_for_their_lease(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]))
    await claim_any(store)
    assert await claim_any(store, holder=OTHER_HOLDER) == []
    clock.advance(TTL)
    [again] = await claim_any(store, holder=OTHER_HOLDER)
    assert (again.attempt, again.failure_count, again.dispatch.claim_holder) == (
        2,
        1,
        OTHER_HOLDER,
    )


async def test_a_lease_end_is_the_ready_time(store: Store, clock: FakeClock) -> None:
    await append(store, "x", ev(to=["c"]))
    await claim_any(store, ttl=10)
    clock.advance(5)
    await append(store, "y", ev(to=["c"]))
    clock.advance(15)
    assert [h.session_id for h in await claim_any(store)] == ["y", "x"]


async def test_a_backoff_end_is_the_ready_time(store: Store, clock: FakeClock) -> None:
    await append(store, "x", ev(to=["c"]))
    [head] = await claim_any(store)
    await fail(store, head, retry_after=10)
    assert await claim_any(store) == []
    clock.advance(5)
    await append(store, "y", ev(to=["c"]))
    clock.advance(15)
    assert [h.session_id for h in await claim_any(store)] == ["y", "x"]


async def test_a_redrive_is_the_ready_time(store: Store, clock: FakeClock) -> None:
    await append(store, "x", ev(to=["c"]))
    await fail(store, await claim_one(store, "x"), max_failures=1)
    clock.advance(1)
    await append(store, "y", ev(to=["c"]))
    clock.advance(1)
    await store.redrive("x", consumer="c", index=1, action="retry")
    assert [h.session_id for h in await claim_any(store)] == ["y", "x"]


async def test_a_redriven_head_goes_before_newer_work(store: Store, clock: FakeClock) -> None:
    await append(store, "x", ev(to=["c"]))
    await fail(store, await claim_one(store, "x"), max_failures=1)
    clock.advance(1)
    await store.redrive("x", consumer="c", index=1, action="retry")
    clock.advance(1)
    await append(store, "y", ev(to=["c"]))
    clock.advance(5)
    assert [h.session_id for h in await claim_any(store)] == ["x", "y"]


async def test_lanes_hand_out_only_their_head(store: Store) -> None:
    await append(store, "s", ev(to=[Target("c", "q")]), ev(to=[Target("c", "q")]))
    [head] = await claim_any(store)
    await completed(store, head)
    [second] = await claim_any(store)
    assert (second.index, second.lane) == (2, "q")


async def test_log_cursors_are_claimed_too(store: Store) -> None:
    await append(store, "s", ev("a"), consumers=[log_consumer("audit")])
    [head] = await claim_any(store)
    assert (head.consumer, head.lane, head.index) == ("audit", "log", 1)


async def test_dead_lettering_claims_come_back_and_count_toward_the_limit(
    store: Store, clock: FakeClock
) -> None:
    await append(store, "x", ev(to=["c"]))
    await claim_any(store, ttl=5)
    clock.advance(6)
    await append(store, "y", ev(to=["c"]))
    clock.advance(10)
    [dead] = await claim_any(store, limit=1, max_failures=1)
    assert (dead.session_id, dead.dead_lettered, dead.failure_count) == ("x", True, 1)
    assert dead.dispatch.claim_holder is None
    [live] = await claim_any(store, limit=1, max_failures=1)
    assert (live.session_id, live.dead_lettered) == ("y", False)
    assert [h.session_id for h in await store.dead_letters("x")] == ["x"]
    assert await claim_any(store) == []


async def test_cleared_sessions_report_their_clear_index(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    await store.clear("s")
    await append(store, "s", ev(to=["c"]))
    [head] = await claim_any(store)
    assert (head.index, head.clear_index) == (3, 2)


async def test_concurrent_claimers_never_share_a_head(store: Store, make_store: MakeStore) -> None:
    other = await make_store()
    for n in range(6):
        await append(store, f"s{n}", ev(to=["c"]), ev(to=["d"]))
    first, second = await asyncio.gather(
        claim_any(store, limit=8), claim_any(other, holder=OTHER_HOLDER, limit=8)
    )
    taken = refs(first) + refs(second)
    assert len(taken) == len(set(taken))
    rest = await claim_any(store, limit=20)
    assert len(set(taken + refs(rest))) == len(taken + refs(rest)) == 12


async def test_a_large_backlog_keeps_its_order(store: Store, clock: FakeClock) -> None:
    for _ in range(2):
        await store.append("big", [ev(to=["c"]) for _ in range(600)])
    heads = await claim(store, "big")
    assert [h.index for h in heads] == list(range(1, 1201))
    done = [Completion("big", "c", None, h.index, h.attempt) for h in heads[:1100]]
    assert all(isinstance(r, Completed) for r in await store.complete_attempts(done))
    clock.advance(TTL)
    await append(store, "late", ev(to=["c"]))
    again = await claim_any(store, limit=150)
    assert [h.index for h in again[:100]] == list(range(1101, 1201))
    assert all(h.attempt == 2 for h in again[:100])
    assert refs(again[100:]) == [("late", "c", None, 1)]
