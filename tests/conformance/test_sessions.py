"""sessions(): each session with its head, clear index, pending work, dead letters, the work
its dead lanes hold back, and when its newest event was appended."""

from __future__ import annotations

from datetime import timedelta

from a2pg import SessionInfo, Target
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import append, claim, claim_one, completed, ev, fail, log_consumer


async def test_an_empty_store_lists_nothing(store: Store) -> None:
    assert await store.sessions() == []


async def test_sessions_come_by_id_with_their_counts(store: Store, clock: FakeClock) -> None:
    start = clock()
    await append(store, "b", ev(to=["c", "d"]), ev(to=[Target("e", "x")]))
    later = clock.advance(5)
    await append(store, "a", ev())
    await append(store, "c", ev(to=["c"]), ev(to=["c"]))
    await fail(store, await claim_one(store, "c", through=1), max_failures=1)
    assert await store.sessions() == [
        SessionInfo("a", head=1, clear_index=0, pending=0, dead_letters=0, last_event_at=later),
        SessionInfo("b", head=2, clear_index=0, pending=3, dead_letters=0, last_event_at=start),
        SessionInfo("c", head=2, clear_index=0, pending=1, dead_letters=1, last_event_at=later),
    ]


async def test_finished_work_is_not_pending(store: Store) -> None:
    await append(store, "s", ev(to=["c"]), ev(to=["d"]))
    first, _ = await claim(store, "s")
    await completed(store, first)
    [info] = await store.sessions()
    assert (info.pending, info.dead_letters, info.blocked) == (1, 0, 0)


async def test_a_clear_resets_the_counts(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]), ev(to=[Target("d", "x")]), ev(to=[Target("d", "x")]))
    await fail(store, await claim_one(store, "s", through=1), max_failures=1)
    await fail(store, await claim_one(store, "s", through=2), max_failures=1)
    cleared_at = clock.advance(1)
    await store.clear("s")
    assert await store.sessions() == [SessionInfo("s", 4, 4, 0, 0, 0, cleared_at)]


async def test_after_and_limit_page_through_sessions(store: Store) -> None:
    for name in ("e", "a", "d", "b", "c"):
        await append(store, name, ev())
    assert [i.session_id for i in await store.sessions(limit=2)] == ["a", "b"]
    assert [i.session_id for i in await store.sessions(after="b", limit=2)] == ["c", "d"]
    assert [i.session_id for i in await store.sessions(after="d")] == ["e"]
    assert await store.sessions(after="e") == []
    assert [i.session_id for i in await store.sessions(after="bb")] == ["c", "d", "e"]


async def test_a_dead_lettered_lane_counts_once_and_shows_what_it_holds_back(
    store: Store,
) -> None:
    lane = Target("c", "x")
    await append(store, "s", ev(to=[lane]), ev(to=[lane]), ev(to=[lane]), ev(to=["d"]))
    await fail(store, await claim_one(store, "s", through=1), max_failures=1)
    [info] = await store.sessions()
    assert (info.pending, info.dead_letters, info.blocked) == (1, 1, 2)


async def test_a_dead_lettered_log_head_holds_back_the_later_events_it_takes(
    store: Store,
) -> None:
    audit = log_consumer("audit", types=["order"])
    await append(store, "s", ev("order"), consumers=[audit])
    await fail(store, await claim_one(store, "s", consumers=[audit]), max_failures=1)
    await append(store, "s", ev("order"), ev("note"), ev("order"), consumers=[audit])
    [info] = await store.sessions()
    assert (info.pending, info.dead_letters, info.blocked) == (0, 1, 2)


async def test_pending_counts_heads_not_queued_events_and_delayed_heads_too(
    store: Store,
) -> None:
    """One lane head with two events queued behind it, one delayed event head: 2 pending."""
    lane = Target("c", "x")
    later = Target("d", not_before=timedelta(minutes=5))
    await append(store, "s", ev(to=[lane]), ev(to=[lane]), ev(to=[lane]), ev(to=[later]))
    [info] = await store.sessions()
    assert (info.pending, info.dead_letters, info.blocked) == (2, 0, 0)


async def test_a_session_whose_only_work_is_blocked_has_none_pending(store: Store) -> None:
    """A dead head at index 1 holding back the rest of its lane: pending 0, all blocked."""
    lane = Target("c", "x")
    await append(store, "s", *(ev(to=[lane]) for _ in range(30)))
    await fail(store, await claim_one(store, "s"), max_failures=1)
    [info] = await store.sessions()
    assert (info.pending, info.dead_letters, info.blocked) == (0, 1, 29)
