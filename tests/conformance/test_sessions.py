"""sessions(): each session with its head, clear index, pending work and dead letters."""

from __future__ import annotations

from a2pg import SessionInfo, Target
from a2pg.store import Store

from .helpers import append, claim, claim_one, completed, ev, fail


async def test_an_empty_store_lists_nothing(store: Store) -> None:
    assert await store.sessions() == []


async def test_sessions_come_by_id_with_their_counts(store: Store) -> None:
    await append(store, "b", ev(to=["c", "d"]), ev(to=[Target("e", "x")]))
    await append(store, "a", ev())
    await append(store, "c", ev(to=["c"]), ev(to=["c"]))
    await fail(store, await claim_one(store, "c", through=1), max_failures=1)
    assert await store.sessions() == [
        SessionInfo("a", head=1, clear_index=0, pending=0, dead_letters=0),
        SessionInfo("b", head=2, clear_index=0, pending=3, dead_letters=0),
        SessionInfo("c", head=2, clear_index=0, pending=1, dead_letters=1),
    ]


async def test_finished_work_is_not_pending(store: Store) -> None:
    await append(store, "s", ev(to=["c"]), ev(to=["d"]))
    first, _ = await claim(store, "s")
    await completed(store, first)
    [info] = await store.sessions()
    assert (info.pending, info.dead_letters) == (1, 0)


async def test_a_clear_resets_the_counts(store: Store) -> None:
    await append(store, "s", ev(to=["c"]), ev(to=["d"]))
    await fail(store, await claim_one(store, "s", through=1), max_failures=1)
    await store.clear("s")
    assert await store.sessions() == [SessionInfo("s", 3, 3, 0, 0)]


async def test_after_and_limit_page_through_sessions(store: Store) -> None:
    for name in ("e", "a", "d", "b", "c"):
        await append(store, name, ev())
    assert [i.session_id for i in await store.sessions(limit=2)] == ["a", "b"]
    assert [i.session_id for i in await store.sessions(after="b", limit=2)] == ["c", "d"]
    assert [i.session_id for i in await store.sessions(after="d")] == ["e"]
    assert await store.sessions(after="e") == []
    assert [i.session_id for i in await store.sessions(after="bb")] == ["c", "d", "e"]


async def test_a_dead_lettered_lane_counts_once(store: Store) -> None:
    await append(store, "s", ev(to=[Target("c", "x")]), ev(to=[Target("c", "x")]))
    await fail(store, await claim_one(store, "s"), max_failures=1)
    [info] = await store.sessions()
    assert (info.pending, info.dead_letters) == (0, 1)
