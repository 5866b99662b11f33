"""claim_available: what is eligible, the dispatch it records, Busy and Settled."""

from __future__ import annotations

from a2pg import Claimed, ClaimRef, Consumer, Dispatch, Target
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import (
    HOLDER,
    OTHER_HOLDER,
    TTL,
    append,
    assert_busy,
    assert_settled,
    at,
    claim,
    claim_one,
    claim_result,
    completed,
    ev,
    refs,
)


async def test_unknown_session_is_settled(store: Store) -> None:
    await assert_settled(store, "nobody")


async def test_session_without_cursor_work_is_settled(store: Store) -> None:
    await append(store, "s", ev(), ev())
    await assert_settled(store, "s")


async def test_claim_records_the_attempt(store: Store, clock: FakeClock) -> None:
    [stored] = await append(store, "s", ev("job", {"n": 1}, to=["c"]))
    appended = clock()
    clock.advance(3)
    now = clock()
    result = await claim_result(store, "s")
    assert isinstance(result, Claimed)
    assert result.head == 1
    [head] = result.heads
    assert head.event == stored
    assert (head.consumer, head.lane, head.clear_index) == ("c", None, None)
    assert head.dispatch == Dispatch(
        attempt_count=1,
        first_claimed_at=now,
        last_claimed_at=now,
        last_ready_at=appended,
        claim_holder=HOLDER,
        claim_expires_at=at(now, TTL),
    )
    assert head.attempt == 1


async def test_claimed_reports_the_session_head(store: Store) -> None:
    await append(store, "s", ev(to=["c"]), ev(), ev())
    result = await claim_result(store, "s")
    assert isinstance(result, Claimed)
    assert result.head == 3


async def test_all_eligible_heads_are_claimed_by_index_then_consumer(store: Store) -> None:
    await append(
        store,
        "s",
        ev(to=["b", "a"]),
        ev(),
        ev(to=[Target("b", "x"), "a"]),
        ev(to=["c"]),
    )
    heads = await claim(store, "s")
    assert refs(heads) == [
        ("s", "a", None, 1),
        ("s", "b", None, 1),
        ("s", "a", None, 3),
        ("s", "b", "x", 3),
        ("s", "c", None, 4),
    ]


async def test_the_same_event_gives_each_consumer_its_own_attempt(store: Store) -> None:
    await append(store, "s", ev(to=["a", "b"]))
    heads = await claim(store, "s")
    assert [(h.consumer, h.attempt) for h in heads] == [("a", 1), ("b", 1)]
    await completed(store, heads[0])
    assert [c.consumer for c in await store.cursors("s")] == ["b"]


async def test_a_held_head_is_busy_until_its_lease_ends(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    expiry = head.dispatch.claim_expires_at
    assert expiry is not None
    await assert_busy(store, "s", expiry)
    await assert_busy(store, "s", expiry, holder=OTHER_HOLDER)
    clock.advance(TTL - 1)
    await assert_busy(store, "s", expiry)


async def test_a_lease_ends_exactly_at_its_expiry(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]))
    await claim_one(store, "s")
    clock.advance(TTL)
    again = await claim_one(store, "s", holder=OTHER_HOLDER)
    assert (again.attempt, again.dispatch.claim_holder) == (2, OTHER_HOLDER)


async def test_busy_names_the_earliest_expiry(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["a"]))
    await claim_one(store, "s", ttl=100)
    clock.advance(1)
    await append(store, "s", ev(to=["b"]))
    short = await claim_one(store, "s", ttl=10)
    assert short.dispatch.claim_expires_at == at(clock(), 10)
    await assert_busy(store, "s", at(clock(), 10))


async def test_new_heads_are_claimed_beside_held_ones(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    await claim_one(store, "s")
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    assert (head.index, head.attempt) == (2, 1)


async def test_exclude_skips_the_named_heads(store: Store) -> None:
    await append(store, "s", ev(to=["c", "d"]), ev(to=["c"]))
    heads = await claim(store, "s", exclude=[ClaimRef("c", None, 1), ClaimRef("c", None, 2)])
    assert refs(heads) == [("s", "d", None, 1)]


async def test_excluding_everything_is_settled(store: Store) -> None:
    await append(store, "s", ev(to=[Target("c", "x")]))
    await assert_settled(store, "s", exclude=[ClaimRef("c", "x", 1)])
    head = await claim_one(store, "s")
    assert head.attempt == 1


async def test_exclude_names_the_lane_too(store: Store) -> None:
    await append(store, "s", ev(to=[Target("c", "x")]))
    head = await claim_one(store, "s", exclude=[ClaimRef("c", None, 1), ClaimRef("c", "y", 1)])
    assert (head.consumer, head.lane) == ("c", "x")


async def test_exclude_removes_exactly_the_named_head_not_its_lane(store: Store) -> None:
    """SPEC 2.4: a head "in ``exclude``" is not eligible, and a ``ClaimRef`` names one head,
    ``(consumer, lane, index)``: a2pg excludes exactly that head, on every backend.

    The JavaScript seed (0.22.0, store-memory.js and store-sqlite.js) matched exclusions by
    cursor key, ``cursorKey(consumer, lane, index)``, which is ``consumer\\0#<index>`` for an
    event cursor but ``consumer\\0L<lane>`` for a lane, the index dropped: a ``ClaimRef``
    naming a lane excluded that whole lane cursor, whatever its current head.
    """
    x, y = Target("c", "x"), Target("c", "y")
    await append(store, "s", ev(to=[x, y, "c"]), ev(to=[x, y, "c"]))
    # Lane x's head excluded: x yields nothing (its event 2 is not its head yet), but the
    # same consumer's lane y and its event cursors are claimed.
    heads = await claim(store, "s", exclude=[ClaimRef("c", "x", 1)])
    assert refs(heads) == [("s", "c", None, 1), ("s", "c", "y", 1), ("s", "c", None, 2)]
    # Naming an index that is not lane x's head (nor any event cursor's) excludes nothing;
    # the seed would have excluded lane x here.
    not_heads = [ClaimRef("c", "x", 2), ClaimRef("c", None, 3)]
    [head] = await claim(store, "s", exclude=not_heads)
    assert (head.lane, head.index) == ("x", 1)
    # Once lane x has moved past the excluded index, that exclusion no longer holds it back.
    await completed(store, head)
    heads = await claim(store, "s", exclude=[ClaimRef("c", "x", 1)])
    assert refs(heads) == [("s", "c", "x", 2)]


async def test_only_served_consumers_are_claimed(store: Store) -> None:
    await append(store, "s", ev(to=["c", "d"]), ev(to=["e"]))
    heads = await claim(store, "s", consumers=[Consumer("d"), Consumer("e")])
    assert refs(heads) == [("s", "d", None, 1), ("s", "e", None, 2)]
    leftover = await claim(store, "s")
    assert refs(leftover) == [("s", "c", None, 1)]


async def test_serving_no_consumer_is_settled(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    await assert_settled(store, "s", consumers=[])


async def test_held_heads_of_other_consumers_do_not_make_busy(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    await claim_one(store, "s")
    await assert_settled(store, "s", consumers=[Consumer("d")])


async def test_through_bounds_the_claimed_heads(store: Store) -> None:
    await append(store, "s", ev(to=["c"]), ev(to=["c"]), ev(to=["c"]))
    heads = await claim(store, "s", through=2)
    assert [h.index for h in heads] == [1, 2]
    assert [h.index for h in await claim(store, "s")] == [3]


async def test_through_below_every_head_is_settled(store: Store) -> None:
    await append(store, "s", ev(), ev(to=["c"]))
    await assert_settled(store, "s", through=1)


async def test_reclaiming_a_lapsed_lease_keeps_the_first_claim_time(
    store: Store, clock: FakeClock
) -> None:
    await append(store, "s", ev(to=["c"]))
    first = await claim_one(store, "s")
    clock.advance(TTL + 5)
    second = await claim_one(store, "s", holder=OTHER_HOLDER, ttl=7)
    assert second.dispatch.first_claimed_at == first.dispatch.first_claimed_at
    assert second.dispatch.last_claimed_at == clock()
    assert second.dispatch.claim_expires_at == at(clock(), 7)
    assert second.attempt == 2


async def test_cursor_listing_shows_the_claim(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    [cursor] = await store.cursors("s")
    assert cursor.dispatch == head.dispatch
    assert (cursor.kind, cursor.position, cursor.head) == ("event", 0, 1)


async def test_sessions_do_not_share_claims(store: Store) -> None:
    await append(store, "s1", ev(to=["c"]))
    await append(store, "s2", ev(to=["c"]))
    await claim_one(store, "s1")
    head = await claim_one(store, "s2")
    assert (head.session_id, head.attempt) == ("s2", 1)
