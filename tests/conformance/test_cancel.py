"""cancel_head: skip or dead-letter a live head, fenced against its running attempt."""

from __future__ import annotations

from datetime import timedelta

import pytest

from a2pg import ANY_LANE, CancelResult, InvalidArgument, Superseded, Target
from a2pg.contract.rules import CANCELLED_ERROR
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import (
    HOLDER,
    OTHER_HOLDER,
    TTL,
    append,
    assert_busy,
    assert_code,
    assert_settled,
    at,
    claim_one,
    complete,
    ev,
    fingerprint,
)


async def test_skipping_a_pending_lane_head_lets_the_lane_go_on(store: Store) -> None:
    await append(store, "s", ev("a", to=[Target("c", "l")]), ev("b", to=[Target("c", "l")]))
    result = await store.cancel_head("s", consumer="c", index=1, action="skip")
    assert result == CancelResult(True, None, True)
    head = await claim_one(store, "s")
    assert (head.index, head.event.type) == (2, "b")


async def test_skipping_an_event_head_leaves_the_cursor_idle(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    assert await store.cancel_head("s", consumer="c", index=1, lane=None, action="skip") == (
        CancelResult(True, None, False)
    )
    await assert_settled(store, "s")
    assert await store.dead_letters("s") == []


async def test_dead_lettering_a_pending_head_makes_it_redrivable(store: Store) -> None:
    await append(store, "s", ev("a", to=[Target("c", "l")]), ev("b", to=[Target("c", "l")]))
    result = await store.cancel_head("s", consumer="c", lane="l", index=1, action="dead_letter")
    assert result.cancelled and result.held_until is None
    [dead] = await store.dead_letters("s")
    assert (dead.index, dead.dispatch.last_error, dead.failure_count) == (1, CANCELLED_ERROR, 0)
    await assert_settled(store, "s")
    redriven = await store.redrive("s", consumer="c", index=1, action="retry")
    assert redriven.redriven
    assert (await claim_one(store, "s")).index == 1


async def test_a_claimed_head_skipped_fences_its_attempt_and_holds_the_lane(
    store: Store, clock: FakeClock
) -> None:
    await append(store, "s", ev("a", to=[Target("c", "l")]), ev("b", to=[Target("c", "l")]))
    running = await claim_one(store, "s")
    clock.advance(5)
    result = await store.cancel_head("s", consumer="c", index=1, action="skip")
    lease_end = at(clock(), TTL - 5)
    assert result == CancelResult(True, lease_end, True)
    # The running attempt can no longer complete, fail or renew.
    assert await complete(store, running) == Superseded()
    renewed = await store.renew_claims("s", holder=HOLDER, claims=[running.attempt_ref], ttl=TTL)
    assert renewed.renewed == []
    # The lane's next head waits for the old lease: never two heads of a lane at once.
    await assert_busy(store, "s", lease_end, holder=OTHER_HOLDER)
    assert await store.claim_any(holder=OTHER_HOLDER, ttl=TTL, limit=5) == []
    clock.advance(TTL - 5)
    nxt = await claim_one(store, "s", holder=OTHER_HOLDER)
    assert (nxt.index, nxt.failure_count, nxt.attempt) == (2, 0, 1)


async def test_a_claimed_head_dead_lettered_fences_its_attempt(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    running = await claim_one(store, "s")
    result = await store.cancel_head("s", consumer="c", index=1, action="dead_letter")
    assert result.cancelled and result.held_until is not None
    assert await complete(store, running) == Superseded()
    [dead] = await store.dead_letters("s")
    assert dead.dispatch.claim_holder is None


async def test_a_delayed_head_can_be_skipped(store: Store) -> None:
    later = timedelta(hours=1)
    await append(
        store, "s", ev("a", to=[Target("c", "l", not_before=later)]), ev("b", to=[Target("c", "l")])
    )
    await store.cancel_head("s", consumer="c", index=1, action="skip")
    assert (await claim_one(store, "s")).index == 2


async def test_nothing_to_cancel(store: Store) -> None:
    await append(store, "s", ev(to=["c"]), ev(to=[Target("d", "l")]))
    head = await claim_one(store, "s", consumers=None, through=1)
    await complete(store, head)
    missing = CancelResult(False, None, True)
    assert await store.cancel_head("s", consumer="c", index=1, action="skip") == missing
    assert await store.cancel_head("s", consumer="c", index=9, action="skip") == missing
    assert await store.cancel_head("s", consumer="d", index=2, lane="x", action="skip") == missing
    assert await store.cancel_head("nowhere", consumer="c", index=1, action="skip") == (
        CancelResult(False, None, False)
    )
    await store.cancel_head("s", consumer="d", index=2, action="dead_letter")
    # A dead head is redrive's, not cancel's.
    assert not (await store.cancel_head("s", consumer="d", index=2, action="skip")).cancelled


async def test_a_cleared_head_is_not_cancelled(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    await store.clear("s")
    assert not (await store.cancel_head("s", consumer="c", index=1, action="skip")).cancelled


@pytest.mark.parametrize(
    ("options", "fragments"),
    [
        ({"action": "retry"}, ("cancel action",)),
        ({"action": None}, ("cancel action",)),
        ({"index": 0}, ("index",)),
        ({"index": "1"}, ("index",)),
        ({"consumer": ""}, ("consumer name",)),
        ({"lane": ""}, ("lane",)),
        ({"session_id": ""}, ("session id",)),
        ({"consumers": "c"}, ("consumers",)),
    ],
)
async def test_bad_arguments_are_refused_and_write_nothing(
    store: Store, options: dict[str, object], fragments: tuple[str, ...]
) -> None:
    await append(store, "s", ev(to=["c"]))
    before = await fingerprint(store, "s")
    call: dict[str, object] = {
        "session_id": "s",
        "consumer": "c",
        "index": 1,
        "action": "skip",
        "lane": ANY_LANE,
    }
    call.update(options)
    session_id = call.pop("session_id")
    with pytest.raises(InvalidArgument) as error:
        await store.cancel_head(session_id, **call)  # type: ignore[arg-type]
    assert_code(error, "INVALID_ARGUMENT", *fragments)
    assert await fingerprint(store, "s") == before
